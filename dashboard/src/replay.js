// Replay: download a recording's segments (gzip files), inflate them in the browser with
// DecompressionStream, concatenate the rrweb event arrays and hand them to rrweb-player.
// The replay page adds what happened during the recording (errors, rage and dead clicks, page
// changes, leads) as markers on the player's timeline and as a list beside it that seeks.
import rrwebPlayer from 'rrweb-player';
import 'rrweb-player/dist/style.css';
import { describeError } from './api.js';
import { alertBox, empty, h, progress, seconds, when } from './dom.js';

/** How long before an event the player starts, so the moment is seen as it happens. */
const LEAD_IN_MS = 3000;
/** rrweb's custom event type: the player draws each as a marker on its progress bar. */
const CUSTOM_EVENT = 5;
/** rrweb's meta event: each page's snapshot starts with one, carrying the page's address. */
const META_EVENT = 4;
const KINDS = {
  error: { label: 'Error', color: '#b42318' },
  rage_click: { label: 'Rage click', color: '#c2410c' },
  dead_click: { label: 'Dead click', color: '#6b4a00' },
  page: { label: 'Page', color: '#2454d6' },
  lead: { label: 'Lead', color: '#13795b' },
};

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

/**
 * The markers with the page changes the recording itself shows: a page begins where its meta
 * event is, the moment the replay shows it. The recording's list of pages knows only when each
 * page's first segment reached the service, seconds after the clicks made on it, so its entries
 * are kept only for addresses no meta event names (a single-page shop's history changes).
 */
export function withPageChanges(markers, events) {
  const pages = [];
  for (const event of events) {
    const href = event.type === META_EVENT && event.data?.href;
    if (!href || href === pages.at(-1)?.url) continue;
    let label = href;
    try { label = new URL(href).pathname || '/'; } catch { /* not a URL: shown as it is */ }
    pages.push({ kind: 'page', at: new Date(event.timestamp).toISOString(), label, url: href });
  }
  const shown = new Set(pages.map((page) => page.url));
  return [...markers.filter((marker) => marker.kind !== 'page' || !shown.has(marker.url)), ...pages]
    .sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
}

/**
 * The player, skipping inactivity. `markers` ({kind, at, label}) become custom events on its
 * timeline; `startAt` (ms into the recording) is where it begins playing.
 */
export function mountPlayer(target, events, { markers = [], startAt = 0 } = {}) {
  // As wide as the page allows, as tall as the recorded window's shape asks (within the screen):
  // rrweb-player scales the recorded page to fit, and a 1280 px page in 600 px was unreadable.
  const width = Math.max(280, target.clientWidth || 720);
  const recorded = events.find((event) => event.type === META_EVENT)?.data;
  const shape = recorded?.width > 0 && recorded?.height > 0 ? recorded.height / recorded.width : 0.625;
  const height = Math.round(Math.max(200, Math.min(width * shape, window.innerHeight - 180)));
  const first = events[0].timestamp;
  const last = events.at(-1).timestamp;
  const tagged = markers.map((marker) => ({
    type: CUSTOM_EVENT, timestamp: Math.min(last, Math.max(first, Date.parse(marker.at))),
    data: { tag: KINDS[marker.kind]?.label || marker.kind, payload: { label: marker.label } },
  }));
  const all = [...events, ...tagged].sort((a, b) => a.timestamp - b.timestamp);
  const tags = Object.fromEntries(Object.values(KINDS).map((kind) => [kind.label, kind.color]));
  const player = new rrwebPlayer({
    target,
    props: { events: all, width, height, autoPlay: !startAt, showController: true,
      skipInactive: true, tags },
  });
  if (startAt) player.goto(startAt, true);
  nameControls(target);
  player.addEventListener('ui-update-player-state', () => nameControls(target));
  return player;
}

/**
 * A Play button and the box it fills with the recording's player (or what went wrong), for a
 * recording shown in a list (a visitor's sessions, a survey's answers). `label` is the button's
 * text, `name` its accessible name where the text alone would not say which recording it plays.
 */
export function replayControl(app, site, recordingId, { label = 'Play', name } = {}) {
  const holder = h('div', { class: 'player' });
  const play = h('button', { type: 'button', class: 'secondary', 'aria-label': name, onclick: async () => {
    play.disabled = true;
    holder.replaceChildren(progress('Downloading the recording…'));
    try {
      const events = await loadEvents(app.session, site.id, recordingId, (done, total) => {
        holder.replaceChildren(progress(`Downloading segment ${done} of ${total}…`));
      });
      holder.replaceChildren();
      if (events.length < 2) holder.append(empty('Nothing to replay', 'This recording has no replayable page yet.'));
      else mountPlayer(holder, events);
    } catch (failure) {
      holder.replaceChildren(alertBox(describeError(failure)));
    } finally {
      play.disabled = false;
    }
  } }, label);
  return { play, holder };
}

