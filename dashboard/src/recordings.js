// The recordings pages: the list, filtered in the URL (date, length, page, country, device,
// marks, source, a funnel step's drop-off, a saved segment), and one recording replayed
// (/app/sites/{site}/recordings/{id}?at=<ISO time to open at>) beside what happened in it.
import { describeError, siteApi } from './api.js';
import { exportPanel } from './controls.js';
import { alertBox, empty, h, progress, seconds, when } from './dom.js';
import { DEVICES, checks, choice, field, filterForm, listQuery, pager } from './filters.js';
import { KINDS, LEAD_IN_MS, loadInto, mountPlayer, withPageChanges } from './replay.js';
import { segmentChoice } from './sessions.js';

/** The recordings list's filters, each a query parameter of the page and of the API. */
const RECORDING_FILTERS = [
  'from',
  'to',
  'minDuration',
  'maxDuration',
  'page',
  'country',
  'device',
  'has',
  'source',
  'funnel',
  'stoppedAt',
  'error',
  'segment',
];
const MARKS = { error: 'An error', rage_click: 'A rage click', dead_click: 'A dead click', lead: 'A lead' };
const MARK_WORDS = {
  error: ['error', 'errors'],
  rage_click: ['rage click', 'rage clicks'],
  dead_click: ['dead click', 'dead clicks'],
  lead: ['lead', 'leads'],
};

function marks(recording) {
  const found = Object.entries(recording.marks || {}).filter(([, count]) => count > 0);
  return found.map(([mark, count]) =>
    h('span', { class: `badge ${mark}` }, `${count} ${MARK_WORDS[mark][count === 1 ? 0 : 1]}`),
  );
}

export async function recordingsPage(app, site, item, query) {
  if (item) return replayPage(app, site, item, query);
  const { filters, cursor, params } = listQuery(query, RECORDING_FILTERS);
  const page = await app.session.json(siteApi(site, `/recordings?${params}`));
  const path = `/app/sites/${site.id}/recordings`;
  const form = filterForm(app, {
    id: 'recording-filters',
    label: 'Filter recordings',
    path,
    controls: [
      await segmentChoice(app, site, query.get('segment')),
      field('from', 'From', query.get('from'), { type: 'date' }),
      field('to', 'To', query.get('to'), { type: 'date' }),
      field('minDuration', 'At least (seconds)', query.get('minDuration'), {
        type: 'number',
        min: 0,
        max: 86400,
        inputmode: 'numeric',
      }),
      field('maxDuration', 'At most (seconds)', query.get('maxDuration'), {
        type: 'number',
        min: 0,
        max: 86400,
        inputmode: 'numeric',
      }),
      field('page', 'Page address contains', query.get('page'), { placeholder: '/checkout', maxlength: 512 }),
      field('country', 'Country code', query.get('country'), {
        placeholder: 'DE',
        maxlength: 2,
        pattern: '[A-Za-z]{2}',
      }),
      choice('device', 'Device', DEVICES, query.get('device')),
      checks('has', 'With at least', MARKS, query.get('has')),
      field('source', 'Source', query.get('source'), {
        placeholder: 'google.com, newsletter or (direct)',
        maxlength: 100,
      }),
      // A funnel step chosen on the funnels page is kept, and said, until the filters are cleared.
      query.get('funnel') ? h('input', { type: 'hidden', name: 'funnel', value: query.get('funnel') }) : null,
      query.get('stoppedAt') ? h('input', { type: 'hidden', name: 'stoppedAt', value: query.get('stoppedAt') }) : null,
      query.get('error') ? h('input', { type: 'hidden', name: 'error', value: query.get('error') }) : null,
      query.get('error')
        ? h(
            'p',
            { class: 'hint', id: 'error-filter' },
            'Sessions hit by ',
            h('a', { href: `/app/sites/${site.id}/errors/${encodeURIComponent(query.get('error'))}` }, 'this error'),
            '.',
          )
        : null,
      query.get('funnel')
        ? h(
            'p',
            { class: 'hint', id: 'funnel-filter' },
            `Sessions that stopped at step ${query.get('stoppedAt')} of the funnel `,
            h('a', { href: `/app/sites/${site.id}/funnels/${encodeURIComponent(query.get('funnel'))}` }, 'shown here'),
            '.',
          )
        : null,
    ],
  });
  const items = page.items.map((recording) =>
    h(
      'li',
      { class: 'recording', dataset: { recordingId: recording.id } },
      h(
        'div',
        { class: 'row' },
        h('strong', {}, when(recording.startedAt)),
        recording.visitorId
          ? h(
              'a',
              {
                href: `/app/sites/${site.id}/visitors/${encodeURIComponent(recording.visitorId)}`,
                title: recording.visitorId,
              },
              recording.visitorLabel || recording.visitorName || 'Visitor',
            )
          : null,
        h('span', {}, recording.pageUrl || 'unknown page'),
        h(
          'span',
          { class: 'hint' },
          `${seconds(recording.duration)} · ${recording.pageCount} ${recording.pageCount === 1 ? 'page' : 'pages'}` +
            `${recording.country ? ` · ${recording.country}` : ''}${recording.device ? ` · ${recording.device}` : ''}`,
        ),
        ...marks(recording),
        recording.legacy
          ? h('span', { class: 'hint' }, 'Footage on your own server')
          : h(
              'a',
              {
                class: 'button secondary watch',
                href: `${path}/${recording.id}`,
                'aria-label': `Watch the recording of ${when(recording.startedAt)}`,
              },
              'Watch',
            ),
      ),
    ),
  );
  return h(
    'div',
    {},
    h('h1', {}, 'Recordings'),
    form,
    exportPanel(
      app,
      site,
      'recordings',
      'What was recorded, when and for how long, newest first; never the footage, and nothing of restricted ' +
        'visitors. The file ignores the filters here.',
    ),
    h(
      'div',
      { class: 'panel' },
      items.length
        ? h('ul', { class: 'recordings', id: 'recordings' }, items)
        : empty(
            filters.size ? 'No recording matches' : 'No recordings yet',
            filters.size
              ? 'Try a wider date range or fewer filters.'
              : 'Recordings appear when they are switched on in Settings and visitors consented.',
          ),
      pager(path, filters, cursor, page.nextCursor),
    ),
  );
}

