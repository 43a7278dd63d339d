// The funnels page: the shop funnel and the site's own funnels over a date range (kept in the
// URL with the source), each step with its sessions, conversion, drop-off and median time from
// the step before; each drop-off opens the recordings of the sessions that stopped there; the
// same counts by device, country and source; and a form to define a funnel (owners, admins).
import { describeError, siteApi } from './api.js';
import { actionButton } from './controls.js';
import { alertBox, empty, h, seconds, table } from './dom.js';
import { field, filterForm, isoDay, picked } from './filters.js';

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
const MAX_STEPS = 8;

const percent = (ratio) => (ratio === null || ratio === undefined ? '—' : `${Math.round(ratio * 1000) / 10}%`);

export async function funnelsPage(app, site, item, query) {
  if (item === 'new') return funnelForm(app, site);
  const funnels = await app.session.json(siteApi(site, '/funnels'));
  const chosen = funnels.find((funnel) => funnel.id === item) || funnels[0];
  const path = `/app/sites/${site.id}/funnels/${chosen.id}`;
  const range = picked(query, ['from', 'to', 'source']);
  if (!range.get('from')) range.set('from', isoDay(-29));
  if (!range.get('to')) range.set('to', isoDay(0));
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
        `Sessions from ${report.from} to ${report.to}${report.source ? ` from ${report.source}` : ''}`,
      ),
      steps(site, chosen, report, range),
    ),
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

function steps(site, funnel, report, range) {
  if (!report.sessions) return empty('No sessions in this period', 'Try a wider date range.');
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

function breakdown(name, label, funnel, rows) {
  if (!rows.length) return empty('Nothing in this period');
  // The wrap scrolls on a narrow screen, so it takes the keyboard's focus to be scrolled.
  return h(
    'div',
    { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': `Funnel by ${label.toLowerCase()}` },
    h(
      'table',
      { id: `funnel-by-${name}` },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, label),
          funnel.steps.map((step, index) =>
            h('th', { scope: 'col', class: `num${index ? ' optional' : ''}` }, `${index + 1}. ${step.label}`),
          ),
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
            row.sessions.map((count, index) => h('td', { class: `num${index ? ' optional' : ''}` }, String(count))),
            h('td', { class: 'num' }, percent(row.conversion)),
          ),
        ),
      ),
    ),
  );
}

/** One step's controls: page pattern or event, with an optional label; `index` keeps ids unique. */
function stepRow(index, remove) {
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
  const eventField = h('div', { class: 'field', hidden: true }, h('label', { for: event.id }, 'Event'), event);
  kind.addEventListener('change', () => {
    patternField.hidden = kind.value !== 'page';
    eventField.hidden = kind.value !== 'event';
  });
  const legend = h('legend', {});
  const removeButton = h('button', { type: 'button', class: 'secondary', onclick: () => remove(row) }, 'Remove');
  const row = h(
    'fieldset',
    { class: 'checks funnel-step' },
    legend,
    h('div', { class: 'field' }, h('label', { for: kind.id }, 'Kind'), kind),
    patternField,
    eventField,
    h('div', { class: 'field' }, h('label', { for: label.id }, 'Name (optional)'), label),
    removeButton,
  );
  /** Its place in the list, said in the legend and on the remove button. */
  row.place = (position) => {
    legend.textContent = `Step ${position + 1}`;
    removeButton.setAttribute('aria-label', `Remove step ${position + 1}`);
  };
  row.value = () => {
    const step = { kind: kind.value, label: label.value.trim() || null };
    if (kind.value === 'page') step.pattern = pattern.value.trim();
    else step.event = event.value;
    return step;
  };
  return row;
}

function funnelForm(app, site) {
  const error = h('div');
  const name = h('input', { id: 'funnel-name', name: 'name', required: true, maxlength: 120 });
  const list = h('div', { id: 'funnel-step-list' });
  const rows = [];
  let made = 0;
  const redraw = () => {
    rows.forEach((row, position) => row.place(position));
    list.replaceChildren(...rows);
  };
  const remove = (row) => {
    rows.splice(rows.indexOf(row), 1);
    redraw();
  };
  const add = () => {
    if (rows.length >= MAX_STEPS) return;
    rows.push(stepRow(made++, remove));
    redraw();
  };
  add();
  add();
  const form = h(
    'form',
    {
      class: 'panel',
      id: 'funnel-form',
      onsubmit: async (event) => {
        event.preventDefault();
        error.replaceChildren();
        try {
          const created = await app.session.json(siteApi(site, '/funnels'), {
            method: 'POST',
            json: { name: name.value.trim(), steps: rows.map((row) => row.value()) },
          });
          app.go(`/app/sites/${site.id}/funnels/${created.id}`);
        } catch (failure) {
          error.replaceChildren(alertBox(describeError(failure)));
        }
      },
    },
    h('div', { class: 'field' }, h('label', { for: 'funnel-name' }, 'Name'), name),
    h(
      'p',
      { class: 'hint', id: 'funnel-steps-hint' },
      '2 to 8 steps. A page pattern uses the excluded-URL syntax: ' +
        '* matches anything, a pattern starting with / is matched against the path.',
    ),
    list,
    h(
      'div',
      { class: 'row' },
      h('button', { type: 'button', class: 'secondary', id: 'add-step', onclick: add }, 'Add a step'),
      h('button', { type: 'submit' }, 'Create funnel'),
    ),
    error,
  );
  return h('div', {}, h('h1', {}, 'New funnel'), form);
}
