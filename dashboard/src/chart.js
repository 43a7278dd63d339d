// Pageviews and errors per day as inline SVG bars (the server aggregates: /stats/daily).
import { dayRangeText, h, svg } from './dom.js';

export function dailyChart(days) {
  const width = 640;
  const height = 200;
  const pad = { left: 34, right: 8, top: 10, bottom: 24 };
  const peak = Math.max(1, ...days.map((d) => Math.max(d.pageviews, d.errors)));
  const slot = (width - pad.left - pad.right) / Math.max(1, days.length);
  const bar = Math.max(1, slot / 2 - 1);
  const y = (value) => pad.top + (height - pad.top - pad.bottom) * (1 - value / peak);
  const base = y(0);
  const parts = [
    svg('line', { x1: pad.left, x2: width - pad.right, y1: base, y2: base, stroke: '#dfe3ea' }),
    svg('text', { x: 2, y: pad.top + 8 }, String(peak)),
    svg('text', { x: 2, y: base }, '0'),
  ];
  days.forEach((day, index) => {
    const x = pad.left + index * slot;
    const label = `${day.day}: ${day.pageviews} pageviews, ${day.errors} errors`;
    parts.push(
      svg(
        'rect',
        { class: 'bar-pv', x, y: y(day.pageviews), width: bar, height: base - y(day.pageviews) },
        svg('title', {}, label),
      ),
    );
    parts.push(
      svg(
        'rect',
        { class: 'bar-err', x: x + bar, y: y(day.errors), width: bar, height: base - y(day.errors) },
        svg('title', {}, label),
      ),
    );
    if (index % Math.ceil(days.length / 7) === 0) {
      parts.push(svg('text', { x, y: height - 6 }, day.day.slice(5)));
    }
  });
  const total = (key) => days.reduce((sum, d) => sum + d[key], 0);
  const period = days.length ? dayRangeText(days[0].day, days[days.length - 1].day) : 'No days';
  const summary = `Pageviews and errors ${period}: ${total('pageviews')} pageviews, ${total('errors')} errors.`;
  return h(
    'figure',
    { class: 'chart' },
    svg('svg', { viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': summary }, ...parts),
    h(
      'figcaption',
      { class: 'hint' },
      h('span', { class: 'badge' }, '■ pageviews'),
      ' ',
      h('span', { class: 'badge open' }, '■ errors'),
      ' ',
      summary,
    ),
  );
}
