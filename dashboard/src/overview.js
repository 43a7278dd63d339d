// The overview: a date range (today, 7 days, 30 days or custom, kept in the URL) with visitors,
// pageviews, errors, leads and leads per visitor against the previous period; engagement
// (engagement.js); sales (money.js);
// top pages, top errors, the pages with the most rage and dead clicks, countries and devices;
// traffic sources (traffic.js); the daily chart (chart.js) and the live feed of new errors and leads.
import { ApiError, describeError, siteApi } from './api.js';
import { dailyChart } from './chart.js';
import { setupChecklist } from './checklist.js';
import { engagementPanel } from './engagement.js';
import { alertBox, dayRangeText, dayText, empty, h, percentChange, shareList, table, when } from './dom.js';
import { DEFAULT_OFFSET, siteDay } from './filters.js';
import { moneyPanel } from './money.js';
import { trafficPanels } from './traffic.js';

const FIGURES = [
  ['visitors', 'Visitors'],
  ['pageviews', 'Pageviews'],
  ['errors', 'Errors'],
  ['leads', 'Leads'],
  ['leadsPerVisitor', 'Leads per visitor'],
];
/** More of these is bad news, so their rise is shown in the warning colour. */
const WORSE_WHEN_UP = new Set(['errors']);
const PRESETS = [
  ['Today', 0],
  ['7 days', -6],
  ['30 days', DEFAULT_OFFSET],
];

function number(value, name) {
  return name === 'leadsPerVisitor' ? value.toFixed(2) : value.toLocaleString();
}

function change(figure, name, days) {
  const period = days === 1 ? 'the day before' : `the ${days} days before`;
  if (figure.change === null) return h('span', { class: 'change' }, figure.previous ? '' : `none in ${period}`);
  const { size, sign } = percentChange(figure.change);
  const up = sign > 0;
  const tone = sign === 0 ? '' : up === WORSE_WHEN_UP.has(name) ? 'worse' : 'better';
  return h(
    'span',
    { class: `change ${tone}` },
    `${sign === 0 ? '±' : up ? '▲ +' : '▼ −'}${size} vs ${period} (${number(figure.previous, name)})`,
  );
}

function ranking(id, rows, caption, [nameHead, countHead], nameOf) {
  if (!rows.length) return empty('Nothing in this period');
  return table({
    id,
    caption,
    head: [nameHead, [countHead, { class: 'num' }]],
    rows: rows.map((row) =>
      h('tr', {}, h('td', {}, nameOf(row)), h('td', { class: 'num' }, row.countText ?? String(row.count))),
    ),
  });
}

const INVERTED = 'The start date is after the end date. Choose a start on or before the end.';

/** The date controls; `problem` is said beside them (a refused range), and they stay usable. */
function rangeControls(app, site, data, query, problem = null) {
  const here = `/app/sites/${site.id}`;
  const chosen = `${data.from}/${data.to}`;
  const presets = PRESETS.map(([label, offset]) => {
    const href = `${here}?from=${siteDay(site, offset)}&to=${siteDay(site)}`;
    return h(
      'a',
      {
        class: 'button secondary',
        href,
        'aria-current': chosen === `${siteDay(site, offset)}/${siteDay(site)}` ? 'true' : null,
      },
      label,
    );
  });
  const said = h('div', { id: 'range-problem' }, problem ? alertBox(problem) : null);
  const form = h(
    'form',
    {
      class: 'row',
      id: 'overview-range',
      'aria-label': 'Custom date range',
      onsubmit: (event) => {
        event.preventDefault();
        const params = new URLSearchParams();
        for (const [name, value] of new FormData(form)) if (value) params.set(name, value);
        if (params.get('from') && params.get('to') && params.get('from') > params.get('to')) {
          said.replaceChildren(alertBox(INVERTED));
          return;
        }
        app.go(`${here}${params.size ? `?${params}` : ''}`);
      },
    },
    h('label', { for: 'range-from' }, 'From'),
    h('input', { id: 'range-from', name: 'from', type: 'date', value: query.get('from') || data.from }),
    h('label', { for: 'range-to' }, 'To'),
    h('input', { id: 'range-to', name: 'to', type: 'date', value: query.get('to') || data.to }),
    h('button', { type: 'submit', class: 'secondary' }, 'Show'),
  );
  return h(
    'div',
    { class: 'panel range' },
    h('div', { class: 'row' }, h('span', { class: 'row presets' }, presets), form),
    said,
  );
}

