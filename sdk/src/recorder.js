/**
 * The session recorder, loaded by the loader only when recordings are on, the page is not
 * excluded from replay and (where required) consent was given. rrweb with every input masked;
 * the console plugin only when the site captures console output. rrweb is PostHog's maintained
 * fork: upstream 2.2.2 builds two hidden iframes on every page (docs/decisions.md).
 *
 * Segments are gzip-compressed JSON arrays of events, uploaded as raw bytes with their metadata
 * in headers. While the page is open, events are batched (about 10 s or 64 KB), compressed with
 * CompressionStream and uploaded one at a time, in order. When the page is hidden or left, the
 * loader calls flush(true): a page being left runs no more tasks after its handlers, so what is
 * still unsent is compressed at once (fflate's synchronous gzip) and sent in parts small enough
 * for keepalive requests, each part a segment with its own number. See docs/sdk.md, "Recording
 * segments".
 */
import { record } from '@posthog/rrweb';
import { getRecordConsolePlugin } from '@posthog/rrweb-plugin-console-record';
import { gzipSync as gzipBytes } from 'fflate';

// A segment is cut 10 s after the previous one: half the requests of 5 s, and a longer segment
// compresses better. A hidden or left page sends what it holds at once, so only a crash loses
// up to this much.
const SEGMENT_MS = 10000;
// The first snapshot waits for an idle main thread, but no longer than this.
const IDLE_TIMEOUT_MS = 2000;
// Without requestIdleCallback (Safari): a task of its own, after what is queued now.
const IDLE_FALLBACK_MS = 50;
// Small enough that what is left when the page goes usually fits in one keepalive part.
const SEGMENT_BYTES = 64 * 1024;
// Browsers refuse keepalive requests beyond 64 KiB of bodies in flight per page; the loader's
// own beacons on pagehide (time on page, interactions) take the rest of that quota.
const KEEPALIVE_BUDGET = 48 * 1024;
// Parts this small pack well into what is left of the budget.
const PART_BYTES = 16 * 1024;
// rrweb's JSON compresses five to ten times: a part is tried at this size, halved until it fits.
const PART_RAW = 8 * PART_BYTES;
// The segment headers and the query parameters that carry them on a page being left
// (handlers/ingest_recordings.py SEGMENT_HEADERS).
const QUERY_FIELDS = {
  'X-Recording-Id': 'recordingId',
  'X-Segment-Seq': 'seq',
  'X-Visitor-Id': 'visitorId',
  'X-Session-Id': 'sessionId',
  'X-Page-Url': 'url',
  'X-Segment-Started-At': 'startedAt',
  'X-Segment-Ended-At': 'endedAt',
  'X-Visitor-Consent': 'consent',
};
// A live upload the network lost, or the service asked to come back for (429, 5xx), is sent
// again after 1 s, 2 s and 4 s; the service keeps one copy of each (recording, seq).
const RETRIES = 3;
const RETRY_MS = 1000;
const RECORDING_KEY = 'wpelRecordingId';
const SEQ_KEY = 'wpelRecordingSeq';

const utf8 = new TextEncoder();

/** gzip, synchronously: the only way to compress inside a pagehide handler. */
const gzipSync = (text) => gzipBytes(utf8.encode(text));

function gzipAsync(text) {
  if (typeof CompressionStream !== 'function') return gzipSync(text);
  return new Response(new Blob([text]).stream().pipeThrough(new CompressionStream('gzip')))
    .arrayBuffer();
}

// A batch is a list of [timestamp, event JSON]; the JSON is taken when rrweb emits the event.
const encode = (batch) => `[${batch.map((entry) => entry[1]).join(',')}]`;

