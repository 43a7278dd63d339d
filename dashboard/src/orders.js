// The orders page (issue 41): the site's orders filtered in the URL (status, currency, net value,
// source, days) and sorted by placing, payment or value, each linked to its visitor, the
// session's journey and its replay; more by cursor, and the CSV for owners and admins. Amounts
// arrive as exact decimal text and are shown with their currency, as the Overview shows them.
import { describeError, siteApi } from './api.js';
import { download } from './controls.js';
import { alertBox, empty, h, table, when } from './dom.js';
import { amount } from './money.js';
import { choice, field, filterForm, listQuery } from './filters.js';

/** The list's filters, each a query parameter of the page and of the API. */
const ORDER_FILTERS = ['status', 'currency', 'minNet', 'maxNet', 'source', 'from', 'to', 'sort'];
const STATUSES = {
  '': 'Any',
  placed: 'Placed',
  paid: 'Paid',
  refunded: 'Refunded',
  cancelled: 'Cancelled',
  failed: 'Failed',
};
const SORTS = { placed: 'Newest placed', paid: 'Newest paid', value: 'Highest value' };
const AMOUNT = { inputmode: 'decimal', pattern: '[0-9]{1,13}([.][0-9]{1,3})?', maxlength: 17, placeholder: '0.00' };

/** The order's status as a badge. */
export function statusBadge(status) {
  return h('span', { class: `badge order-${status || 'unknown'}` }, STATUSES[status] || status || 'unknown');
}

/** The session's journey in one line: entry → exit and how many pages. */
function journeyText(journey) {
  if (!journey) return 'No visit known';
  const pages = `${journey.pageviews} ${journey.pageviews === 1 ? 'page' : 'pages'}`;
  return journey.entry === journey.exit
    ? `${journey.entry} · ${pages}`
    : `${journey.entry} → ${journey.exit} · ${pages}`;
}

/** The links of an order: its visitor, the session's journey and its replay, where there are. */
export function orderLinks(order) {
  const label = `order ${order.orderId}`;
  const links = [
    order.links.visitor
      ? h(
          'a',
          {
            href: order.links.visitor,
            title: order.visitorId,
            'aria-label': `${order.visitorLabel || 'Visitor'}, visitor of ${label}`,
          },
          order.visitorLabel || 'Visitor',
        )
      : null,
    order.links.journey ? h('a', { href: order.links.journey, 'aria-label': `Journey of ${label}` }, 'Journey') : null,
    order.links.replay ? h('a', { href: order.links.replay, 'aria-label': `Replay of ${label}` }, 'Replay') : null,
  ].filter(Boolean);
  return links.length ? h('span', { class: 'order-links' }, links) : h('span', { class: 'hint' }, '—');
}

/** A cell with its label, which a phone shows before the value (the table's head is hidden). */
function cell(label, content, attrs = {}) {
  return h('td', { ...attrs, dataset: { label } }, h('span', {}, content));
}

function orderCell(order) {
  return cell('Order', [h('strong', {}, order.orderId), ' ', statusBadge(order.status)]);
}

function orderRow(order) {
  const refunded = order.refunded > 0 && order.totalText !== order.valueText;
  return h(
    'tr',
    { dataset: { orderId: order.orderId } },
    orderCell(order),
    cell('Placed', when(order.placedAt)),
    cell('Paid', when(order.paidAt)),
    cell(
      'Net value',
      [
        amount(order.valueText, order.currency),
        refunded ? h('span', { class: 'hint' }, ` of ${amount(order.totalText, order.currency)}`) : null,
      ],
      { class: 'num' },
    ),
    cell('Source', order.source),
    cell('Journey', journeyText(order.journey)),
    cell('Links', orderLinks(order)),
  );
}

