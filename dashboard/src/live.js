// The live socket (/dashboard/live, docs/events.md): the access token is the first message,
// then a subscription to the site. Reconnects with backoff and tells the page to refetch,
// because events sent while disconnected are not replayed.

const EVENT_TYPES = new Set(['new_error', 'new_lead']);

export function openLive({ getToken, siteIds, onEvent, onState, onReconnect }) {
  let socket = null;
  let closed = false;
  let attempts = 0;
  let retryTimer = null;

  function url() {
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    return `${scheme}//${location.host}/dashboard/live`;
  }

  function connect() {
    socket = new WebSocket(url());
    onState('connecting');
    socket.addEventListener('open', () => {
      socket.send(JSON.stringify({ type: 'auth', token: getToken() }));
    });
    socket.addEventListener('message', (message) => {
      let data;
      try {
        data = JSON.parse(message.data);
      } catch {
        return;
      }
      if (data.type === 'authenticated') {
        socket.send(JSON.stringify({ type: 'subscribe', siteIds }));
      } else if (data.type === 'subscribed') {
        if (attempts > 0) onReconnect?.();
        attempts = 0;
        onState('live');
      } else if (EVENT_TYPES.has(data.type)) {
        onEvent(data);
      }
    });
    socket.addEventListener('close', () => {
      if (closed) return;
      onState('offline');
      attempts += 1;
      const delay = Math.min(30000, 500 * 2 ** attempts) * (0.5 + Math.random() / 2);
      retryTimer = setTimeout(connect, delay);
    });
  }

  connect();
  return {
    /** Present a fresh token before the old one expires (the server closes at expiry). */
    reauthenticate(token) {
      if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: 'auth', token }));
    },
    close() {
      closed = true;
      clearTimeout(retryTimer);
      socket?.close(1000, 'logout');
      onState('offline');
    },
  };
}
