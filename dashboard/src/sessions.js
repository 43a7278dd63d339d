// The sessions page (issue 41 point 5): the site's sessions found by outcome, every filter in the
// URL (converted, order value in the reporting currency, campaign and source, entry, exit and
// visited page, error, rage or dead click on a page, device, country, days), newest first with
// more by cursor; "Save as segment" names the filters for reuse, and the segment picker that
// the recordings, visitors and funnels pages share applies one.
import { describeError, siteApi } from './api.js';
import { actionButton } from './controls.js';
import { alertBox, empty, h, seconds, table, when } from './dom.js';
import { DEVICES, choice, field, filterForm, listQuery, pager, yesNo } from './filters.js';
import { amount } from './money.js';

/** What a segment holds: the session filters, never the days (a segment serves any range). */
const OUTCOME_FILTERS = [
  'converted',
  'minValue',
  'maxValue',
  'utmCampaign',
  'utmSource',
  'source',
  'entry',
  'exit',
  'page',
  'error',
  'frustration',
  'device',
  'country',
];
const SESSION_FILTERS = ['from', 'to', 'segment', ...OUTCOME_FILTERS];
const AMOUNT = { inputmode: 'decimal', pattern: '[0-9]{1,13}([.][0-9]{1,3})?', maxlength: 17, placeholder: '0.00' };
const PATH = { maxlength: 512, pattern: '/.*', placeholder: '/checkout' };
/** Each filter as a segment's summary names it. */
const LABELS = {
  converted: 'Ordered',
  minValue: 'Order value from',
  maxValue: 'Order value to',
  utmCampaign: 'UTM campaign',
  utmSource: 'UTM source',
  source: 'Source',
  entry: 'Entry page',
  exit: 'Exit page',
  page: 'Visited page',
  error: 'Error',
  frustration: 'Rage or dead click on',
  device: 'Device',
  country: 'Country',
};

