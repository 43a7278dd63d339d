// The funnels page: the shop funnel and the site's own funnels over a date range (kept in the
// URL with the source and a saved segment), each step with its sessions, conversion, drop-off and median time from
// the step before; each drop-off opens the recordings of the sessions that stopped there; the
// conversion per day or week against the previous period; the same counts by device, country
// and source; and a form to define or edit a funnel (owners, admins; `?edit=1` edits).
import { describeError, siteApi } from './api.js';
import { actionButton } from './controls.js';
import { alertBox, dayRangeText, dayText, empty, h, percent, seconds, svg, table, when } from './dom.js';
import { DEFAULT_OFFSET, field, filterForm, picked, siteDay } from './filters.js';
import { segmentChoice } from './sessions.js';

const EVENTS = {
  product_view: 'Product view',
  add_to_cart: 'Add to cart',
  checkout_started: 'Checkout started',
  order_paid: 'Paid order',
};
const BREAKDOWNS = [
  ['device', 'Device'],
  ['country', 'Country'],
  ['source', 'Source'],
];
const MIN_STEPS = 2;
const MAX_STEPS = 8;

export async function funnelsPage(app, site, item, query) {
  if (item === 'new') return funnelForm(app, site);
  const funnels = await app.session.json(siteApi(site, '/funnels'));
  const chosen = funnels.find((funnel) => funnel.id === item) || funnels[0];
  const path = `/app/sites/${site.id}/funnels/${chosen.id}`;
  const range = picked(query, ['from', 'to', 'source', 'segment']);
  if (query.get('edit') && !chosen.builtIn && app.isAdmin(site)) {
    // The shop funnel has every event as a step, each under the name the API gives a step of
    // that event without a name of its own.
    const named = Object.fromEntries(
      funnels.find((funnel) => funnel.builtIn).steps.map((step) => [step.event, step.label]),
    );
    return funnelForm(app, site, { ...chosen, named }, `${path}?${range}`);
  }
  if (!range.get('from')) range.set('from', siteDay(site, DEFAULT_OFFSET));
  if (!range.get('to')) range.set('to', siteDay(site));
  const report = await app.session.json(siteApi(site, `/funnels/${chosen.id}/report?${range}`));
  const list = h(
    'nav',
    { class: 'panel row', 'aria-label': 'Funnels' },
    funnels.map((funnel) =>
      h(
        'a',
        {
          class: 'button secondary',
          href: `/app/sites/${site.id}/funnels/${funnel.id}?${range}`,
          'aria-current': funnel.id === chosen.id ? 'page' : null,
        },
        funnel.name,
      ),
    ),
    app.isAdmin(site)
      ? h('a', { class: 'button', id: 'new-funnel', href: `/app/sites/${site.id}/funnels/new` }, 'New funnel')
      : null,
  );
  const form = filterForm(app, {
    id: 'funnel-range',
    label: 'Funnel period',
    path,
    controls: [
      field('from', 'From', range.get('from'), { type: 'date' }),
      field('to', 'To', range.get('to'), { type: 'date' }),
      field('source', 'Source', query.get('source'), {
        placeholder: 'google.com, newsletter or (direct)',
        maxlength: 100,
      }),
      await segmentChoice(app, site, query.get('segment')),
    ],
  });
  return h(
    'div',
    {},
    h('h1', {}, `Funnel: ${chosen.name}`),
    list,
    form,
    h(
      'section',
      { class: 'panel', 'aria-labelledby': 'funnel-steps-title' },
      h(
        'h2',
        { id: 'funnel-steps-title' },
        `Sessions ${dayRangeText(report.from, report.to)}${report.source ? ` from ${report.source}` : ''}`,
      ),
      purgeNote(report),
      steps(site, chosen, report, range),
    ),
    overTime(report),
    h(
      'div',
      { class: 'grid' },
      BREAKDOWNS.map(([name, label]) =>
        h(
          'section',
          { class: 'panel' },
          h('h2', {}, `By ${label.toLowerCase()}`),
          breakdown(name, label, chosen, report.breakdown[name]),
        ),
      ),
    ),
    h(
      'p',
      { class: 'hint' },
      'A session reaches a step at its first match after the step before; steps are never skipped. ' +
        "Its pages and the shop's events of the same session count. Restricted visitors are left out.",
    ),
    chosen.builtIn || !app.isAdmin(site)
      ? null
      : h(
          'div',
          { class: 'panel row toolbar' },
          h('a', { class: 'button', id: 'edit-funnel', href: `${path}?${range}&edit=1` }, 'Edit this funnel'),
          actionButton(
            'Delete this funnel',
            async () => {
              await app.session.json(siteApi(site, `/funnels/${chosen.id}`), { method: 'DELETE' });
              app.go(`/app/sites/${site.id}/funnels`);
            },
            { kind: 'secondary', busy: 'Deleting…', id: 'delete-funnel' },
          ),
        ),
  );
}

