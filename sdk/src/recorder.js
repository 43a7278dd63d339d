/**
 * The session recorder, loaded by the loader only when recordings are on, the page is not
 * excluded from replay and (where required) consent was given. rrweb with every input masked;
 * the console plugin only when the site captures console output. Events are batched (about 5 s
 * or 64 KB), gzip-compressed with CompressionStream and uploaded as raw bytes with their
 * metadata in headers, one segment at a time, in order.
 */
import { record } from 'rrweb';
import { getRecordConsolePlugin } from '@rrweb/rrweb-plugin-console-record';

const SEGMENT_MS = 5000;
const SEGMENT_BYTES = 64 * 1024;
// keepalive requests may carry at most 64 KiB in all; a larger final segment goes without it.
const KEEPALIVE_LIMIT = 60 * 1024;
const RECORDING_KEY = 'wpelRecordingId';
const SEQ_KEY = 'wpelRecordingSeq';

function createRecorder(ctx) {
  const session = ctx.storage;
  let recordingId = session && session.getItem(RECORDING_KEY);
  let seq = Number((session && session.getItem(SEQ_KEY)) || 0);
  let events = [];
  let bytes = 0;
  let firstAt = null;
  let stopped = false;
  let queue = Promise.resolve();

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

  async function upload(batch, keepalive) {
    if (stopped) return;
    const json = new Blob([JSON.stringify(batch.events)]);
    const gzip = await new Response(json.stream().pipeThrough(new CompressionStream('gzip')))
      .arrayBuffer();
    const headers = {
      'Content-Type': 'application/octet-stream',
      'X-Recording-Id': recordingId,
      'X-Segment-Seq': String(seq),
      'X-Visitor-Id': ctx.visitorId,
      'X-Session-Id': ctx.sessionId,
      'X-Page-Url': location.href,
      'X-Segment-Started-At': new Date(batch.firstAt).toISOString(),
      'X-Segment-Ended-At': new Date(batch.lastAt).toISOString(),
    };
    if (ctx.consent()) headers['X-Visitor-Consent'] = ctx.consent();
    seq += 1;
    remember();
    try {
      const answer = await fetch(`${ctx.api}/recordings/segment`, { method: 'POST',
        body: gzip, headers, credentials: 'omit',
        keepalive: keepalive && gzip.byteLength < KEEPALIVE_LIMIT });
      const ack = answer.ok ? await answer.json() : null;
      // The server files a segment of an ended recording under the one continuing it.
      if (ack && ack.recordingId && ack.recordingId !== recordingId) {
        recordingId = ack.recordingId;
        remember();
      }
      if (ack && ack.dropped) stop();
    } catch (e) {
      // The network failed: this segment is lost, the recording goes on.
    }
  }

  function flush(keepalive) {
    if (!events.length || stopped) return;
    const batch = { events, firstAt, lastAt: Date.now() };
    events = [];
    bytes = 0;
    firstAt = null;
    queue = queue.then(() => upload(batch, keepalive));
  }

  const stopRecording = record({
    emit(event) {
      if (stopped) return;
      if (firstAt === null) firstAt = Date.now();
      events.push(event);
      bytes += JSON.stringify(event).length;
      if (bytes >= SEGMENT_BYTES) flush(false);
    },
    maskAllInputs: true,
    maskInputOptions: { password: true, email: true, text: true, textarea: true, select: true },
    slimDOMOptions: 'all',
    plugins: ctx.consoleCapture ? [getRecordConsolePlugin()] : [],
  });
  const timer = setInterval(() => flush(false), SEGMENT_MS);

  function stop() {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
    if (stopRecording) stopRecording();
    events = [];
  }

  return { flush, stop, recordingId: () => (stopped ? null : recordingId) };
}

if (typeof window.svc === 'function') window.svc('recorder', createRecorder);
