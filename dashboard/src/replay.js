// Replay, for every page that plays a recording: download a recording's segments (gzip files),
// inflate them in the browser with DecompressionStream, concatenate the rrweb event arrays and
// hand them to rrweb-player, with what happened (errors, rage and dead clicks, page changes,
// leads) as markers on the player's timeline. The replay page itself is in recordings.js.
import rrwebPlayer from 'rrweb-player';
import 'rrweb-player/dist/style.css';
import { describeError, siteApi } from './api.js';
import { alertBox, empty, h, progress } from './dom.js';

/** How long before an event the player starts, so the moment is seen as it happens. */
export const LEAD_IN_MS = 3000;
/** rrweb's custom event type: the player draws each as a marker on its progress bar. */
const CUSTOM_EVENT = 5;
/** rrweb's meta event: each page's snapshot starts with one, carrying the page's address. */
const META_EVENT = 4;
export const KINDS = {
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
export async function loadEvents(session, site, recordingId, onProgress) {
  const list = await session.json(siteApi(site, `/recordings/${recordingId}/segments`));
  const events = [];
  let done = 0;
  for (const segment of list.segments) {
    const response = await session.send(siteApi(site, `/segments/${segment.fileId}`));
    events.push(...(await inflate(response)));
    done += 1;
    onProgress?.(done, list.segments.length);
  }
  events.sort((a, b) => a.timestamp - b.timestamp);
  return events;
}

/** The recording's events, saying in `holder` how far the download is; `holder` is left empty. */
export async function loadInto(holder, session, site, recordingId) {
  const events = await loadEvents(session, site, recordingId, (done, total) => {
    holder.replaceChildren(progress(`Downloading segment ${done} of ${total}…`));
  });
  holder.replaceChildren();
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
    try {
      label = new URL(href).pathname || '/';
    } catch {
      /* not a URL: shown as it is */
    }
    pages.push({ kind: 'page', at: new Date(event.timestamp).toISOString(), label, url: href });
  }
  const shown = new Set(pages.map((page) => page.url));
  return [...markers.filter((marker) => marker.kind !== 'page' || !shown.has(marker.url)), ...pages].sort(
    (a, b) => Date.parse(a.at) - Date.parse(b.at),
  );
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
    type: CUSTOM_EVENT,
    timestamp: Math.min(last, Math.max(first, Date.parse(marker.at))),
    data: { tag: KINDS[marker.kind]?.label || marker.kind, payload: { label: marker.label } },
  }));
  const all = [...events, ...tagged].sort((a, b) => a.timestamp - b.timestamp);
  const tags = Object.fromEntries(Object.values(KINDS).map((kind) => [kind.label, kind.color]));
  const player = new rrwebPlayer({
    target,
    props: { events: all, width, height, autoPlay: !startAt, showController: true, skipInactive: true, tags },
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
  const play = h(
    'button',
    {
      type: 'button',
      class: 'secondary',
      'aria-label': name,
      onclick: async () => {
        play.disabled = true;
        holder.replaceChildren(progress('Downloading the recording…'));
        try {
          const events = await loadInto(holder, app.session, site, recordingId);
          if (events.length < 2)
            holder.append(empty('Nothing to replay', 'This recording has no replayable page yet.'));
          else mountPlayer(holder, events);
        } catch (failure) {
          holder.replaceChildren(alertBox(describeError(failure)));
        } finally {
          play.disabled = false;
        }
      },
    },
    label,
  );
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
