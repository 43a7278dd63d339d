/**
 * The Visitor Service loader: visitor id, consent, GPC, pageview, time on page, errors and
 * interactions. The session recorder (rrweb) is a separate file, loaded only when this page may
 * be recorded. Documented in docs/sdk.md; the endpoints are /sdk/v1 in docs/openapi.yaml.
 *
 * Privacy comes first and is decided before anything else runs:
 * - Global Privacy Control: nothing at all happens (no cookie, no storage, no request).
 * - A site that requires consent: nothing is written, sent or buffered until consent.
 */
import { exclusionFor, matches } from './exclusion.js';

const COOKIE = 'svc_vid';
const STORAGE_KEY = 'wpelVisitorId';
const CONSENT_KEY = 'wpelConsent';
const SESSION_KEY = 'wpelSessionId';
const TWO_YEARS = 2 * 365 * 24 * 3600;
// Interactions are sent in batches: often enough to survive a crash, rarely enough to be cheap
// (a hidden or left page sends what it holds at once, so only a crash loses up to this much).
const FLUSH_MS = 10000;
const RAGE_CLICKS = 3;
const RAGE_WINDOW_MS = 1000;
const RAGE_RADIUS_PX = 30;
const DEAD_CLICK_MS = 1000;
// A page stuck in an error loop must not flood the service.
const MAX_ERRORS_PER_PAGE = 20;

// The server replaces this string with the site's settings when it serves the loader.
const SITE = JSON.parse('"__SVC_SITE_CONFIG__"');