/** Figures are folded in off the request path within a second or so; say so when they lag. */
const LAG_SHOWN_MS = 30000;

/** Where the range (or the period it is compared with) crosses a change of the site's time zone. */
function zoneChangeNote(changes) {
  if (!changes?.length) return null;
  return h(
    'p',
    { class: 'hint', id: 'zone-changes' },
    changes
      .map((change) => `From ${dayText(change.day)} days run in ${change.to} (before, in ${change.from}).`)
      .join(' '),
  );
}

function behind(asOf) {
  if (!asOf || Date.now() - Date.parse(asOf) < LAG_SHOWN_MS) return null;
  return h(
    'p',
    { class: 'hint', id: 'figures-as-of', role: 'status' },
    `Figures as of ${when(asOf)}: what arrived since is still being counted.`,
  );
}

function feedItem(site, event) {
  const isError = event.type === 'new_error';
  const text = isError
    ? `${event.error.type || 'Error'}: ${event.error.message}`
    : `New lead: ${event.lead.displayName || 'someone'}`;
  const href = isError
    ? `/app/sites/${site.id}/errors/${event.id}`
    : event.lead.visitorId
      ? `/app/sites/${site.id}/visitors/${encodeURIComponent(event.lead.visitorId)}`
      : null;
  return h(
    'li',
    { class: event.fresh ? 'fresh' : '', dataset: { type: event.type, id: event.id } },
    h(
      'span',
      { class: `badge ${isError ? 'open' : 'resolved'}` },
      isError ? (event.error.reopened ? 'error re-opened' : 'error') : 'lead',
    ),
    href ? h('a', { href }, text) : text,
    h('span', { class: 'hint' }, when(event.time)),
  );
}

/** Add the site's recent events (GET .../live/recent) that the feed does not hold yet. */
async function recentEvents(app, site) {
  let events;
  try {
    ({ events } = await app.session.json(siteApi(site, `/live/recent`)));
  } catch {
    return; // the socket still fills the feed
  }
  const held = new Set(app.feed.map((event) => `${event.type}/${event.id}`));
  for (const event of events) {
    if (!held.has(`${event.type}/${event.id}`)) app.feed.push({ ...event, fresh: false });
  }
  app.feed.sort((a, b) => b.time.localeCompare(a.time));
  app.feed.length = Math.min(app.feed.length, 100);
}

/** The live feed: the site's new errors and leads, as they happen and from the past hour. */
function liveFeed(app, site) {
  const list = h('ul', { class: 'feed', id: 'live-feed', 'aria-live': 'polite' });
  const placeholder = empty(
    'Nothing new in the past hour',
    'New errors and leads appear here the moment they are processed.',
  );
  const fill = () => {
    const items = app.feed.filter((event) => event.siteId === site.id);
    list.replaceChildren(...items.map((event) => feedItem(site, event)));
    placeholder.hidden = items.length > 0;
    for (const event of items) event.fresh = false;
  };
  fill();
  // Live events are not replayed: the past hour's, from the server, fill a fresh feed and
  // whatever a reconnect missed.
  const recent = () => recentEvents(app, site).then(fill);
  recent();
  app.listen({ onEvent: fill, onReconnect: recent });
  return h(
    'section',
    { class: 'panel', 'aria-labelledby': 'feed-title' },
    h('h2', { id: 'feed-title' }, 'Live feed'),
    placeholder,
    list,
  );
}