/** Why a range has fewer sessions than the Overview's daily figures: the retention purge removed them. */
function purgeNote(report) {
  if (!report.purgedBefore) return null;
  return h(
    'p',
    { class: 'hint', id: 'funnel-purged' },
    `Sessions that started before ${when(report.purgedBefore)} were removed by the retention setting ` +
      '(pageviews and interactions); the daily figures keep their counts.',
  );
}

function steps(site, funnel, report, range) {
  if (!report.sessions) {
    return empty('No sessions in this period', report.purgedBefore ? null : 'Try a wider date range.');
  }
  const widest = Math.max(1, report.steps[0].sessions);
  return table({
    id: 'funnel-steps',
    caption: `${report.sessions} sessions started in the period; conversion is of those at step 1.`,
    head: [
      ['Step', { scope: 'col' }],
      ['Sessions', { scope: 'col', class: 'num' }],
      ['Conversion', { scope: 'col', class: 'num' }],
      ['From the step before', { scope: 'col', class: 'num optional' }],
      ['Median time from the step before', { scope: 'col', class: 'num optional' }],
      ['Stopped here', { scope: 'col' }],
    ],
    rows: report.steps.map((step) => {
      const stopped = new URLSearchParams(range);
      stopped.set('funnel', funnel.id);
      stopped.set('stoppedAt', String(step.index));
      const last = step.index === report.steps.length;
      const said = last ? `${step.sessions} completed` : `${step.dropOff} stopped`;
      return h(
        'tr',
        { dataset: { step: String(step.index) } },
        h(
          'th',
          { scope: 'row' },
          `${step.index}. ${step.label}`,
          h(
            'span',
            { class: 'share-bar', 'aria-hidden': 'true' },
            h('span', { style: `width: ${Math.round((step.sessions / widest) * 100)}%` }),
          ),
        ),
        h('td', { class: 'num' }, String(step.sessions)),
        h('td', { class: 'num' }, percent(step.conversion)),
        h('td', { class: 'num optional' }, percent(step.fromPrevious)),
        h(
          'td',
          { class: 'num optional' },
          step.medianSecondsFromPrevious === null ? '—' : seconds(step.medianSecondsFromPrevious),
        ),
        h(
          'td',
          {},
          (last ? step.sessions : step.dropOff)
            ? h(
                'a',
                {
                  href: `/app/sites/${site.id}/recordings?${stopped}`,
                  'aria-label': `${said} at step ${step.index}, ${step.label}: their recordings`,
                },
                said,
              )
            : '—',
        ),
      );
    }),
    wrap: { tabindex: '0', role: 'region', 'aria-label': 'Funnel steps' },
  });
}

/** A change of conversion in points, against the previous period's conversion. */
function pointsChange(report) {
  const { previous } = report;
  const period = dayRangeText(previous.from, previous.to);
  if (report.conversionChange === null) {
    return h(
      'span',
      { class: 'change' },
      previous.entered
        ? `no sessions at step 1 now; ${percent(previous.conversion)} in ${period}`
        : `none at step 1 in ${period}`,
    );
  }
  const points = Math.round(report.conversionChange * 1000) / 10;
  const tone = points === 0 ? '' : points > 0 ? 'better' : 'worse';
  const sign = points === 0 ? '±0' : points > 0 ? `▲ +${points}` : `▼ ${points}`;
  return h(
    'span',
    { class: `change ${tone}`, id: 'funnel-change' },
    `${sign} points vs ${percent(previous.conversion)} in ${period}`,
  );
}