/** rrweb-player's icon buttons, switch and frame carry no names; screen readers need them. */
function nameControls(target) {
  const buttons = target.querySelectorAll('.rr-controller__btns > button');
  const playing = target.querySelector('.rr-controller__btns > button:first-child path[d^="M682"]');
  buttons[0]?.setAttribute('aria-label', playing ? 'Pause' : 'Play');
  const last = buttons[buttons.length - 1];
  if (last && !last.textContent.trim()) last.setAttribute('aria-label', 'Full screen');
  target.querySelector('.rr-controller input[type="checkbox"]')?.setAttribute('aria-label', 'Skip inactivity');
  target.querySelector('iframe')?.setAttribute('title', 'The recorded page');
}

const clock = (ms) => {
  const total = Math.max(0, Math.round(ms / 1000));
  return `${Math.floor(total / 60)}:${String(total % 60).padStart(2, '0')}`;
};

/** The replay page: /app/sites/{site}/recordings/{id}?at=<ISO time to open at>. */
export async function replayPage(app, site, recordingId, query) {
  const base = `/api/v1/sites/${site.id}`;
  const timeline = await app.session.json(`${base}/recordings/${recordingId}/timeline`);
  const { recording } = timeline;
  const holder = h('div', { class: 'player', id: 'replay-player' }, progress('Downloading the recording…'));
  const list = h('ol', { class: 'replay-events', id: 'replay-events', 'aria-label': 'What happened' });
  const heading = h('h1', {}, `Recording of ${when(recording.startedAt)}`);
  const length = h('span', {}, seconds(recording.duration));
  const summary = h('p', { class: 'hint' }, length, ` · ${recording.pageCount} ${recording.pageCount === 1 ? 'page' : 'pages'}`,
    recording.visitorId ? [' · ', h('a', { href: `/app/sites/${site.id}/visitors/${encodeURIComponent(recording.visitorId)}` }, 'the visitor’s profile')] : null);
  const title = h('h2', { id: 'events-title' }, `What happened (${timeline.events.length})`);
  const nothing = empty('Nothing marked', 'No errors, clicks in frustration, page changes or leads during this recording.');
  const page = h('div', {},
    h('p', {}, h('a', { href: `/app/sites/${site.id}/recordings` }, '← All recordings')), heading, summary,
    h('div', { class: 'replay' },
      h('section', { class: 'panel replay-stage', 'aria-label': 'Player' }, holder),
      h('section', { class: 'panel replay-side', 'aria-labelledby': 'events-title' },
        title, timeline.events.length ? list : nothing)));
  // The player is built once the page is in the document, so it can measure its width.
  queueMicrotask(async () => {
    try {
      const events = await loadEvents(app.session, site.id, recordingId, (done, total) => {
        holder.replaceChildren(progress(`Downloading segment ${done} of ${total}…`));
      });
      holder.replaceChildren();
      if (events.length < 2) {
        holder.append(empty('Nothing to replay', 'This recording has no replayable page yet.'));
        return;
      }
      const first = events[0].timestamp;
      length.textContent = `${seconds((events.at(-1).timestamp - first) / 1000)} of replay`;
      const offset = (at) => Math.max(0, Date.parse(at) - first);
      const at = query.get('at');
      const startAt = at ? Math.max(1, offset(at) - LEAD_IN_MS) : 0;
      const markers = withPageChanges(timeline.events, events);
      const player = mountPlayer(holder, events, { markers, startAt });
      holder.dataset.ready = 'true';
      if (at) holder.dataset.startedAt = String(startAt);
      title.textContent = `What happened (${markers.length})`;
      if (markers.length && nothing.isConnected) nothing.replaceWith(list);
      list.replaceChildren(...markers.map((event) => {
        const ms = offset(event.at);
        const target = Math.max(0, ms - LEAD_IN_MS);
        return h('li', { class: `marker ${event.kind}`, dataset: { kind: event.kind } },
          h('button', { type: 'button', class: 'link', onclick: () => {
            player.goto(target, true);
            holder.dataset.seekedTo = String(target);
          } }, h('span', { class: 'time' }, clock(ms)), ' ',
          h('span', { class: `badge ${event.kind}` }, KINDS[event.kind]?.label || event.kind), ' ', event.label));
      }));
    } catch (failure) {
      holder.replaceChildren(alertBox(describeError(failure)));
    }
  });
  list.replaceChildren(...timeline.events.map((event) => h('li', { class: `marker ${event.kind}` },
    h('span', { class: `badge ${event.kind}` }, KINDS[event.kind]?.label || event.kind), ' ', event.label)));
  return page;
}
