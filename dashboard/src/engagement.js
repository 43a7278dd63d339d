// Engagement on the overview (issue 41 point 4): bounce rate, median session length, median
// time on page and average scroll depth against the previous period, with how each is made.
import { h, percent, percentChange } from './dom.js';

/** [name, label, how a value reads, whether a rise is good news]. */
const FIGURES = [
  ['bounceRate', 'Bounce rate', percent, false],
  ['medianSessionSeconds', 'Median session length', duration, true],
  ['medianTimeOnPageSeconds', 'Median time on page', duration, true],
  ['averageScrollDepth', 'Average scroll depth', (depth) => percent(depth / 100), true],
];

/** Seconds as a person says them: "45 s", "2 min 10 s", "1 h 5 min". */
export function duration(seconds) {
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) {
    const rest = seconds % 60;
    return `${Math.floor(seconds / 60)} min${rest ? ` ${rest} s` : ''}`;
  }
  const minutes = Math.floor((seconds % 3600) / 60);
  return `${Math.floor(seconds / 3600)} h${minutes ? ` ${minutes} min` : ''}`;
}

/** The change against the period before: points for a rate or a depth, relative for a time. */
function change(figure, name, shown, goodWhenUp, days) {
  const period = days === 1 ? 'the day before' : `the ${days} days before`;
  if (figure.value === null) return h('span', { class: 'change' }, 'nothing measured');
  if (figure.previous === null) return h('span', { class: 'change' }, `nothing measured in ${period}`);
  if (figure.change === null) return h('span', { class: 'change' }, `vs ${shown(figure.previous)} in ${period}`);
  const points = name === 'bounceRate' || name === 'averageScrollDepth';
  const scale = name === 'averageScrollDepth' ? 1 : 100;
  const rounded = Math.round(Math.abs(figure.change) * scale * 10) / 10;
  const size = points ? `${rounded} points` : percentChange(figure.change).size;
  const sign = points ? (rounded === 0 ? 0 : Math.sign(figure.change)) : percentChange(figure.change).sign;
  const tone = sign === 0 ? '' : sign > 0 === goodWhenUp ? 'better' : 'worse';
  const arrow = sign === 0 ? '±' : sign > 0 ? '▲ +' : '▼ −';
  return h('span', { class: `change ${tone}` }, `${arrow}${size} vs ${period} (${shown(figure.previous)})`);
}

/** The engagement panel of the overview. */
export function engagementPanel(engagement, method, days) {
  return h(
    'section',
    { class: 'panel', 'aria-labelledby': 'engagement-title' },
    h('h2', { id: 'engagement-title' }, 'Engagement'),
    h(
      'ul',
      { class: 'figures', id: 'engagement-figures' },
      FIGURES.map(([name, label, shown, goodWhenUp]) => {
        const figure = engagement[name];
        return h(
          'li',
          { class: 'figure', dataset: { figure: name } },
          h('span', { class: 'figure-label' }, label),
          h('strong', { class: 'figure-value' }, figure.value === null ? '—' : shown(figure.value)),
          change(figure, name, shown, goodWhenUp, days),
        );
      }),
    ),
    h('p', { class: 'hint' }, method),
  );
}