/** A session's length: seconds and minutes, hours past the hour (a visit can span a day). */
function length(value) {
  const total = Math.round(Number(value) || 0);
  if (total < 3600) return seconds(total);
  const minutes = Math.floor(total / 60);
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** The site's saved segments, by name; none when they cannot be read (the page still works). */
async function savedSegments(app, site) {
  try {
    return await app.session.json(siteApi(site, '/saved-segments'));
  } catch {
    return [];
  }
}

/**
 * The segment picker of a filter form: a choice of the site's saved segments under the name
 * `segment`, which the list's API takes as it is; null when the site has none (and none is
 * chosen), so a page without segments shows no empty control.
 */
export async function segmentChoice(app, site, value, segments = null) {
  const listed = segments || (await savedSegments(app, site));
  if (!listed.length && !value) return null;
  const options = { '': 'All sessions' };
  for (const segment of listed) options[segment.id] = segment.name;
  if (value && !options[value]) options[value] = 'A deleted segment';
  return choice('segment', 'Segment', options, value);
}

/** A cell with its label, which a phone shows before the value (the table's head is hidden). */
function cell(label, content, attrs = {}) {
  return h('td', { ...attrs, dataset: { label } }, h('span', {}, content));
}

function outcomeText(outcome) {
  if (!outcome.converted) return h('span', { class: 'hint' }, 'No order');
  const parts = [];
  if (outcome.value) parts.push(amount(outcome.value, outcome.currency));
  for (const other of outcome.otherCurrencies) parts.push(amount(other.value, other.currency));
  const orders = `${outcome.orders} ${outcome.orders === 1 ? 'order' : 'orders'}`;
  return [h('span', { class: 'badge converted' }, 'Ordered'), ` ${parts.join(' + ')} · ${orders}`];
}

function troubleText(row) {
  const badges = [];
  if (row.errors)
    badges.push(h('span', { class: 'badge error' }, `${row.errors} ${row.errors === 1 ? 'error' : 'errors'}`));
  if (row.frustrated) badges.push(h('span', { class: 'badge rage_click' }, `${row.frustrated} frustrated`));
  return badges.length ? badges : h('span', { class: 'hint' }, '—');
}

function sessionRow(row) {
  const label = `the session of ${when(row.startedAt)}`;
  const pages = `${row.pageviews} ${row.pageviews === 1 ? 'page' : 'pages'}`;
  return h(
    'tr',
    { dataset: { sessionId: row.sessionId || row.id } },
    cell('Started', when(row.startedAt)),
    cell(
      'Visitor',
      h(
        'a',
        { href: row.links.visitor, title: row.visitorId, 'aria-label': `${row.visitorLabel}, visitor of ${label}` },
        row.visitorLabel,
      ),
    ),
    cell('Length', `${length(row.duration)} · ${pages}`),
    cell('Pages', row.entry === row.exit ? row.entry : `${row.entry} → ${row.exit}`),
    cell('Source', [row.source, row.utmCampaign ? h('span', { class: 'hint' }, ` (${row.utmCampaign})`) : null]),
    cell('Outcome', outcomeText(row.outcome)),
    cell('Trouble', troubleText(row)),
    cell(
      'Replay',
      row.links.replay
        ? h('a', { href: row.links.replay, 'aria-label': `Replay of ${label}` }, 'Replay')
        : h('span', { class: 'hint' }, '—'),
    ),
  );
}

/** The filters of the page that a segment would hold, as the API's body takes them. */
function outcomeFilters(query) {
  const filters = {};
  for (const name of OUTCOME_FILTERS) {
    const value = query.get(name);
    if (value) filters[name] = name === 'converted' ? value === 'true' : value;
  }
  return filters;
}

/** "Save as segment" (owners and admins): names the page's filters; the page then shows it. */
function saveSegment(app, site, path, query) {
  const filters = outcomeFilters(query);
  if (!Object.keys(filters).length) {
    return h('p', { class: 'hint', id: 'segment-hint' }, 'Choose filters to save them as a segment.');
  }
  const name = h('input', { id: 'segment-name', name: 'name', maxlength: 80, required: true, autocomplete: 'off' });
  const status = h('span', { role: 'status', class: 'hint' });
  const form = h(
    'form',
    {
      class: 'row',
      id: 'save-segment',
      'aria-label': 'Save as segment',
      onsubmit: async (event) => {
        event.preventDefault();
        status.replaceChildren();
        try {
          const saved = await app.session.json(siteApi(site, '/saved-segments'), {
            method: 'POST',
            json: { name: name.value, filters },
          });
          const next = new URLSearchParams({ segment: saved.id });
          for (const day of ['from', 'to']) if (query.get(day)) next.set(day, query.get(day));
          app.go(`${path}?${next}`);
        } catch (failure) {
          status.replaceChildren(alertBox(describeError(failure)));
        }
      },
    },
    h('div', { class: 'field' }, h('label', { for: 'segment-name' }, 'Segment name'), name),
    h('button', { type: 'submit' }, 'Save as segment'),
    status,
  );
  return form;
}

/** What a chosen segment holds, where else it applies, and (admins) its removal. */
function segmentPanel(app, site, path, segment) {
  const applied = `segment=${encodeURIComponent(segment.id)}`;
  const said = (name, value) => (name === 'converted' ? (value ? 'yes' : 'no') : value);
  const held = Object.entries(segment.filters).map(([name, value]) => `${LABELS[name] || name}: ${said(name, value)}`);
  return h(
    'div',
    { class: 'panel', id: 'segment-panel' },
    h('p', {}, h('strong', {}, segment.name), ` (${held.join('; ')})`),
    h(
      'p',
      { class: 'row' },
      h('a', { href: `/app/sites/${site.id}/recordings?${applied}` }, 'Its recordings'),
      h('a', { href: `/app/sites/${site.id}/visitors?${applied}` }, 'Its visitors'),
      h('a', { href: `/app/sites/${site.id}/funnels?${applied}` }, 'Its funnels'),
    ),
    app.isAdmin(site)
      ? actionButton(
          'Delete segment',
          async () => {
            await app.session.json(siteApi(site, `/saved-segments/${segment.id}`), { method: 'DELETE' });
            app.go(path);
          },
          { kind: 'secondary', id: 'delete-segment', busy: 'Deleting…' },
        )
      : null,
  );
}

export async function sessionsPage(app, site, item, query) {
  const path = `/app/sites/${site.id}/sessions`;
  const { filters, cursor, params } = listQuery(query, SESSION_FILTERS);
  const segments = await savedSegments(app, site);
  const chosen = segments.find((segment) => segment.id === query.get('segment'));
  const form = filterForm(app, {
    id: 'session-filters',
    label: 'Find sessions',
    path,
    controls: [
      await segmentChoice(app, site, query.get('segment'), segments),
      field('from', 'From', query.get('from'), { type: 'date' }),
      field('to', 'To', query.get('to'), { type: 'date' }),
      yesNo('converted', 'Ordered', query.get('converted')),
      field('minValue', 'Order value from', query.get('minValue'), AMOUNT),
      field('maxValue', 'Order value to', query.get('maxValue'), AMOUNT),
      field('utmCampaign', 'UTM campaign', query.get('utmCampaign'), { maxlength: 100 }),
      field('utmSource', 'UTM source', query.get('utmSource'), { maxlength: 100 }),
      field('source', 'Source', query.get('source'), { placeholder: 'google.com or (direct)', maxlength: 100 }),
      field('entry', 'Entry page', query.get('entry'), PATH),
      field('exit', 'Exit page', query.get('exit'), PATH),
      field('page', 'Visited page', query.get('page'), PATH),
      field('frustration', 'Rage or dead click on', query.get('frustration'), PATH),
      field('error', 'Error id', query.get('error'), { maxlength: 36, pattern: '[0-9a-f-]{36}' }),
      choice('device', 'Device', DEVICES, query.get('device')),
      field('country', 'Country code', query.get('country'), {
        placeholder: 'DE',
        maxlength: 2,
        pattern: '[A-Za-z]{2}',
      }),
    ],
  });
  const hint = h(
    'p',
    { class: 'hint', id: 'sessions-hint' },
    'Days are the site’s days (its time zone) a session started on, the last 30 when none are chosen. Order value is what its paid orders ' +
      'brought in the reporting currency, refunds taken off. A page ending in * matches every page it starts.',
  );
  const heading = [
    h('h1', {}, 'Sessions'),
    form,
    hint,
    chosen ? segmentPanel(app, site, path, chosen) : null,
    app.isAdmin(site) ? h('div', { class: 'panel' }, saveSegment(app, site, path, query)) : null,
  ];
  let page;
  try {
    page = await app.session.json(siteApi(site, `/sessions?${params}`));
  } catch (failure) {
    return h('div', {}, ...heading, alertBox(describeError(failure)));
  }
  const list = page.items.length
    ? table({
        id: 'sessions',
        caption: 'Sessions, newest first',
        head: ['Started', 'Visitor', 'Length', 'Pages', 'Source', 'Outcome', 'Trouble', 'Replay'],
        rows: page.items.map(sessionRow),
        wrap: { class: 'table-wrap sessions-wrap' },
      })
    : empty(
        filters.size ? 'No session matches' : 'No sessions yet',
        filters.size ? 'Try a wider date range or fewer filters.' : 'Sessions appear as visitors browse the shop.',
      );
  return h('div', {}, ...heading, h('div', { class: 'panel' }, list, pager(path, filters, cursor, page.nextCursor)));
}
