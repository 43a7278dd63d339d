// The errors pages: a ranked list over a date range with filters and trend sparklines, and one
// error in detail (occurrences per day, visitors affected, pages, browsers, systems, devices,
// the latest occurrences with their context in words, the stack's frames). Every filter lives
// in the URL, so a view can be bookmarked and shared.
import { siteApi } from './api.js';
import { actionButton, exportTools } from './controls.js';
import { dayRangeText, empty, facts, h, pagePath, percent, shareList, svg, table, when } from './dom.js';
import { amount } from './money.js';
import { choice, field, filterForm, picked, siteDay } from './filters.js';

const FILTERS = ['status', 'source', 'page', 'from', 'to', 'sort'];
const SORTS = {
  lastSeen: 'Last seen',
  occurrences: 'Occurrences',
  visitors: 'Visitors affected',
  revenueAtRisk: 'Revenue at risk',
};

const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

function sparkline(counts, label) {
  const width = 120;
  const height = 28;
  const peak = Math.max(1, ...counts);
  const step = width / Math.max(1, counts.length - 1);
  const points = counts.map(
    (n, i) => `${(i * step).toFixed(1)},${(height - 2 - (n / peak) * (height - 4)).toFixed(1)}`,
  );
  return svg(
    'svg',
    { class: 'sparkline', viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': label },
    svg('polyline', { points: points.join(' '), fill: 'none', stroke: 'currentColor', 'stroke-width': 1.5 }),
  );
}

function errorFilters(app, site, query) {
  return filterForm(app, {
    id: 'error-filters',
    label: 'Filter errors',
    path: `/app/sites/${site.id}/errors`,
    defaults: { sort: 'lastSeen' },
    controls: [
      choice(
        'status',
        'Status',
        { '': 'Any', open: 'Open', resolved: 'Resolved', ignored: 'Ignored' },
        query.get('status'),
      ),
      choice('source', 'Source', { '': 'Any', javascript: 'JavaScript', php: 'PHP' }, query.get('source')),
      field('page', 'Page path starts with', query.get('page'), { placeholder: '/checkout', maxlength: 512 }),
      field('from', 'From', query.get('from'), { type: 'date' }),
      field('to', 'To', query.get('to'), { type: 'date' }),
      choice('sort', 'Sort by', SORTS, query.get('sort') || 'lastSeen'),
    ],
  });
}

/**
 * The text with a line-break opportunity after each `_`, `.` and `/`: an identifier such as
 * `wc_cart_fragments_params` may then wrap on a phone between its parts, never inside a word.
 */
function breakable(text) {
  return text.split(/(?<=[_./])/).flatMap((part, index) => (index ? [h('wbr'), part] : [part]));
}

export async function errorsPage(app, site, item, query) {
  if (item) return errorDetail(app, site, item, query);
  const params = picked(query, FILTERS);
  const container = h('div', {});
  // The column the list is sorted by is never hidden on a phone.
  const riskColumn = query.get('sort') === 'revenueAtRisk' ? '' : 'optional';
  const load = async () => {
    const ranked = await app.session.json(siteApi(site, `/error-trends?${params}&limit=50`));
    const range = dayRangeText(ranked.from, ranked.to);
    container.replaceChildren(
      ranked.items.length
        ? h(
            'div',
            { class: 'table-wrap' },
            h(
              'table',
              { id: 'errors' },
              h(
                'caption',
                { class: 'hint' },
                `Errors that occurred ${range}, by ${SORTS[query.get('sort') || 'lastSeen'].toLowerCase()}`,
              ),
              h(
                'thead',
                {},
                h(
                  'tr',
                  {},
                  h('th', {}, 'Error'),
                  h('th', {}, 'Occurrences'),
                  h('th', { class: 'optional' }, 'Visitors'),
                  h('th', { class: 'optional' }, 'Trend'),
                  h('th', {}, 'Last seen'),
                  h('th', { class: 'optional' }, 'Status'),
                  h('th', { class: riskColumn }, 'Revenue at risk'),
                ),
              ),
              h(
                'tbody',
                {},
                ranked.items.map((error) =>
                  h(
                    'tr',
                    { dataset: { errorId: error.id } },
                    h(
                      'td',
                      {},
                      h(
                        'a',
                        { href: `/app/sites/${site.id}/errors/${error.id}${params.size ? `?${params}` : ''}` },
                        breakable(`${error.type || 'Error'}: ${error.message || ''}`),
                      ),
                    ),
                    h('td', {}, String(error.occurrencesInRange)),
                    h('td', { class: 'optional' }, String(error.visitorsAffected)),
                    h(
                      'td',
                      { class: 'optional' },
                      sparkline(
                        error.trend,
                        `${plural(error.occurrencesInRange, 'occurrence')} ${range}, at most ` +
                          `${Math.max(...error.trend)} a day`,
                      ),
                    ),
                    h('td', {}, when(error.lastSeenInRange)),
                    h(
                      'td',
                      { class: 'optional' },
                      h('span', { class: `badge ${error.status}` }, error.status),
                      ' ',
                      h('span', { class: 'hint' }, error.source),
                    ),
                    h('td', { class: riskColumn }, atRisk(error.impact)),
                  ),
                ),
              ),
            ),
            // After the table, not inside it: a paragraph in a table is drawn as a cell of the
            // first column's width.
            h('p', { class: 'hint', id: 'revenue-rule' }, ranked.rule),
          )
        : empty(
            'No errors match',
            params.size ? 'Try a wider date range or fewer filters.' : 'Nothing went wrong in the last 30 days.',
          ),
    );
  };
  await load();
  app.listen({
    onEvent: (event) => event.type === 'new_error' && event.siteId === site.id && load(),
    onReconnect: load,
  });
  return h(
    'div',
    {},
    h('h1', {}, 'Errors'),
    errorFilters(app, site, query),
    h(
      'div',
      { class: 'panel row toolbar' },
      exportTools(app, site, 'errors', 'The file lists every error, whatever the filters here.'),
    ),
    h('div', { class: 'panel' }, container),
    await pagesAtRisk(app, site, params),
  );
}

/** An impact's revenue at risk in words: the figure only when significant, and what was observed. */
function atRisk(impact) {
  if (!impact || impact.status !== 'significant') {
    return h(
      'span',
      { class: 'hint' },
      impact?.affectedSessions ? `Not enough data (${observed(impact)})` : 'Not enough data',
    );
  }
  return h(
    'strong',
    { class: 'at-risk' },
    amount(impact.revenueAtRiskText, impact.currency),
    h(
      'span',
      { class: 'hint' },
      ` (90% interval ${amount(impact.revenueAtRiskLowText, impact.currency)} to ` +
        `${amount(impact.revenueAtRiskHighText, impact.currency)}; ${observed(impact)})`,
    ),
  );
}

/** The conversions of the sessions hit and of the comparable ones. */
function observed(impact) {
  return (
    `${plural(impact.affectedSessions, 'session')} hit: ` +
    `${percent(impact.affectedConversion)} ordered, against ${percent(impact.baselineConversion)}`
  );
}

/** Why an error has no figure: too few sessions hit, or a drop chance explains. */
function noFigureBecause(impact) {
  if (!impact.affectedSessions) return 'No session of this range was hit.';
  if (impact.adjustedPValue === null) return 'Fewer than 30 sessions were hit: too few to tell.';
  if (impact.status !== 'significant' && impact.adjustedPValue > 0.01) {
    return 'The sessions hit ordered less, but no more than chance explains.';
  }
  return 'No paid order in the reporting currency in this range gives an order value.';
}

/** The error's revenue at risk over the range: the figure and its interval, or why there is
 * none; the conversions behind it, the method in one sentence, and the sessions hit. */
function revenueAtRisk(site, errorId, breakdown, range) {
  const impact = breakdown.impact;
  const sessionsHit = new URLSearchParams(range);
  sessionsHit.set('error', errorId);
  return h(
    'section',
    { class: 'panel', id: 'revenue-at-risk', 'aria-labelledby': 'risk-title' },
    h('h2', { id: 'risk-title' }, 'Revenue at risk'),
    impact.status === 'significant'
      ? h(
          'p',
          {},
          h('strong', { class: 'at-risk' }, amount(impact.revenueAtRiskText, impact.currency)),
          ` at risk (90% interval ${amount(impact.revenueAtRiskLowText, impact.currency)} to ` +
            `${amount(impact.revenueAtRiskHighText, impact.currency)}).`,
        )
      : h('p', {}, h('strong', {}, 'Not enough data. '), noFigureBecause(impact)),
    impact.affectedSessions
      ? facts([
          ['Sessions hit', String(impact.affectedSessions)],
          ['Ordered after being hit', percent(impact.affectedConversion)],
          ['Comparable sessions that ordered', percent(impact.baselineConversion)],
        ])
      : null,
    h('p', { class: 'hint', id: 'risk-method' }, breakdown.method),
    impact.affectedSessions
      ? h(
          'p',
          {},
          h(
            'a',
            { id: 'sessions-hit', href: `/app/sites/${site.id}/recordings?${sessionsHit}` },
            'Recordings of the sessions hit',
          ),
        )
      : null,
  );
}

/** The pages with rage and dead clicks, by the revenue their sessions put at risk. */
async function pagesAtRisk(app, site, params) {
  const range = new URLSearchParams();
  for (const name of ['from', 'to']) if (params.get(name)) range.set(name, params.get(name));
  const pages = await app.session.json(siteApi(site, `/revenue-at-risk/pages?${range}`));
  return h(
    'section',
    { class: 'panel', 'aria-labelledby': 'pages-at-risk-title' },
    h('h2', { id: 'pages-at-risk-title' }, 'Pages with rage and dead clicks, by revenue at risk'),
    pages.items.length
      ? table({
          id: 'pages-at-risk',
          caption: `Sessions ${dayRangeText(pages.from, pages.to)} with a rage or dead click on the page`,
          head: [
            ['Page', { scope: 'col' }],
            ['Revenue at risk', { scope: 'col' }],
          ],
          rows: pages.items.map((row) => h('tr', {}, h('td', {}, h('code', {}, row.page)), h('td', {}, atRisk(row)))),
        })
      : empty('No rage or dead clicks in this period'),
    h('p', { class: 'hint' }, pages.rule),
  );
}

/** Bars of occurrences per day, described in words for screen readers. */
function dayBars(days) {
  const width = 640;
  const height = 120;
  const peak = Math.max(1, ...days.map((d) => d.count));
  const slot = width / Math.max(1, days.length);
  const total = days.reduce((sum, d) => sum + d.count, 0);
  const summary = `${plural(total, 'occurrence')} from ${days[0]?.day} to ${days.at(-1)?.day}, at most ${peak} a day.`;
  return h(
    'figure',
    { class: 'chart' },
    svg(
      'svg',
      { viewBox: `0 0 ${width} ${height + 16}`, role: 'img', 'aria-label': summary },
      ...days.map((d, i) =>
        svg(
          'rect',
          {
            class: 'bar-err',
            x: i * slot,
            width: Math.max(1, slot - 2),
            y: height - (d.count / peak) * height,
            height: (d.count / peak) * height,
          },
          svg('title', {}, `${d.day}: ${d.count}`),
        ),
      ),
      svg('text', { x: 0, y: height + 14 }, days[0]?.day.slice(5) || ''),
      svg('text', { x: width - 34, y: height + 14 }, days.at(-1)?.day.slice(5) || ''),
    ),
    h('figcaption', { class: 'hint' }, summary),
  );
}

/** Context as nested terms and values ("cart › items: 3"), never raw JSON. */
function readableContext(context) {
  const pairs = [];
  const walk = (value, path) => {
    if (value && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length) {
      for (const [key, inner] of Object.entries(value)) walk(inner, [...path, key]);
    } else {
      pairs.push([
        path.join(' › '),
        Array.isArray(value)
          ? value.map((v) => (typeof v === 'object' ? JSON.stringify(v) : String(v))).join(', ')
          : value && typeof value === 'object'
            ? '—'
            : String(value),
      ]);
    }
  };
  walk(context || {}, []);
  return pairs.length ? facts(pairs) : h('p', { class: 'hint' }, 'No context was sent.');
}

/** The stack's frames, one row each: function, file and line (the raw line when unparsed). */
function stackFrames(stack) {
  const lines = (stack || '')
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);
  const frames = lines.filter((line) => /^at\s|@|^#\d/.test(line));
  if (!frames.length) return lines.length ? h('pre', {}, stack) : empty('No stack trace');
  return h(
    'ol',
    { class: 'frames', id: 'stack-frames' },
    frames.map((line) => {
      const match = /^at\s+(?:(.*?)\s+\()?(.*?):(\d+)(?::(\d+))?\)?$/.exec(line);
      if (!match) return h('li', {}, h('code', {}, line));
      const [, fn, file, row, column] = match;
      return h(
        'li',
        {},
        h('strong', {}, fn || '(anonymous)'),
        ' ',
        h('code', {}, `${file}:${row}${column ? `:${column}` : ''}`),
      );
    }),
  );
}

async function errorDetail(app, site, errorId, query) {
  const range = new URLSearchParams();
  for (const name of ['from', 'to']) if (query.get(name)) range.set(name, query.get(name));
  const [error, breakdown, replays] = await Promise.all([
    app.session.json(siteApi(site, `/errors/${errorId}`)),
    app.session.json(siteApi(site, `/errors/${errorId}/breakdown?${range}`)),
    app.session.json(siteApi(site, `/errors/${errorId}/replays?${range}`)),
  ]);
  // An occurrence a recording shows opens that recording a few seconds before it happened.
  const replayOf = new Map(replays.items.map((item) => [item.occurrenceId, item]));
  const watchHref = (item) => `/app/sites/${site.id}/recordings/${item.recordingId}?at=${encodeURIComponent(item.at)}`;
  const watch = replays.items.length
    ? h(
        'p',
        { class: 'row' },
        h('a', { class: 'button', id: 'watch-error', href: watchHref(replays.items[0]) }, 'Watch it happen'),
        h(
          'span',
          { class: 'hint' },
          `The latest recorded occurrence, ${when(replays.items[0].at)}; ${replays.items.length} of the latest ` +
            `occurrences ${replays.items.length === 1 ? 'was' : 'were'} recorded.`,
        ),
      )
    : h(
        'p',
        { class: 'hint', id: 'no-recording' },
        'No recording shows this error in this range: recordings need the visitor’s consent and recordings ' +
          'switched on.',
      );
  const here = `/app/sites/${site.id}/errors/${errorId}`;
  const actions = app.isAdmin(site)
    ? h(
        'div',
        { class: 'row' },
        [
          ['resolved', 'Resolve'],
          ['ignored', 'Ignore'],
          ['open', 'Re-open'],
        ]
          .filter(([value]) => value !== error.status)
          .map(([value, label]) =>
            actionButton(
              label,
              async () => {
                await app.session.json(siteApi(site, `/errors/${errorId}`), {
                  method: 'PATCH',
                  json: { status: value },
                });
                app.go(`${here}${range.size ? `?${range}` : ''}`);
              },
              { kind: value === 'open' ? 'secondary' : '' },
            ),
          ),
      )
    : null;
  const rangeForm = h(
    'form',
    {
      class: 'row',
      'aria-label': 'Date range',
      onsubmit: (event) => {
        event.preventDefault();
        const params = new URLSearchParams();
        for (const [name, value] of new FormData(event.target)) if (value) params.set(name, value);
        app.go(`${here}${params.size ? `?${params}` : ''}`);
      },
    },
    h('label', { for: 'range-from' }, 'From'),
    h('input', { id: 'range-from', name: 'from', type: 'date', value: query.get('from') || breakdown.from }),
    h('label', { for: 'range-to' }, 'To'),
    h('input', { id: 'range-to', name: 'to', type: 'date', value: query.get('to') || breakdown.to }),
    h('button', { type: 'submit', class: 'secondary' }, 'Show'),
    ...[
      ['7 days', -6],
      ['30 days', -29],
      ['90 days', -89],
    ].map(([label, offset]) => h('a', { href: `${here}?from=${siteDay(site, offset)}&to=${siteDay(site)}` }, label)),
  );
  const visitors = breakdown.visitors.map((v) =>
    h(
      'li',
      {},
      v.displayName
        ? h(
            'a',
            { href: `/app/sites/${site.id}/visitors/${encodeURIComponent(v.visitorId)}`, title: v.visitorId },
            v.visitorLabel || v.displayName,
          )
        : h(
            'span',
            { title: v.visitorId },
            v.visitorLabel || v.visitorId,
            h('span', { class: 'hint' }, ' (no profile)'),
          ),
      h('span', { class: 'hint' }, ` · ${v.occurrences}× · last ${when(v.lastSeen)}`),
    ),
  );
  const latest = breakdown.latest.map((o) =>
    h(
      'li',
      { class: 'occurrence' },
      h(
        'p',
        {},
        h('strong', {}, when(o.occurredAt)),
        ' on ',
        h('code', {}, pagePath(o.url)),
        ` · ${[o.browser, o.os, o.deviceType].filter(Boolean).join(', ') || 'unknown device'}`,
        o.visitorId
          ? [
              ' · ',
              h(
                'a',
                { href: `/app/sites/${site.id}/visitors/${encodeURIComponent(o.visitorId)}`, title: o.visitorId },
                o.visitorLabel || 'visitor',
              ),
            ]
          : null,
        replayOf.has(o.id)
          ? [' · ', h('a', { class: 'watch', href: watchHref(replayOf.get(o.id)) }, 'Watch the recording')]
          : null,
      ),
      h('details', {}, h('summary', {}, 'Context (anonymised)'), readableContext(o.context)),
    ),
  );
  return h(
    'div',
    {},
    h('p', {}, h('a', { href: `/app/sites/${site.id}/errors` }, '← All errors')),
    h('h1', {}, `${error.type || 'Error'}: ${error.message || ''}`),
    h(
      'div',
      { class: 'panel' },
      h('p', {}, h('span', { class: `badge ${error.status}`, id: 'error-status-badge' }, error.status)),
      facts([
        ['Occurrences', String(error.occurrenceCount)],
        ['First seen', when(error.firstSeen)],
        ['Last seen', when(error.lastSeen)],
        ['Source', error.source],
        ['Re-opened', String(error.reopenCount || 0)],
      ]),
      actions,
      watch,
    ),
    h(
      'section',
      { class: 'panel', 'aria-labelledby': 'range-title' },
      h(
        'h2',
        { id: 'range-title' },
        `Seen ${dayRangeText(breakdown.from, breakdown.to)}: ${plural(breakdown.occurrences, 'occurrence')}, ` +
          `${plural(breakdown.visitorsAffected, 'visitor')} affected`,
      ),
      rangeForm,
      dayBars(breakdown.days),
    ),
    revenueAtRisk(site, errorId, breakdown, range),
    h(
      'div',
      { class: 'grid' },
      h(
        'section',
        { class: 'panel' },
        h('h2', {}, `Visitors affected (${breakdown.visitorsAffected})`),
        visitors.length ? h('ul', { id: 'affected-visitors' }, visitors) : empty('No visitors in this range'),
      ),
      h(
        'section',
        { class: 'panel' },
        h('h2', {}, 'Pages'),
        shareList('error-pages', breakdown.pages, { none: 'Nothing recorded', unknown: 'unknown page' }),
      ),
      h(
        'section',
        { class: 'panel' },
        h('h2', {}, 'Browsers'),
        shareList('error-browsers', breakdown.browsers, { none: 'Nothing recorded', unknown: 'unknown' }),
      ),
      h(
        'section',
        { class: 'panel' },
        h('h2', {}, 'Systems'),
        shareList('error-systems', breakdown.systems, { none: 'Nothing recorded', unknown: 'unknown' }),
      ),
      h(
        'section',
        { class: 'panel' },
        h('h2', {}, 'Devices'),
        shareList('error-devices', breakdown.devices, { none: 'Nothing recorded', unknown: 'unknown' }),
      ),
    ),
    h('section', { class: 'panel' }, h('h2', {}, 'Stack frames (latest)'), stackFrames(error.lastStack)),
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'Latest occurrences'),
      latest.length
        ? h('ol', { class: 'occurrences', id: 'latest-occurrences' }, latest)
        : empty('No occurrences in this range'),
    ),
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'Context of the latest occurrence (anonymised)'),
      readableContext(error.context),
    ),
  );
}