function createRecorder(ctx) {
  const session = ctx.storage;
  let recordingId = session && session.getItem(RECORDING_KEY);
  let seq = Number((session && session.getItem(SEQ_KEY)) || 0);
  let events = [];
  let bytes = 0;
  let stopped = false;
  let queue = Promise.resolve();
  // Batches waiting for the live upload, not yet numbered; the segment it is uploading; and the
  // keepalive bytes this page still has in flight.
  let pending = [];
  let sending = null;
  let keptAlive = 0;

  function remember() {
    if (!session) return;
    session.setItem(RECORDING_KEY, recordingId);
    session.setItem(SEQ_KEY, String(seq));
  }

  function context(extra) {
    const body = { visitorId: ctx.visitorId, sessionId: ctx.sessionId, url: location.href,
      ...extra };
    if (ctx.consent()) body.consent = ctx.consent();
    return body;
  }

  // A recording continues across the pages of a browser session; start is idempotent on its id.
  if (!recordingId) {
    recordingId = crypto.randomUUID();
    seq = 0;
    queue = fetch(`${ctx.api}/recordings/start`, { method: 'POST', credentials: 'omit',
      headers: { 'Content-Type': 'text/plain' },
      body: JSON.stringify(context({ recordingId })) })
      .then((r) => (r.ok ? r.json() : null))
      .then((ack) => {
        if (!ack || !ack.id) stop(); // dropped by the server's privacy rules
        else { recordingId = ack.id; remember(); }
      })
      .catch(() => stop());
  }

  /** The batch as the next segment: its number is taken (and remembered) only now. */
  function segment(batch, body) {
    const headers = {
      'Content-Type': 'application/octet-stream',
      'X-Recording-Id': recordingId,
      'X-Segment-Seq': String(seq),
      'X-Visitor-Id': ctx.visitorId,
      'X-Session-Id': ctx.sessionId,
      'X-Page-Url': location.href,
      'X-Segment-Started-At': new Date(batch[0][0]).toISOString(),
      'X-Segment-Ended-At': new Date(batch[batch.length - 1][0]).toISOString(),
    };
    if (ctx.consent()) headers['X-Visitor-Consent'] = ctx.consent();
    seq += 1;
    remember();
    return { headers, body };
  }

  /**
   * A segment sent as the page is left goes as a "simple" request: metadata in the query string,
   * text/plain, no custom header. A request with custom headers needs a CORS preflight, and a
   * browser may send the preflight of a page already gone and then never the request itself.
   */
  function simple(headers) {
    const query = new URLSearchParams();
    for (const [header, value] of Object.entries(headers)) {
      if (QUERY_FIELDS[header]) query.set(QUERY_FIELDS[header], value);
    }
    return { url: `${ctx.api}/recordings/segment?${query}`,
      headers: { 'Content-Type': 'text/plain' } };
  }

  /**
   * Upload one segment. True when it needs no second try: stored, dropped by the privacy rules,
   * or refused for good (a 4xx other than 429). False when the network failed (a page being left
   * cancels its ordinary requests, sometimes before its pagehide handlers run) or the service
   * asked to come back later.
   */
  async function post({ headers, body }, keepalive) {
    const size = body.byteLength;
    if (keepalive) keptAlive += size;
    const request = keepalive ? simple(headers)
      : { url: `${ctx.api}/recordings/segment`, headers };
    try {
      const answer = await fetch(request.url, { method: 'POST', body,
        headers: request.headers, credentials: 'omit', keepalive });
      if (answer.status === 429 || answer.status >= 500) return false;
      const ack = answer.ok ? await answer.json() : null;
      // The server files a segment of an ended recording under the one continuing it.
      if (ack && ack.recordingId && ack.recordingId !== recordingId) {
        recordingId = ack.recordingId;
        remember();
      }
      if (ack && ack.dropped) stop();
      return true;
    } catch (e) {
      return false;
    } finally {
      if (keepalive) keptAlive -= size;
    }
  }

  async function drain() {
    while (pending.length && !stopped) {
      const batch = pending[0];
      const body = await gzipAsync(encode(batch));
      if (pending[0] !== batch) continue; // the page was hidden meanwhile and sent it
      pending.shift();
      const current = segment(batch, body);
      sending = current;
      // Until it is delivered the segment stays `sending`, so that a page left meanwhile sends
      // it again with keepalive; once `leave` has taken it, the retries here stop.
      for (let retry = 0; !(await post(current, false)) && retry < RETRIES; retry++) {
        await new Promise((resolve) => { setTimeout(resolve, RETRY_MS * 2 ** retry); });
        if (sending !== current || stopped) break;
      }
      if (sending === current) sending = null;
    }
  }

  /** Send what is unsent now, within the keepalive budget; what does not fit waits. */
  function leave() {
    let budget = KEEPALIVE_BUDGET - keptAlive;
    // The live upload in flight dies with the page; sent again, the server keeps one copy.
    if (sending && sending.body.byteLength <= budget) {
      budget -= sending.body.byteLength;
      post(sending, true);
    }
    sending = null;
    let rest = pending.flat().concat(events);
    pending = [];
    events = [];
    bytes = 0;
    while (rest.length) {
      let count = 1;
      for (let raw = rest[0][1].length; count < rest.length
        && (raw += rest[count][1].length) <= PART_RAW;) count++;
      const limit = Math.min(PART_BYTES, budget);
      let body = gzipSync(encode(rest.slice(0, count)));
      while (body.byteLength > limit && count > 1) {
        count = Math.ceil(count / 2);
        body = gzipSync(encode(rest.slice(0, count)));
      }
      if (body.byteLength > budget) break;
      budget -= body.byteLength;
      post(segment(rest.slice(0, count), body), true);
      rest = rest.slice(count);
    }
    // Sent by the live upload should the page stay (a hidden tab, the back-forward cache).
    if (rest.length) wait(rest);
  }

  function wait(batch) {
    pending.push(batch);
    queue = queue.then(drain);
  }

  // The segment timer restarts at every flush: a segment cut for its size is followed by one of
  // about SEGMENT_MS, not by a sliver at the next tick of a fixed interval.
  let timer = 0;
  function restartTimer() {
    clearTimeout(timer);
    if (!stopped) timer = setTimeout(() => flush(false), SEGMENT_MS);
  }

  /** Queue the events for the live upload or, when the page is hidden or left, send them now. */
  function flush(leaving) {
    if (stopped) return;
    // A page left before its idle moment is still recorded: its snapshot is taken now.
    if (leaving && !stopRecording) begin();
    restartTimer();
    if (leaving) {
      leave();
    } else if (events.length) {
      wait(events);
      events = [];
      bytes = 0;
    }
  }

  let stopRecording = null;
  function begin() {
    if (stopped || stopRecording) return;
    stopRecording = record({
      emit(event) {
        if (stopped) return;
        const json = JSON.stringify(event);
        events.push([event.timestamp, json]);
        bytes += json.length;
        if (bytes >= SEGMENT_BYTES) flush(false);
      },
      maskAllInputs: true,
      maskInputOptions: { password: true, email: true, text: true, textarea: true, select: true },
      slimDOMOptions: 'all',
      plugins: ctx.consoleCapture ? [getRecordConsolePlugin()] : [],
    });
    // The first snapshot was emitted within record(): it goes at once, so a replay exists from
    // the first seconds on; the segments after it are cut every SEGMENT_MS.
    flush(false);
  }
  // rrweb takes its first full snapshot as recording begins: a long task on a large page, so it
  // waits until the main thread is idle (at most IDLE_TIMEOUT_MS).
  if (typeof requestIdleCallback === 'function') requestIdleCallback(begin, { timeout: IDLE_TIMEOUT_MS });
  else setTimeout(begin, IDLE_FALLBACK_MS);

  function stop() {
    if (stopped) return;
    stopped = true;
    clearTimeout(timer);
    if (stopRecording) stopRecording();
    events = [];
    pending = [];
  }

  return { flush, stop, recordingId: () => (stopped ? null : recordingId) };
}

if (typeof window.svc === 'function') window.svc('recorder', createRecorder);
