// The overview's money figures (issue 31): paid orders, conversion rate, revenue, average order
// value and revenue per visitor against the previous period, orders in other currencies apart,
// and revenue per day. Amounts arrive as exact decimal text and are shown as they are, with
// their currency: nothing is added up or converted here.
import { h, svg } from './dom.js';

const FIGURES = [
  ['orders', 'Orders'],
  ['conversionRate', 'Conversion rate'],
  ['revenue', 'Revenue'],
  ['averageOrderValue', 'Average order value'],
  ['revenuePerVisitor', 'Revenue per visitor'],
];
const MONEY = new Set(['revenue', 'averageOrderValue', 'revenuePerVisitor']);

function shown(value, name, currency) {
  if (value === null || value === undefined) return '–';
  if (name === 'conversionRate') return `${(value * 100).toFixed(1)}%`;
  if (MONEY.has(name)) return `${value} ${currency}`;
  return value.toLocaleString();
}

function change(figure, name, currency, days) {
  const period = days === 1 ? 'the day before' : `the ${days} days before`;
  if (figure.change === null) {
    return h('span', { class: 'change' }, `none in ${period}`);
  }
  const percent = Math.round(figure.change * 100);
  const tone = percent === 0 ? '' : percent > 0 ? 'better' : 'worse';
  return h(
    'span',
    { class: `change ${tone}` },
    `${percent === 0 ? '±' : percent > 0 ? '▲ +' : '▼ '}${percent}% vs ${period} ` +
      `(${shown(figure.previous, name, currency)})`,
  );
}

function revenueChart(days, currency) {
  const width = 640;
  const height = 120;
  const pad = { left: 8, right: 8, top: 10, bottom: 24 };
  // Bar heights only: the amounts themselves are shown as text, exactly.
  const heights = days.map((day) => Number(day.revenue || 0));
  const peak = Math.max(1e-9, ...heights);
  const slot = (width - pad.left - pad.right) / Math.max(1, days.length);
  const parts = [
    svg('line', {
      x1: pad.left,
      x2: width - pad.right,
      y1: height - pad.bottom,
      y2: height - pad.bottom,
      stroke: '#dfe3ea',
    }),
  ];
  days.forEach((day, index) => {
    const tall = (height - pad.top - pad.bottom) * (heights[index] / peak);
    const x = pad.left + index * slot;
    const label = `${day.day}: ${day.orders} paid orders, ${day.revenue ?? '–'} ${currency || ''}`;
    parts.push(
      svg(
        'rect',
        { class: 'bar-pv', x, y: height - pad.bottom - tall, width: Math.max(1, slot - 2), height: tall },
        svg('title', {}, label),
      ),
    );
    if (index % Math.ceil(days.length / 7) === 0) {
      parts.push(svg('text', { x, y: height - 6 }, day.day.slice(5)));
    }
  });
  const summary = `Revenue per day in ${currency}, by day of payment.`;
  return h(
    'figure',
    { class: 'money-chart' },
    svg('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': summary }, ...parts),
    h('figcaption', { class: 'hint' }, summary),
  );
}

/** The "Sales" panel of the overview, from the overview's `commerce` block. */
export function moneyPanel(money, days) {
  if (!money) return null;
  const { currency } = money;
  const names = FIGURES.filter(([name]) => money.figures[name]);
  const cards = h(
    'ul',
    { class: 'figures', id: 'money-figures', 'aria-label': 'Sales figures' },
    names.map(([name, label]) => {
      const figure = money.figures[name];
      return h(
        'li',
        { class: 'figure', dataset: { figure: name } },
        h('span', { class: 'figure-label' }, label),
        h('strong', { class: 'figure-value' }, shown(figure.value, name, currency)),
        change(figure, name, currency, days),
      );
    }),
  );
  const source = money.currencySource === 'setting' ? 'the site setting' : 'the currency of the first paid order';
  const notes = [
    h(
      'p',
      { class: 'hint' },
      currency
        ? `Paid orders, less refunds, on the day of payment; revenue in ${currency} (${source}). Conversion ` +
            `rate: paid orders per visitor.`
        : "No paid order yet. Orders come from the shop's server once the plugin or the commerce ingest reports them.",
    ),
  ];
  if (money.otherCurrencies.length) {
    notes.push(
      h(
        'p',
        { class: 'hint', id: 'other-currencies' },
        'Also paid in other currencies, not included above: ',
        money.otherCurrencies
          .map((row) => `${row.orders} ${row.orders === 1 ? 'order' : 'orders'}, ${row.revenue} ${row.currency}`)
          .join('; '),
        '.',
      ),
    );
  }
  const nothing = !currency && !money.figures.orders.value && !money.figures.orders.previous;
  return h(
    'section',
    { class: 'panel', 'aria-labelledby': 'money-title' },
    h('h2', { id: 'money-title' }, 'Sales'),
    nothing ? null : cards,
    ...notes,
    currency ? revenueChart(money.days, currency) : null,
  );
}
