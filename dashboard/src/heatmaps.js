// Heatmaps (issue 22): the site's pages, and one page's clicks, rage clicks, dead clicks or scroll
// reach drawn over the page as a recording rendered it (or over a plain outline, saying why).
import { siteApi } from './api.js';
import { dayRangeText, empty, h, percent, table } from './dom.js';
import { DEFAULT_OFFSET, choice, field, siteDay } from './filters.js';

const KINDS = { click: 'Clicks', rage_click: 'Rage clicks', dead_click: 'Dead clicks', scroll: 'Scroll depth' };
const WIDTHS = { desktop: 'Desktop', tablet: 'Tablet', phone: 'Phone' };
// The width a page is drawn at when no image says otherwise.
const DRAW_WIDTH = { desktop: 1280, tablet: 800, phone: 390 };
const NO_IMAGE = {
  excluded_from_replay: 'This page is excluded from session replay, so no background is ever rendered for it.',
  no_recording_rendered:
    'No recording of this page at this width has been rendered yet; a recent recording is rendered in the ' +
    'background once one exists.',
};

function rangeOf(site, query) {
  return { from: query.get('from') || siteDay(site, DEFAULT_OFFSET), to: query.get('to') || siteDay(site) };
}

export async function heatmapsPage(app, site, item, query) {
  if (item) return heatmapDetail(app, site, item, query);
  const { from, to } = rangeOf(site, query);
  const list = await app.session.json(siteApi(site, `/heatmaps?from=${from}&to=${to}`));
  const rows = list.pages.map((page) =>
    h(
      'tr',
      {},
      h(
        'td',
        {},
        h(
          'a',
          { href: `/app/sites/${site.id}/heatmaps/${encodeURIComponent(page.page)}?from=${from}&to=${to}` },
          page.page,
        ),
      ),
      h('td', {}, String(page.views)),
      h('td', {}, String(page.clicks)),
      h('td', { class: 'optional' }, String(page.rageClicks)),
      h('td', { class: 'optional' }, String(page.deadClicks)),
    ),
  );
  return h(
    'div',
    {},
    h('h1', {}, 'Heatmaps'),
    h(
      'div',
      { class: 'panel' },
      rows.length
        ? table({
            id: 'heatmap-pages',
            caption: `Pages ${dayRangeText(list.from, list.to)}, grouped without query string or fragment`,
            head: [
              'Page',
              'Pageviews',
              'Clicks',
              ['Rage clicks', { class: 'optional' }],
              ['Dead clicks', { class: 'optional' }],
            ],
            rows,
          })
        : empty('No interactions yet', 'Clicks and scrolling appear here once the loader runs on your shop.'),
    ),
  );
}

function controls(app, site, page, kind, width, from, to) {
  const id = (name) => `heatmap-${name}`;
  const form = h(
    'form',
    {
      class: 'panel filters',
      id: 'heatmap-controls',
      'aria-label': 'Heatmap settings',
      onsubmit: (event) => {
        event.preventDefault();
        const params = new URLSearchParams(new FormData(form));
        app.go(`/app/sites/${site.id}/heatmaps/${encodeURIComponent(page)}?${params}`);
      },
      onchange: (event) => {
        if (event.target.tagName === 'SELECT') form.requestSubmit();
      },
    },
    choice('kind', 'Show', KINDS, kind, { id: id('kind') }),
    choice('width', 'Device width', WIDTHS, width, { id: id('width') }),
    field('from', 'From', from, { id: id('from'), type: 'date' }),
    field('to', 'To', to, { id: id('to'), type: 'date' }),
    h('div', { class: 'row' }, h('button', { type: 'submit' }, 'Apply')),
  );
  return form;
}

function place(point, image, drawWidth) {
  const box = point.selector && image?.boxes?.[point.selector];
  if (box) return { left: box[0] + point.ox * box[2], top: box[1] + point.oy * box[3], onElement: true };
  return { left: point.x * drawWidth, top: point.y, onElement: false };
}

