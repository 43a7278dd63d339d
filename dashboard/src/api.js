// The API client: the access token lives only in this closure (never in storage); the
// refresh token is the HttpOnly svc_refresh cookie, which only /auth/* requests carry.
// Scripts cannot see that cookie, so a flag in localStorage (no secret: "this browser signed
// in") says whether a load may try to resume the session; without it, a first visit would
// call /auth/refresh only to be told 401.
const SIGNED_IN = 'svc_signed_in';

function remember(signedIn) {
  try {
    if (signedIn) localStorage.setItem(SIGNED_IN, '1');
    else localStorage.removeItem(SIGNED_IN);
  } catch {
    /* storage switched off: every load then shows the sign-in form */
  }
}

function remembered() {
  try {
    return localStorage.getItem(SIGNED_IN) === '1';
  } catch {
    return false;
  }
}

/** A site's data API: siteApi(site, '/visitors') is /api/v1/sites/{id}/visitors. */
export function siteApi(site, path = '') {
  return `/api/v1/sites/${site.id}${path}`;
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const WORDS = {
  0: 'The service could not be reached. Check your connection and try again.',
  401: 'Your session has ended. Please sign in again.',
  403: 'Your role does not allow this action.',
  404: 'This item no longer exists, or you cannot see it.',
  429: 'Too many requests right now. Wait a moment and try again.',
  503: 'The service is briefly unavailable. Try again in a moment.',
};

/** A user-facing sentence for any failure. */
export function describeError(error) {
  if (error instanceof ApiError) {
    if (error.status === 422 || error.status === 409 || error.status === 400) return error.message;
    // A report too heavy to work out in time: the server's words say what helps (a shorter range).
    if (error.code === 'report_time_limit') return error.message;
    return WORDS[error.status] || error.message || `The request failed (${error.status}).`;
  }
  return WORDS[0];
}

async function parseError(response) {
  let code = 'error';
  let message = `The request failed (${response.status}).`;
  try {
    const body = await response.json();
    code = body.error?.code || code;
    message = body.error?.message || message;
  } catch {
    /* not JSON: keep the generic words */
  }
  return new ApiError(response.status, code, message);
}

/** A signed-in session: login, silent refresh, authenticated requests, logout. */
export function createSession({ onSignedOut, onToken } = {}) {
  let accessToken = null;
  let expiresAt = 0;
  let refreshing = null;
  let timer = null;

  function adopt(pair) {
    remember(true);
    accessToken = pair.accessToken;
    expiresAt = pair.accessTokenExpiresAt * 1000;
    clearTimeout(timer);
    // Refresh a minute early so requests and the live socket never hold an expired token.
    timer = setTimeout(() => refresh().catch(() => {}), Math.max(5000, expiresAt - Date.now() - 60000));
    onToken?.(accessToken);
  }

  async function authCall(path, body) {
    let response;
    try {
      response = await fetch(path, {
        method: 'POST',
        credentials: 'same-origin',
        headers: body ? { 'Content-Type': 'application/json' } : {},
        body: body ? JSON.stringify(body) : undefined,
      });
    } catch {
      throw new ApiError(0, 'network', WORDS[0]);
    }
    if (!response.ok) throw await parseError(response);
    return response.status === 204 ? null : response.json();
  }

  async function refresh() {
    // Parallel callers share one rotation: presenting a rotated token twice would end the family.
    refreshing ??= authCall('/auth/refresh')
      .then(adopt, (error) => {
        if (error.status === 401) remember(false);
        throw error;
      })
      .finally(() => {
        refreshing = null;
      });
    return refreshing;
  }

  /** Sign a returning user in from the refresh cookie; false, without asking, for a browser
   * that has not signed in (or signed out) since. */
  async function resume() {
    if (!remembered()) return false;
    await refresh();
    return true;
  }

  async function login(email, password) {
    adopt(await authCall('/auth/login', { email, password }));
  }

  async function logout() {
    clearTimeout(timer);
    remember(false);
    try {
      await authCall('/auth/logout');
    } finally {
      accessToken = null;
      onSignedOut?.();
    }
  }

  async function send(path, { method = 'GET', json, headers = {} } = {}, retried = false) {
    if (!accessToken || Date.now() > expiresAt - 5000) await refresh();
    const init = { method, headers: { ...headers, Authorization: `Bearer ${accessToken}` } };
    if (json !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(json);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch {
      throw new ApiError(0, 'network', WORDS[0]);
    }
    if (response.status === 401 && !retried) {
      try {
        await refresh();
      } catch (error) {
        onSignedOut?.();
        throw error;
      }
      return send(path, { method, json, headers }, true);
    }
    if (!response.ok) throw await parseError(response);
    return response;
  }

  return {
    adopt,
    login,
    logout,
    refresh,
    resume,
    send,
    get token() {
      return accessToken;
    },
    /** JSON answer of a request (null for 204). */
    async json(path, options) {
      const response = await send(path, options);
      return response.status === 204 ? null : response.json();
    },
  };
}