/** Conversion per day or week as bars (0 to 100 %), a day without sessions at step 1 drawn as a dot. */
function conversionChart(over) {
  const width = 640;
  const height = 140;
  const pad = { left: 34, right: 8, top: 10, bottom: 24 };
  const { periods } = over;
  const slot = (width - pad.left - pad.right) / Math.max(1, periods.length);
  const y = (ratio) => pad.top + (height - pad.top - pad.bottom) * (1 - ratio);
  const parts = [
    svg('line', { x1: pad.left, x2: width - pad.right, y1: y(0), y2: y(0), stroke: '#dfe3ea' }),
    svg('text', { x: 2, y: pad.top + 8 }, '100%'),
    svg('text', { x: 2, y: y(0) }, '0%'),
  ];
  periods.forEach((point, index) => {
    const x = pad.left + index * slot;
    const label = `${periodName(over.unit, point)}: ${point.completed} of ${point.entered} completed (${percent(point.conversion)})`;
    const ratio = point.conversion || 0;
    parts.push(
      point.conversion === null
        ? svg('circle', { class: 'bar-none', cx: x + slot / 2, cy: y(0) - 2, r: 2 }, svg('title', {}, label))
        : svg(
            'rect',
            { class: 'bar-pv', x, y: y(ratio), width: Math.max(1, slot - 2), height: y(0) - y(ratio) },
            svg('title', {}, label),
          ),
    );
    if (index % Math.ceil(periods.length / 7) === 0) {
      parts.push(svg('text', { x, y: height - 6 }, point.from.slice(5)));
    }
  });
  const summary = `Conversion from step 1 to the last step, by ${over.unit} the sessions started.`;
  return h(
    'figure',
    { class: 'chart' },
    svg('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': summary }, ...parts),
    h('figcaption', { class: 'hint' }, summary),
  );
}

function periodName(unit, point) {
  return unit === 'day' || point.from === point.to
    ? dayText(point.from)
    : `${dayText(point.from)} – ${dayText(point.to)}`;
}

/** The range's conversion against the previous period's, then per day or week. */
function overTime(report) {
  const over = report.overTime;
  const unit = over.unit === 'day' ? 'Day' : 'Week';
  return h(
    'section',
    { class: 'panel', 'aria-labelledby': 'funnel-over-time-title', id: 'funnel-over-time' },
    h('h2', { id: 'funnel-over-time-title' }, `Conversion by ${over.unit}`),
    h(
      'ul',
      { class: 'figures', 'aria-label': 'Conversion in the period' },
      h(
        'li',
        { class: 'figure', id: 'funnel-conversion' },
        h('span', { class: 'figure-label' }, 'Conversion'),
        h('strong', { class: 'figure-value' }, percent(report.conversion)),
        pointsChange(report),
      ),
      h(
        'li',
        { class: 'figure' },
        h('span', { class: 'figure-label' }, 'Reached step 1'),
        h('strong', { class: 'figure-value' }, String(report.entered)),
      ),
      h(
        'li',
        { class: 'figure' },
        h('span', { class: 'figure-label' }, 'Reached the last step'),
        h('strong', { class: 'figure-value' }, String(report.completed)),
      ),
    ),
    report.entered || report.previous.entered ? conversionChart(over) : null,
    h(
      'details',
      { class: 'funnel-periods' },
      h('summary', {}, `Each ${over.unit} as a table`),
      table({
        id: 'funnel-by-period',
        caption: 'Sessions counted on the day (UTC) they started; weeks run Monday to Sunday.',
        head: [
          [unit, { scope: 'col' }],
          ['Reached step 1', { scope: 'col', class: 'num' }],
          ['Completed', { scope: 'col', class: 'num' }],
          ['Conversion', { scope: 'col', class: 'num' }],
        ],
        rows: over.periods.map((point) =>
          h(
            'tr',
            {},
            h('th', { scope: 'row' }, periodName(over.unit, point)),
            h('td', { class: 'num' }, String(point.entered)),
            h('td', { class: 'num' }, String(point.completed)),
            h('td', { class: 'num' }, percent(point.conversion)),
          ),
        ),
      }),
    ),
  );
}

