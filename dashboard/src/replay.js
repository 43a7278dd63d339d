// Replay: download a recording's segments (gzip files), inflate them in the browser with
// DecompressionStream, concatenate the rrweb event arrays and hand them to rrweb-player.
import rrwebPlayer from 'rrweb-player';
import 'rrweb-player/dist/style.css';

async function inflate(response) {
  const stream = response.body.pipeThrough(new DecompressionStream('gzip'));
  return JSON.parse(await new Response(stream).text());
}

/** Every event of a recording, in order; onProgress(done, total) after each segment. */
export async function loadEvents(session, siteId, recordingId, onProgress) {
  const base = `/api/v1/sites/${siteId}`;
  const list = await session.json(`${base}/recordings/${recordingId}/segments`);
  const events = [];
  let done = 0;
  for (const segment of list.segments) {
    const response = await session.send(`${base}/segments/${segment.fileId}`);
    events.push(...await inflate(response));
    done += 1;
    onProgress?.(done, list.segments.length);
  }
  events.sort((a, b) => a.timestamp - b.timestamp);
  return events;
}

export function mountPlayer(target, events) {
  const width = Math.min(720, Math.max(280, target.clientWidth || 720));
  return new rrwebPlayer({
    target,
    props: { events, width, height: Math.round(width * 0.56), autoPlay: true, showController: true },
  });
}