export async function ordersPage(app, site, item, query) {
  const path = `/app/sites/${site.id}/orders`;
  const { params } = listQuery(query, ORDER_FILTERS);
  const form = filterForm(app, {
    id: 'order-filters',
    label: 'Filter orders',
    path,
    defaults: { sort: 'placed' },
    controls: [
      choice('status', 'Status', STATUSES, query.get('status')),
      field('currency', 'Currency', query.get('currency'), {
        placeholder: 'EUR',
        maxlength: 3,
        pattern: '[A-Za-z]{3}',
        autocapitalize: 'characters',
      }),
      field('minNet', 'Net value from', query.get('minNet'), AMOUNT),
      field('maxNet', 'Net value to', query.get('maxNet'), AMOUNT),
      field('source', 'Source', query.get('source'), {
        placeholder: 'google.com, newsletter, (direct)',
        maxlength: 100,
      }),
      field('from', 'From', query.get('from'), { type: 'date' }),
      field('to', 'To', query.get('to'), { type: 'date' }),
      choice('sort', 'Sort', SORTS, query.get('sort') || 'placed'),
    ],
  });
  const hint = h(
    'p',
    { class: 'hint', id: 'orders-hint' },
    'Days are the site’s days (its time zone) of placing (of payment when sorted by payment), the last 30 when none are chosen. ' +
      'Net value is the total less refunds, in the currency chosen: a value filter or sort needs one. ' +
      'An order without a browser session takes its source from the visit it followed; “(unknown)” when none.',
  );
  const exportTools = app.isAdmin(site)
    ? h(
        'div',
        { class: 'panel row toolbar' },
        h(
          'span',
          { class: 'row export' },
          download(app, siteApi(site, '/orders.csv'), 'orders.csv', 'Export CSV', 'download-orders-csv'),
          h(
            'span',
            { class: 'hint' },
            'Every order of the site, newest placing first, whatever the filters; restricted visitors’ orders are left out.',
          ),
        ),
      )
    : null;
  const heading = [h('h1', {}, 'Orders'), form, hint, exportTools];
  let page;
  try {
    page = await app.session.json(siteApi(site, `/orders?${params}`));
  } catch (failure) {
    return h('div', {}, ...heading, alertBox(describeError(failure)));
  }
  const rows = page.items.map(orderRow);
  const note = h('p', { class: 'hint', id: 'orders-partial', role: 'status' });
  let cursor = page.nextCursor;
  const more = h('button', { type: 'button', class: 'secondary', id: 'load-more' }, 'Load more');
  const showState = (partial) => {
    // `hidden` loses to the button's own display rule: take it out of the layout instead.
    more.style.display = cursor ? '' : 'none';
    note.textContent = partial ? 'Searched as far as one request may for this source; Load more searches on.' : '';
  };
  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      const next = new URLSearchParams(params);
      next.set('cursor', cursor);
      const found = await app.session.json(siteApi(site, `/orders?${next}`));
      list.querySelector('tbody').append(...found.items.map(orderRow));
      cursor = found.nextCursor;
      showState(found.partial);
    } catch (failure) {
      note.replaceChildren(alertBox(describeError(failure)));
    } finally {
      more.disabled = false;
    }
  });
  showState(page.partial);
  const list = rows.length
    ? table({
        id: 'orders',
        caption: 'Orders, in the order chosen',
        head: ['Order', 'Placed', 'Paid', ['Net value', { class: 'num' }], 'Source', 'Journey', 'Links'],
        rows,
        wrap: { class: 'table-wrap orders-wrap' },
      })
    : empty('No orders match', 'Orders arrive from your shop’s server; try other filters or days.');
  return h('div', {}, ...heading, h('div', { class: 'panel' }, list, note, h('div', { class: 'row' }, more)));
}

/** The orders of a visitor's profile, as the orders page shows them. */
export function visitorOrders(orders) {
  if (!orders.length) return empty('No orders', 'Orders this visitor placed appear here.');
  return table({
    id: 'visitor-orders',
    head: ['Order', 'Placed', ['Net value', { class: 'num' }], 'Source', 'Links'],
    wrap: { class: 'table-wrap orders-wrap' },
    rows: orders.map((order) =>
      h(
        'tr',
        { dataset: { orderId: order.orderId } },
        orderCell(order),
        cell('Placed', when(order.placedAt)),
        cell('Net value', amount(order.valueText, order.currency), { class: 'num' }),
        cell('Source', order.source),
        cell('Links', orderLinks(order)),
      ),
    ),
  });
}
