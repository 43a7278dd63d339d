// The overview's money figures (issue 31): paid orders, conversion rate, revenue, average order
// value and revenue per visitor against the previous period, all in the reporting currency;
// each other currency apart with its own orders and revenue; and revenue per day. Amounts
// arrive as exact decimal text and are written by `amount`, the dashboard's one way to show
// money (the overview, the orders, an error's revenue at risk): nothing is added up or
// converted here.
import { h, percent, percentChange, svg } from './dom.js';

const FIGURES = [
  ['orders', 'Orders'],
  ['conversionRate', 'Conversion rate'],
  ['revenue', 'Revenue'],
  ['averageOrderValue', 'Average order value'],
  ['revenuePerVisitor', 'Revenue per visitor'],
];
const MONEY = new Set(['revenue', 'averageOrderValue', 'revenuePerVisitor']);

/**
 * An amount (the API's exact decimal text, "45.00") in its currency, written as the browser's
 * language writes money ("€45.00" in English, "45,00 €" in French) by Intl's currency rules,
 * with the text's places: the currency's exponent as the service keeps it. "—" for none.
 */
export function amount(text, currency) {
  if (text === null || text === undefined) return '—';
  if (!currency) return String(text);
  const places = (String(text).split('.')[1] || '').length;
  try {
    return new Intl.NumberFormat(navigator.language, {
      style: 'currency',
      currency,
      minimumFractionDigits: places,
      maximumFractionDigits: places,
    }).format(text);
  } catch {
    return `${text} ${currency}`; // a code this browser does not know
  }
}

function shown(value, name, currency) {
  if (value === null || value === undefined) return '–';
  if (name === 'conversionRate') return percent(value);
  if (MONEY.has(name)) return amount(value, currency);
  return value.toLocaleString();
}

function change(figure, name, currency, days) {
  const period = days === 1 ? 'the day before' : `the ${days} days before`;
  if (figure.change === null) {
    return h('span', { class: 'change' }, `none in ${period}`);
  }
  const { size, sign } = percentChange(figure.change);
  const tone = sign === 0 ? '' : sign > 0 ? 'better' : 'worse';
  return h(
    'span',
    { class: `change ${tone}` },
    `${sign === 0 ? '±' : sign > 0 ? '▲ +' : '▼ −'}${size} vs ${period} ` +
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
    const label = `${day.day}: ${day.orders} paid orders, ${amount(day.revenue, currency)}`;
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
        ? `Paid orders in ${currency} (${source}), less refunds, on the day of payment: every figure here is ` +
            `of those orders. Conversion rate: those orders per visitor.`
        : "No paid order yet. Orders come from the shop's server once the plugin or the commerce ingest reports them.",
    ),
  ];
  if (money.otherCurrencies.length) {
    notes.push(
      h(
        'p',
        { class: 'hint', id: 'other-currencies' },
        'Paid in other currencies, counted apart: ',
        money.otherCurrencies
          .map(
            (row) =>
              `${row.orders} ${row.orders === 1 ? 'order' : 'orders'} in ${row.currency}, ` +
              amount(row.revenue, row.currency),
          )
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