function uuid() {
  if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
  // Older browsers: RFC 4122 version 4 from getRandomValues, still never from the device.
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function readCookie() {
  const m = document.cookie.match(/(?:^|;\s*)svc_vid=([A-Za-z0-9_-]{1,64})/);
  return m ? m[1] : null;
}

function storage(area) {
  try {
    return window[area];
  } catch (e) {
    return null; // storage disabled by the browser
  }
}

function writeIdentity(id) {
  const secure = location.protocol === 'https:' ? '; Secure' : '';
  document.cookie = `${COOKIE}=${id}; Max-Age=${TWO_YEARS}; Path=/; SameSite=Lax${secure}`;
  const local = storage('localStorage');
  if (local) local.setItem(STORAGE_KEY, id);
}

/** The visitor id: whichever store survived re-seeds the other; the cookie rolls. */
function visitorId() {
  const local = storage('localStorage');
  const stored = local && local.getItem(STORAGE_KEY);
  const id = readCookie() || (stored && /^[A-Za-z0-9_-]{1,64}$/.test(stored) ? stored : null)
    || uuid();
  writeIdentity(id);
  return id;
}

function sessionId() {
  const session = storage('sessionStorage');
  let id = session && session.getItem(SESSION_KEY);
  if (!id) {
    id = uuid();
    if (session) session.setItem(SESSION_KEY, id);
  }
  return id;
}

/**
 * A CSS selector for the clicked element, unique enough to find it again (heatmaps look it up
 * with querySelector): each step names its position among same-tag siblings where it has any.
 */
function selectorOf(el) {
  const esc = (v) => (window.CSS && CSS.escape ? CSS.escape(v) : v);
  const parts = [];
  for (let node = el; node && node.nodeType === 1 && parts.length < 5; node = node.parentElement) {
    let part = node.localName;
    if (node.id) {
      parts.unshift(`${part}#${esc(node.id)}`);
      break;
    }
    if (typeof node.className === 'string' && node.className.trim()) {
      part += '.' + node.className.trim().split(/\s+/).slice(0, 2).map(esc).join('.');
    }
    const same = node.parentElement
      ? [...node.parentElement.children].filter((s) => s.localName === node.localName) : [];
    if (same.length > 1) part += `:nth-of-type(${same.indexOf(node) + 1})`;
    parts.unshift(part);
  }
  return parts.join(' > ').slice(0, 1000);
}

function afterLoad(callback) {
  // From a task of its own after the load event, so the load event itself ends no later.
  if (document.readyState === 'complete') callback();
  else addEventListener('load', () => setTimeout(callback), { once: true });
}

function start(script) {
  const src = new URL(script.src);
  const key = src.searchParams.get('key');
  const api = `${src.origin}/sdk/v1/${key}`;
  const site = SITE || { requireConsent: true, recordings: false, consoleCapture: false,
    excludedUrls: [] };
  const statement = script.getAttribute('data-product-statement');
  // On a WordPress shop the plugin adds its REST route (same origin) and admin-ajax addresses;
  // a product page is only marked, the statement is fetched fresh (cached pages stay valid).
  const cmsRoute = script.getAttribute('data-cms-route');
  const cmsAjax = script.getAttribute('data-cms-ajax');
  const productPage = script.hasAttribute('data-product-page');
  let firstPageview = true;
  let nonce = null;
  const queued = (window.svc && window.svc.q) || [];
  let consent = 'unknown';
  let running = false;
  let visitor = null;
  let session = null;
  let pageview = null;
  let shownAt = 0;
  let visibleMs = 0;
  let interactions = [];
  let maxDepth = 0;
  let sentDepth = 0;
  let errors = 0;
  let recorder = null;
  let loaded = false;

  const local = storage('localStorage');
  if (local && local.getItem(CONSENT_KEY) === 'granted') consent = 'granted';

  // What every request says of the device, read once. The time zone comes from Temporal where
  // the browser has it: building an Intl.DateTimeFormat to learn it costs 13-21 ms of script
  // in Chromium, Temporal 0.1 ms.
  let device = null;
  function context(extra) {
    if (!device) {
      const temporal = window.Temporal && window.Temporal.Now;
      device = { language: navigator.language, screen: `${screen.width}x${screen.height}`,
        timeZone: temporal ? temporal.timeZoneId() : Intl.DateTimeFormat().resolvedOptions().timeZone };
    }
    const body = { visitorId: visitor, sessionId: session, url: location.href, ...device,
      ...extra };
    if (consent === 'granted') body.consent = 'granted';
    return body;
  }

  function send(path, body) {
    // text/plain keeps the request "simple": no preflight, and sendBeacon can send the same.
    return fetch(`${api}/${path}`, { method: 'POST', body: JSON.stringify(body),
      headers: { 'Content-Type': 'text/plain' }, credentials: 'omit', keepalive: true })
      .then((r) => (r.status === 200 ? r.json() : null)).catch(() => null);
  }

  function cmsUrl(path, query) {
    const url = new URL(cmsRoute, location.href);
    const route = url.searchParams.get('rest_route');
    if (route !== null) url.searchParams.set('rest_route', route.replace(/\/?$/, '/') + path);
    else url.pathname = url.pathname.replace(/\/?$/, '/') + path;
    for (const [name, value] of Object.entries(query || {})) url.searchParams.set(name, value);
    return url.href;
  }

  // WordPress's login cookie is HttpOnly; the plugin's marker only says a login exists here.
  const loggedIn = () => /(?:^|;\s*)svc_wp_li=1/.test(document.cookie);

  function restNonce() {
    // Core's admin-ajax action answers a REST nonce to a logged-in visitor only, same-origin
    // only; a nonce is never printed into the (possibly cached) page.
    if (!nonce) {
      nonce = !cmsAjax || !loggedIn() ? Promise.resolve(null)
        : fetch(`${cmsAjax}?action=rest-nonce`, { credentials: 'same-origin' })
          .then((r) => (r.ok ? r.text() : null))
          .then((t) => (t && /^[a-f0-9]{6,32}$/.test(t.trim()) ? t.trim() : null))
          .catch(() => null);
    }
    return nonce;
  }

  /** POST to the shop's own route, which adds what only the shop server knows. */
  function cms(path, body) {
    return restNonce().then((value) => fetch(cmsUrl(path), { method: 'POST',
      body: JSON.stringify(body), credentials: 'same-origin', keepalive: true,
      headers: { 'Content-Type': 'application/json', ...(value ? { 'X-WP-Nonce': value } : {}) } }))
      .catch(() => null);
  }

  function freshStatement() {
    if (statement || !productPage || !cmsRoute || !firstPageview) return Promise.resolve(statement);
    return fetch(cmsUrl('statement', { url: location.href.split('#')[0] }),
      { credentials: 'omit', cache: 'no-store' })
      .then((r) => (r.ok ? r.json() : null)).then((a) => (a && a.statement) || null)
      .catch(() => null);
  }

  function beacon(path, body) {
    const blob = new Blob([JSON.stringify(body)], { type: 'text/plain' });
    if (!navigator.sendBeacon || !navigator.sendBeacon(`${api}/${path}`, blob)) send(path, body);
  }

  const excluded = (scope) => exclusionFor(location.href, site.excludedUrls) === scope;

  function flushInteractions(viaBeacon) {
    if (maxDepth > 0) {
      // `from`: what this view sent before, so the server counts each depth once per view.
      interactions.push({ kind: 'scroll_depth', depth: maxDepth, at: new Date().toISOString(),
        url: location.href, from: sentDepth, vw: innerWidth, fold: Math.min(100,
          Math.round((innerHeight * 100) / Math.max(document.documentElement.scrollHeight, 1))) });
      sentDepth = maxDepth;
      maxDepth = -maxDepth; // sent; a deeper scroll later is sent again
    }
    if (!interactions.length) return;
    // A fresh id per batch: should it arrive twice (a retried request), it is stored once.
    const batch = context({ batchId: uuid(), interactions: interactions.splice(0, 200) });
    if (recorder && recorder.recordingId()) batch.recordingId = recorder.recordingId();
    (viaBeacon ? beacon : send)('interactions', batch);
  }

  function trackScroll() {
    if (!loaded) return;
    const doc = document.documentElement;
    const height = Math.max(doc.scrollHeight, 1);
    const depth = Math.min(100, Math.round(((scrollY + innerHeight) / height) * 100));
    if (depth > Math.abs(maxDepth)) maxDepth = depth;
  }

  // Where in its target a click landed, in fractions of the target's box: heatmaps put it on
  // the same element at every width.
  const frac = (v, size) => (size > 0 ? Math.min(1, Math.max(0, Math.round((v / size) * 100) / 100)) : 0);
  // Clicking into a form field or the survey widget does its work without changing the page.
  const FIELDS = 'input,textarea,select,option,label,[contenteditable]:not([contenteditable="false"]),[data-svc-survey]';

  // The clicks of one burst on one spot. Three or more make one rage click, sent with their real
  // number once the burst is over; its clicks are then never dead clicks as well.
  let burst = null;
  function closeBurst() {
    const b = burst;
    if (!b) return;
    burst = null;
    clearTimeout(b.timer);
    b.closed = true;
    if (b.count >= RAGE_CLICKS) interactions.push({ kind: 'rage_click', count: b.count, ...b.base });
    else b.dead.forEach((base) => interactions.push({ kind: 'dead_click', ...base }));
  }

  function trackClick(event) {
    const now = Date.now();
    const at = new Date(now).toISOString();
    const target = event.target;
    const box = target.getBoundingClientRect ? target.getBoundingClientRect() : {};
    const base = { at, url: location.href, selector: selectorOf(target),
      x: Math.max(0, Math.round(event.pageX)), y: Math.max(0, Math.round(event.pageY)),
      vw: innerWidth, ox: frac(event.clientX - box.left, box.width),
      oy: frac(event.clientY - box.top, box.height) };
    interactions.push({ kind: 'click', ...base });
    if (!burst || now - burst.t >= RAGE_WINDOW_MS
        || Math.hypot(burst.x - event.clientX, burst.y - event.clientY) > RAGE_RADIUS_PX) {
      closeBurst();
      burst = { base, x: event.clientX, y: event.clientY, count: 0, dead: [] };
    }
    burst.t = now;
    burst.count += 1;
    clearTimeout(burst.timer);
    burst.timer = setTimeout(closeBurst, RAGE_WINDOW_MS);
    if (!(target.closest && target.closest(FIELDS))) watchForDeadClick(base, burst);
  }

  // Clicks waiting to be judged dead or alive; a later click settles them early, so its own
  // effects (focus, DOM changes) are never credited to an earlier click.
  let pending = [];
  function settle(watch) {
    watch.observer.disconnect();
    clearTimeout(watch.timer);
    pending = pending.filter((w) => w !== watch);
    if (!watch.alive && location.href === watch.href
        && document.activeElement === watch.focused) {
      // A dead click waits for its burst: a rage click absorbs it.
      if (!watch.burst.closed) watch.burst.dead.push(watch.base);
      else if (watch.burst.count < RAGE_CLICKS) interactions.push({ kind: 'dead_click', ...watch.base });
    }
  }

  function watchForDeadClick(base, of) {
    // Dead: no DOM mutation, navigation or focus change within 1 s of the click.
    const watch = { base, burst: of, alive: false, focused: document.activeElement,
      href: location.href };
    // The first mutation settles it: the observer has nothing more to learn from the page.
    watch.observer = new MutationObserver(() => {
      watch.alive = true;
      watch.observer.disconnect();
    });
    watch.observer.observe(document.documentElement, { subtree: true, childList: true,
      attributes: true, characterData: true });
    watch.timer = setTimeout(() => settle(watch), DEAD_CLICK_MS);
    pending.push(watch);
  }

  function trackError(type, message, stack) {
    if (++errors > MAX_ERRORS_PER_PAGE) return;
    send('errors', context({ source: 'javascript', type: String(type || 'Error').slice(0, 200),
      message: String(message || 'unknown error').slice(0, 4000),
      stack: stack ? String(stack).slice(0, 32768) : undefined }));
  }

  /** The page stopped being seen (hidden or left): its visible time stops growing. */
  function stopClock() {
    if (shownAt) visibleMs += Date.now() - shownAt;
    shownAt = 0;
  }

  function elapsed() {
    return (visibleMs + (shownAt ? Date.now() - shownAt : 0)) / 1000;
  }

  // A page being left is hidden first, then left: the second report would repeat the first.
  let sentTime = null;
  function sendTimeOnPage() {
    if (!pageview) return;
    const duration = Math.min(86400, Math.round(elapsed() * 1000) / 1000);
    if (sentTime && sentTime.pageview === pageview && sentTime.duration === duration) return;
    sentTime = { pageview, duration };
    beacon('time-on-page', context({ pageviewId: pageview, duration }));
  }

  function newPageview() {
    pageview = uuid();
    visibleMs = 0;
    shownAt = document.visibilityState === 'visible' ? Date.now() : 0;
    const body = context({ pageviewId: pageview, title: document.title.slice(0, 1000),
      referrer: document.referrer || undefined });
    if (cmsRoute && loggedIn()) {
      // A logged-in visitor's pageview goes through the shop, which adds the user id; should
      // the login have ended meanwhile, it is sent as an anonymous one after all.
      cms('pageview', body).then((r) => {
        // Read the answer: an unread body keeps the request open until the page goes.
        if (r) r.text().catch(() => null);
        if (!r || r.status >= 300) sendAnonymous(body);
        else firstPageview = false;
      });
      return;
    }
    sendAnonymous(body);
  }

  function sendAnonymous(body) {
    freshStatement().then((token) => {
      firstPageview = false;
      if (token) body.statement = token;
      send('pageview', body);
    });
  }

  const LEAD_FIELDS = ['email', 'name', 'phone', 'formId', 'fields'];
  const SURVEY_FIELDS = ['surveyId', 'responseId', 'answers'];
  function pick(data, names) {
    const out = {};
    for (const name of names) if (data && data[name] !== undefined) out[name] = data[name];
    return out;
  }

  function load(name) {
    const tag = document.createElement('script');
    tag.async = true;
    tag.src = `${src.origin}/sdk/v1/${name}.js`;
    document.head.appendChild(tag);
  }

  function loadRecorder() {
    if (!site.recordings || excluded('replay') || recorder) return;
    load('recorder');
  }

  function run() {
    if (running || excluded('all')) return;
    running = true;
    visitor = visitorId();
    session = sessionId();
    newPageview();
    addEventListener('pointerdown', () => pending.slice().forEach(settle), true);
    addEventListener('click', trackClick, true);
    addEventListener('pagehide', () => pending.forEach((w) => { w.alive = true; }), true);
    addEventListener('scroll', trackScroll, { passive: true });
    addEventListener('error', (e) => trackError(e.error && e.error.name, e.message,
      e.error && e.error.stack));
    addEventListener('unhandledrejection', (e) => {
      const r = e.reason;
      trackError((r && r.name) || 'UnhandledRejection', (r && r.message) || String(r), r && r.stack);
    });
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'hidden') {
        stopClock();
        sendTimeOnPage();
        closeBurst();
        flushInteractions(true);
        if (recorder) recorder.flush(true);
      } else {
        shownAt = Date.now();
      }
    });
    addEventListener('pagehide', () => {
      stopClock();
      sendTimeOnPage();
      trackScroll();
      closeBurst();
      flushInteractions(true);
      if (recorder) recorder.flush(true);
    });
    // Single-page shops: a history change is a new page.
    const pushState = history.pushState;
    history.pushState = function (...args) {
      sendTimeOnPage();
      closeBurst();
      flushInteractions(false);
      const result = pushState.apply(this, args);
      newPageview();
      return result;
    };
    setInterval(() => flushInteractions(false), FLUSH_MS);
    // Nothing that forces a layout or competes with the page's own resources before its load
    // event: the first scroll depth is read, and the recorder fetched, once the page has loaded.
    afterLoad(() => {
      loaded = true;
      trackScroll();
      loadRecorder();
    });
    // The survey widget, only where an active survey may show (after the same gate as all else).
    if ((site.surveys || []).some((s) => s.pages.some((p) => matches(location.href, p)))) load('survey');
  }

  function grant(signal) {
    if (consent === 'granted') return;
    consent = 'granted';
    run();
    // Remembered so later pages collect at once and the decision is sent only once.
    if (local) local.setItem(CONSENT_KEY, 'granted');
    send('consents', context({ decision: 'granted', signal }));
  }

  function withdraw(signal) {
    if (consent !== 'granted') return; // nothing was collected, so there is nothing to withdraw
    send('consents', context({ decision: 'withdrawn', signal }));
    consent = 'denied';
    if (recorder) recorder.stop();
    if (site.requireConsent) {
      // Forget the visitor on this device: nothing may stay without consent.
      document.cookie = `${COOKIE}=; Max-Age=0; Path=/`;
      if (local) {
        local.removeItem(STORAGE_KEY);
        local.removeItem(CONSENT_KEY);
      }
      location.reload();
    }
  }

  const commands = {
    consent(decision, signal) {
      if (decision === 'granted') grant(signal || 'api');
      else withdraw(signal || 'api');
    },
    // A form lead through the shop's route (WordPress shops only); survey answers through it
    // where the plugin is installed, else to /sdk/v1.
    lead(data) {
      if (!running || !cmsRoute) return Promise.resolve(null);
      return cms('leads', context(pick(data, LEAD_FIELDS)));
    },
    survey(data) {
      if (!running) return Promise.resolve(null);
      return (cmsRoute ? cms : send)('surveys', context(pick(data, SURVEY_FIELDS)));
    },
    // Called by survey.js once loaded: the active surveys, and where to remember what was shown.
    surveys(factory) {
      if (running && local) factory(site.surveys, local);
    },
    // Called by recorder.js once loaded; it gets what it needs and nothing else.
    recorder(factory) {
      if (recorder || !running || consent === 'denied') return;
      recorder = factory({ api, visitorId: visitor, sessionId: session,
        consent: () => (consent === 'granted' ? 'granted' : undefined),
        consoleCapture: !!site.consoleCapture, storage: storage('sessionStorage') });
    },
  };

  window.svc = function (command, ...args) {
    return commands[command] ? commands[command](...args) : undefined;
  };
  for (const args of queued) window.svc(...args);

  // The WordPress Consent API (used by the common CMS banners) signals 'statistics' consent.
  if (typeof window.wp_has_consent === 'function' && window.wp_has_consent('statistics')) {
    grant('cms');
  }
  document.addEventListener('wp_listen_for_consent_change', (event) => {
    const change = event.detail || {};
    if (change.statistics === 'allow') grant('cms');
    else if (change.statistics === 'deny') withdraw('cms');
  });

  if (!site.requireConsent || consent === 'granted') run();
}

// Global Privacy Control: the loader does nothing at all, not even define its API.
if (navigator.globalPrivacyControl !== true && document.currentScript) {
  start(document.currentScript);
}