const clock = (ms) => {
  const total = Math.max(0, Math.round(ms / 1000));
  return `${Math.floor(total / 60)}:${String(total % 60).padStart(2, '0')}`;
};

/** The replay page: /app/sites/{site}/recordings/{id}?at=<ISO time to open at>. */
async function replayPage(app, site, recordingId, query) {
  const timeline = await app.session.json(siteApi(site, `/recordings/${recordingId}/timeline`));
  const { recording } = timeline;
  const holder = h('div', { class: 'player', id: 'replay-player' }, progress('Downloading the recording…'));
  const list = h('ol', { class: 'replay-events', id: 'replay-events', 'aria-label': 'What happened' });
  const heading = h('h1', {}, `Recording of ${when(recording.startedAt)}`);
  const length = h('span', {}, seconds(recording.duration));
  const summary = h(
    'p',
    { class: 'hint' },
    length,
    ` · ${recording.pageCount} ${recording.pageCount === 1 ? 'page' : 'pages'}`,
    recording.visitorId
      ? [
          ' · ',
          h(
            'a',
            { href: `/app/sites/${site.id}/visitors/${encodeURIComponent(recording.visitorId)}` },
            'the visitor’s profile',
          ),
        ]
      : null,
  );
  const title = h('h2', { id: 'events-title' }, `What happened (${timeline.events.length})`);
  const nothing = empty(
    'Nothing marked',
    'No errors, clicks in frustration, page changes or leads during this recording.',
  );
  const page = h(
    'div',
    {},
    h('p', {}, h('a', { href: `/app/sites/${site.id}/recordings` }, '← All recordings')),
    heading,
    summary,
    h(
      'div',
      { class: 'replay' },
      h('section', { class: 'panel replay-stage', 'aria-label': 'Player' }, holder),
      h(
        'section',
        { class: 'panel replay-side', 'aria-labelledby': 'events-title' },
        title,
        timeline.events.length ? list : nothing,
      ),
    ),
  );
  // The player is built once the page is in the document, so it can measure its width.
  queueMicrotask(async () => {
    try {
      const events = await loadInto(holder, app.session, site, recordingId);
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
      list.replaceChildren(
        ...markers.map((event) => {
          const ms = offset(event.at);
          const target = Math.max(0, ms - LEAD_IN_MS);
          return h(
            'li',
            { class: `marker ${event.kind}`, dataset: { kind: event.kind } },
            h(
              'button',
              {
                type: 'button',
                class: 'link',
                onclick: () => {
                  player.goto(target, true);
                  holder.dataset.seekedTo = String(target);
                },
              },
              h('span', { class: 'time' }, clock(ms)),
              ' ',
              h('span', { class: `badge ${event.kind}` }, KINDS[event.kind]?.label || event.kind),
              ' ',
              event.label,
            ),
          );
        }),
      );
    } catch (failure) {
      holder.replaceChildren(alertBox(describeError(failure)));
    }
  });
  list.replaceChildren(
    ...timeline.events.map((event) =>
      h(
        'li',
        { class: `marker ${event.kind}` },
        h('span', { class: `badge ${event.kind}` }, KINDS[event.kind]?.label || event.kind),
        ' ',
        event.label,
      ),
    ),
  );
  return page;
}