/** The overview page. */
export async function overviewPage(app, site, item, query) {
  const feed = liveFeed(app, site);
  // The last 7 days unless the address names a range.
  const range = new URLSearchParams({
    from: query.get('from') || siteDay(site, DEFAULT_OFFSET),
    to: query.get('to') || siteDay(site),
  });
  const refused = (problem) =>
    h(
      'div',
      {},
      h('h1', {}, `${site.name}: overview`),
      rangeControls(app, site, { from: range.get('from'), to: range.get('to') }, query, problem),
    );
  // ISO dates compare as text; an address with an inverted range keeps the controls to fix it.
  if (range.get('from') > range.get('to')) return refused(INVERTED);
  let data;
  try {
    data = await app.session.json(siteApi(site, `/overview?${range}`));
  } catch (failure) {
    if (!(failure instanceof ApiError) || failure.status !== 422) throw failure;
    return refused(describeError(failure));
  }
  const days = await app.session.json(siteApi(site, `/stats/daily?from=${data.from}&to=${data.to}`));
  const length = Math.round((Date.parse(data.to) - Date.parse(data.from)) / 86400000) + 1;
  const period = dayRangeText(data.from, data.to);
  const cards = h(
    'ul',
    { class: 'figures', id: 'overview-figures', 'aria-label': `Figures ${period}` },
    FIGURES.map(([name, label]) => {
      const figure = data.figures[name];
      return h(
        'li',
        { class: 'figure', dataset: { figure: name } },
        h('span', { class: 'figure-label' }, label),
        h('strong', { class: 'figure-value' }, number(figure.value, name)),
        change(figure, name, length),
      );
    }),
  );
  const errorName = (row) =>
    h('a', { href: `/app/sites/${site.id}/errors/${row.id}` }, `${row.type || 'Error'}: ${row.message || ''}`);
  return h(
    'div',
    {},
    h('h1', {}, `${site.name}: overview`),
    rangeControls(app, site, data, query),
    await setupChecklist(app, site),
    h(
      'section',
      { class: 'panel', 'aria-labelledby': 'figures-title' },
      h('h2', { id: 'figures-title' }, `Figures ${period}`),
      zoneChangeNote(data.zoneChanges),
      cards,
      behind(data.figuresAsOf),
    ),
    engagementPanel(data.engagement, data.engagementMethod, length),
    moneyPanel(data.commerce, length),
    h(
      'div',
      { class: 'grid' },
      h(
        'section',
        { class: 'panel' },
        h('h2', {}, 'Top pages'),
        ranking('top-pages', data.topPages, 'Pages by pageviews', ['Page', 'Pageviews'], (row) =>
          h('code', {}, row.name),
        ),
      ),
      h(
        'section',
        { class: 'panel' },
        h('h2', {}, 'Top errors'),
        ranking('top-errors', data.topErrors, 'Errors by occurrences', ['Error', 'Count'], errorName),
      ),
      h(
        'section',
        { class: 'panel' },
        h('h2', {}, 'Rage and dead clicks'),
        ranking(
          'frustration',
          data.frustration.map((row) => ({
            ...row,
            count: row.rageClicks + row.deadClicks,
            countText: `${row.rageClicks} rage, ${row.deadClicks} dead`,
          })),
          'Pages where visitors clicked in frustration or on nothing that responded',
          ['Page', 'Clicks'],
          (row) => h('code', {}, row.page),
        ),
      ),
      h('section', { class: 'panel' }, h('h2', {}, 'Countries'), shareList('countries', data.countries)),
      h('section', { class: 'panel' }, h('h2', {}, 'Devices'), shareList('devices', data.devices)),
    ),
    trafficPanels(site, data.traffic, data.from, data.to),
    h(
      'div',
      { class: 'grid' },
      h('section', { class: 'panel' }, h('h2', {}, 'Pageviews and errors per day'), dailyChart(days)),
      feed,
    ),
    h(
      'p',
      { class: 'hint' },
      `Compared with the days ${dayRangeText(data.previous.from, data.previous.to)}. Updated ${when(new Date().toISOString())}.`,
    ),
  );
}
