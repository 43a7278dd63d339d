// Traffic sources on the overview: where the period's sessions came from (source, referrer
// domain, UTM source, medium and campaign of the landing page) and where they entered and
// left; a source opens its sessions' recordings (watch) and the shop funnel for it.
import { empty, h, percent } from './dom.js';

function table(id, caption, head, rows, nameOf) {
  if (!rows.length) return empty('Nothing in this period');
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { id },
      h('caption', { class: 'hint' }, caption),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, head),
          h('th', { scope: 'col', class: 'num' }, 'Sessions'),
          h('th', { scope: 'col', class: 'num' }, 'Share'),
        ),
      ),
      h(
        'tbody',
        {},
        rows.map((row) =>
          h(
            'tr',
            {},
            h('td', {}, nameOf(row)),
            h('td', { class: 'num' }, String(row.count)),
            h('td', { class: 'num' }, percent(row.share)),
          ),
        ),
      ),
    ),
  );
}

/** The overview's traffic panels for `traffic` (the overview answer's) of `from`..`to`. */
export function trafficPanels(site, traffic, from, to) {
  if (!traffic) return null;
  const range = `from=${from}&to=${to}`;
  const source = (row) =>
    h(
      'span',
      {},
      row.name,
      ' ',
      h(
        'a',
        {
          href: `/app/sites/${site.id}/recordings?${range}&source=${encodeURIComponent(row.name)}`,
          'aria-label': `Watch sessions from ${row.name}`,
        },
        'watch',
      ),
      ' · ',
      h(
        'a',
        {
          href: `/app/sites/${site.id}/funnels/shop?${range}&source=${encodeURIComponent(row.name)}`,
          'aria-label': `Shop funnel of sessions from ${row.name}`,
        },
        'funnel',
      ),
    );
  const code = (row) => h('code', {}, row.name);
  const plain = (row) => row.name;
  return h(
    'div',
    { class: 'grid', id: 'traffic' },
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'Traffic sources'),
      table(
        'traffic-sources',
        `${traffic.sessions} sessions: the UTM source, else the referrer, else direct`,
        'Source',
        traffic.sources,
        source,
      ),
    ),
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'Referrers'),
      table('traffic-referrers', 'Sites that sent sessions', 'Referrer', traffic.referrers, plain),
    ),
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'Campaigns'),
      table('traffic-campaigns', 'UTM campaign of the landing page', 'Campaign', traffic.utmCampaigns, plain),
      table('traffic-mediums', 'UTM medium of the landing page', 'Medium', traffic.utmMediums, plain),
    ),
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'Entry pages'),
      table('entry-pages', 'The first page of each session', 'Page', traffic.entryPages, code),
    ),
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'Exit pages'),
      table('exit-pages', 'The last page of each session', 'Page', traffic.exitPages, code),
    ),
  );
}