async function heatmapDetail(app, site, page, query) {
  const kind = KINDS[query.get('kind')] ? query.get('kind') : 'click';
  const width = WIDTHS[query.get('width')] ? query.get('width') : 'desktop';
  const { from, to } = rangeOf(site, query);
  const params = new URLSearchParams({ page, kind, width, from, to });
  const view = await app.session.json(siteApi(site, `/heatmaps/page?${params}`));
  const image = view.image;
  const drawWidth = image?.width || DRAW_WIDTH[width];
  const points = (view.points || []).map((point) => ({ ...point, ...place(point, image, drawWidth) }));
  const lowest = Math.max(0, ...points.map((point) => point.top));
  const drawHeight = image?.height || Math.max(900, lowest + 100);
  const stage = h('div', {
    class: `heatmap-stage ${image ? '' : 'outline'}`,
    id: 'heatmap-stage',
    style: `width: ${drawWidth}px; height: ${drawHeight}px`,
    dataset: { width: String(drawWidth) },
  });
  if (image) {
    const response = await app.session.send(siteApi(site, `/heatmaps/images/${image.id}`));
    const url = URL.createObjectURL(await response.blob());
    stage.append(
      h('img', { src: url, alt: `The page ${page} as a recording rendered it`, width: drawWidth, height: drawHeight }),
    );
  }
  const most = Math.max(1, ...points.map((point) => point.count));
  for (const point of points) {
    const size = Math.round(14 + 26 * (point.count / most));
    stage.append(
      h('span', {
        class: `heat-dot ${kind}`,
        'aria-hidden': 'true',
        style: `left: ${point.left - size / 2}px; top: ${point.top - size / 2}px; width: ${size}px; height: ${size}px`,
        title: `${point.count} on ${point.selector || 'the page'}`,
        dataset: {
          selector: point.selector || '',
          count: String(point.count),
          x: String(point.left),
          y: String(point.top),
        },
      }),
    );
  }
  let summary;
  if (kind === 'scroll') {
    const bands = view.reach.map((row, index) =>
      h('div', {
        class: 'reach-band',
        'aria-hidden': 'true',
        dataset: { depth: String(row.depth), share: String(row.share) },
        style: `top: ${index * 5}%; height: 5%; background: rgba(214, 40, 40, ${(0.1 + 0.6 * row.share).toFixed(2)})`,
      }),
    );
    stage.append(...bands);
    if (view.fold !== null) {
      stage.append(
        h(
          'div',
          { class: 'fold-line', id: 'fold-line', style: `top: ${view.fold}%` },
          h('span', {}, `Fold: ${view.fold}% visible without scrolling`),
        ),
      );
    }
    summary = view.views
      ? h(
          'table',
          { id: 'scroll-reach' },
          h(
            'caption',
            { class: 'hint' },
            `Of the ${view.views} ${view.views === 1 ? 'view' : 'views'} whose scrolling was measured, the ` +
              `share reaching each depth`,
          ),
          h('thead', {}, h('tr', {}, h('th', {}, 'Depth'), h('th', {}, 'Views reaching it'))),
          h(
            'tbody',
            {},
            view.reach
              .filter((row) => row.depth % 25 === 0)
              .map((row) => h('tr', {}, h('td', {}, `${row.depth}%`), h('td', {}, percent(row.share)))),
          ),
        )
      : empty('No scroll reports yet', 'Scroll depth arrives when visitors leave or hide the page.');
  } else {
    summary = points.length
      ? h(
          'table',
          { id: 'heatmap-elements' },
          h(
            'caption',
            { class: 'hint' },
            `${view.total} ${KINDS[kind].toLowerCase()} ${dayRangeText(view.from, view.to)}`,
          ),
          h('thead', {}, h('tr', {}, h('th', {}, 'Element'), h('th', {}, 'Count'))),
          h(
            'tbody',
            {},
            points
              .slice(0, 20)
              .map((point) =>
                h(
                  'tr',
                  {},
                  h('td', {}, h('code', {}, point.selector || 'page area')),
                  h('td', {}, String(point.count)),
                ),
              ),
          ),
        )
      : empty(`No ${KINDS[kind].toLowerCase()} here`, 'Try another device width or a wider date range.');
  }
  return h(
    'div',
    {},
    h('p', {}, h('a', { href: `/app/sites/${site.id}/heatmaps` }, '← All pages')),
    h('h1', {}, `Heatmap: ${page}`),
    controls(app, site, page, kind, width, from, to),
    image ? null : h('p', { class: 'notice', id: 'no-image' }, NO_IMAGE[view.noImage] || 'No background image.'),
    h('div', { class: 'panel' }, summary),
    h('div', { class: 'panel heatmap-scroll' }, stage),
  );
}