/**
 * One breakdown: each value's sessions at every step in one cell ("5 → 3 → 1"), which wraps,
 * and its conversion; a column per step made the table two and a half times its panel's width.
 */
function breakdown(name, label, funnel, rows) {
  if (!rows.length) return empty('Nothing in this period');
  const count = funnel.steps.length;
  return h(
    'table',
    { id: `funnel-by-${name}`, class: 'funnel-breakdown' },
    h(
      'caption',
      { class: 'hint' },
      `Sessions at steps 1 to ${count} (${funnel.steps.map((step) => step.label).join(', ')}).`,
    ),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', { scope: 'col' }, label),
        h('th', { scope: 'col' }, `Steps 1 → ${count}`),
        h('th', { scope: 'col', class: 'num' }, 'Conversion'),
      ),
    ),
    h(
      'tbody',
      {},
      rows.map((row) =>
        h(
          'tr',
          {},
          h('th', { scope: 'row' }, row.name),
          h('td', { class: 'step-counts' }, row.sessions.join(' → ')),
          h('td', { class: 'num' }, percent(row.conversion)),
        ),
      ),
    ),
  );
}

/**
 * One step's controls: page pattern or event, with an optional label, filled from `step` when
 * editing (`named`: each event's name when a step has none of its own); `index` keeps ids
 * unique. `actions` moves and removes it.
 */
function stepRow(index, actions, step = null, named = {}) {
  const kind = h(
    'select',
    { id: `step-${index}-kind`, name: 'kind' },
    h('option', { value: 'page' }, 'Page'),
    h('option', { value: 'event' }, 'Event'),
  );
  const pattern = h('input', {
    id: `step-${index}-pattern`,
    name: 'pattern',
    placeholder: '/product/*',
    maxlength: 500,
  });
  const event = h(
    'select',
    { id: `step-${index}-event`, name: 'event' },
    Object.entries(EVENTS).map(([value, text]) => h('option', { value }, text)),
  );
  const label = h('input', { id: `step-${index}-label`, name: 'label', maxlength: 80 });
  const patternField = h('div', { class: 'field' }, h('label', { for: pattern.id }, 'Page pattern'), pattern);
  const eventField = h('div', { class: 'field' }, h('label', { for: event.id }, 'Event'), event);
  const shown = () => {
    patternField.hidden = kind.value !== 'page';
    eventField.hidden = kind.value !== 'event';
  };
  if (step) {
    kind.value = step.kind;
    if (step.kind === 'page') pattern.value = step.pattern;
    else event.value = step.event;
    // A step without a name of its own is shown under its pattern or its event's name.
    label.value = step.label === (step.kind === 'page' ? step.pattern : named[step.event]) ? '' : step.label;
  }
  shown();
  kind.addEventListener('change', shown);
  const legend = h('legend', {});
  const button = (text, onclick) =>
    h('button', { type: 'button', class: 'secondary', onclick: () => onclick(row) }, text);
  const up = button('Up', actions.up);
  const down = button('Down', actions.down);
  const removeButton = button('Remove', actions.remove);
  const row = h(
    'fieldset',
    { class: 'checks funnel-step' },
    legend,
    h('div', { class: 'field' }, h('label', { for: kind.id }, 'Kind'), kind),
    patternField,
    eventField,
    h('div', { class: 'field' }, h('label', { for: label.id }, 'Name (optional)'), label),
    h('div', { class: 'row step-actions' }, up, down, removeButton),
  );
  row.buttons = { up, down, remove: removeButton };
  /** Its place in the list of `count`, said in the legend and on its buttons. */
  row.place = (position, count) => {
    legend.textContent = `Step ${position + 1}`;
    up.setAttribute('aria-label', `Move step ${position + 1} up`);
    down.setAttribute('aria-label', `Move step ${position + 1} down`);
    removeButton.setAttribute('aria-label', `Remove step ${position + 1}`);
    up.disabled = position === 0;
    down.disabled = position === count - 1;
    removeButton.disabled = count <= MIN_STEPS;
  };
  row.value = () => {
    const value = { kind: kind.value, label: label.value.trim() || null };
    if (kind.value === 'page') value.pattern = pattern.value.trim();
    else value.event = event.value;
    return value;
  };
  return row;
}

/**
 * The form that defines a funnel, or edits `funnel` (with `named`, its events' default names)
 * and goes back to `back` once saved.
 */
function funnelForm(app, site, funnel = null, back = null) {
  const error = h('div');
  const said = h('p', { class: 'hint', role: 'status', id: 'funnel-step-status' });
  const name = h('input', { id: 'funnel-name', name: 'name', required: true, maxlength: 120 });
  if (funnel) name.value = funnel.name;
  const list = h('div', { id: 'funnel-step-list' });
  const rows = [];
  let made = 0;
  const addButton = h('button', { type: 'button', class: 'secondary', id: 'add-step' }, 'Add a step');
  const redraw = () => {
    rows.forEach((row, position) => row.place(position, rows.length));
    list.replaceChildren(...rows);
    addButton.disabled = rows.length >= MAX_STEPS;
  };
  /** Move a step by `by` places; the focus stays on the button pressed, or its twin at an end. */
  const move = (by) => (row) => {
    const from = rows.indexOf(row);
    const to = from + by;
    if (to < 0 || to >= rows.length) return;
    rows.splice(from, 1);
    rows.splice(to, 0, row);
    redraw();
    const pressed = by < 0 ? row.buttons.up : row.buttons.down;
    (pressed.disabled ? (by < 0 ? row.buttons.down : row.buttons.up) : pressed).focus();
    said.textContent = `Step ${from + 1} is now step ${to + 1}.`;
  };
  const actions = {
    up: move(-1),
    down: move(1),
    remove: (row) => {
      if (rows.length <= MIN_STEPS) return;
      const at = rows.indexOf(row);
      rows.splice(at, 1);
      redraw();
      addButton.focus();
      said.textContent = `Step ${at + 1} removed; ${rows.length} steps.`;
    },
  };
  const add = (step = null) => {
    if (rows.length >= MAX_STEPS) return;
    rows.push(stepRow(made++, actions, step, funnel?.named));
    redraw();
  };
  addButton.addEventListener('click', () => {
    add();
    rows[rows.length - 1].querySelector('select').focus();
    said.textContent = `Step ${rows.length} added.`;
  });
  if (funnel) funnel.steps.forEach((step) => add(step));
  else {
    add();
    add();
  }
  const form = h(
    'form',
    {
      class: 'panel',
      id: 'funnel-form',
      onsubmit: async (event) => {
        event.preventDefault();
        error.replaceChildren();
        const body = { name: name.value.trim(), steps: rows.map((row) => row.value()) };
        try {
          if (funnel) {
            await app.session.json(siteApi(site, `/funnels/${funnel.id}`), { method: 'PATCH', json: body });
            app.go(back);
          } else {
            const created = await app.session.json(siteApi(site, '/funnels'), { method: 'POST', json: body });
            app.go(`/app/sites/${site.id}/funnels/${created.id}`);
          }
        } catch (failure) {
          error.replaceChildren(alertBox(describeError(failure)));
        }
      },
    },
    h('div', { class: 'field' }, h('label', { for: 'funnel-name' }, 'Name'), name),
    h(
      'p',
      { class: 'hint', id: 'funnel-steps-hint' },
      '2 to 8 steps, in order. A page pattern uses the excluded-URL syntax: ' +
        '* matches anything, a pattern starting with / is matched against the path.',
    ),
    list,
    said,
    h(
      'div',
      { class: 'row' },
      addButton,
      h('button', { type: 'submit' }, funnel ? 'Save changes' : 'Create funnel'),
      funnel ? h('a', { class: 'button secondary', href: back }, 'Cancel') : null,
    ),
    error,
  );
  return h('div', {}, h('h1', {}, funnel ? `Edit funnel: ${funnel.name}` : 'New funnel'), form);
}
