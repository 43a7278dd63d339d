// Tiny DOM helpers. Text always goes in as text nodes, so API data can never become markup.

/** An element: h('a', {href: '/x', class: 'y', onclick}, 'text', child, [more]). */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      element.addEventListener(name.slice(2), value);
    } else if (name === 'dataset') {
      Object.assign(element.dataset, value);
    } else {
      element.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** An SVG element (charts). */
export function svg(tag, attrs = {}, ...children) {
  const element = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, String(value));
  append(element, children);
  return element;
}

/**
 * A table in its scrolling wrap. `head` holds the header cells: a text, or [text, attrs] for a
 * cell with attributes; `rows` the body's rows; `caption`, when given, is a hint above them;
 * `wrap` adds attributes to the wrap (a wrap that scrolls takes the keyboard's focus).
 */
export function table({ id, caption, head, rows, wrap = {} }) {
  const cell = (spec) => (Array.isArray(spec) ? h('th', spec[1], spec[0]) : h('th', {}, spec));
  return h(
    'div',
    { class: 'table-wrap', ...wrap },
    h(
      'table',
      { id },
      caption ? h('caption', { class: 'hint' }, caption) : null,
      h('thead', {}, h('tr', {}, head.map(cell))),
      h('tbody', {}, rows),
    ),
  );
}

/**
 * A ratio (0.1795) as a percentage in the browser's language, rounded once: one decimal under
 * 10 % ("7.3%"), whole from there ("18%"); "—" for none. The API gives the exact ratio, so this
 * is the one rounding between it and the page; every page writes its percentages with it.
 */
export function percent(ratio) {
  if (ratio === null || ratio === undefined || Number.isNaN(Number(ratio))) return '—';
  const tenths = Math.round(Math.abs(ratio) * 1000);
  const places = tenths > 0 && tenths < 100 ? 1 : 0;
  return new Intl.NumberFormat(navigator.language, {
    style: 'percent',
    minimumFractionDigits: places,
    maximumFractionDigits: places,
  }).format(ratio);
}

/** A relative change against the previous period: its size as `percent` says it, and its sign (0 when it rounds to nothing). */
export function percentChange(change) {
  const size = percent(Math.abs(change));
  return { size, sign: size === percent(0) ? 0 : Math.sign(change) };
}

/**
 * Shares of a whole, one bar each with its percentage and count; `none` says that there are
 * none, `unknown` names a row without a name.
 */
export function shareList(id, rows, { none = 'Nothing in this period', unknown } = {}) {
  if (!rows.length) return empty(none);
  return h(
    'ul',
    { class: 'shares', id },
    rows.map((row) => {
      const width = Math.round(row.share * 100);
      return h(
        'li',
        {},
        h('span', { class: 'share-name' }, row.name || unknown),
        h('span', { class: 'share-bar', 'aria-hidden': 'true' }, h('span', { style: `width: ${width}%` })),
        h('span', { class: 'share-value' }, `${percent(row.share)} (${row.count})`),
      );
    }),
  );
}

/** A designed empty state: what is missing and what to do about it. */
export function empty(title, hint) {
  return h('div', { class: 'empty' }, h('strong', {}, title), hint);
}

/** An alert in words, announced to screen readers. */
export function alertBox(message) {
  return h('div', { class: 'alert', role: 'alert' }, message);
}

export function progress(label) {
  return h('div', { class: 'progress', role: 'status' }, h('progress', { 'aria-label': label }), label);
}

/** A day (2026-11-28) as the reader's locale writes a date; the one way dates are shown. */
export function dayText(day) {
  const date = new Date(`${day}T00:00:00Z`);
  if (Number.isNaN(date.getTime())) return String(day);
  return new Intl.DateTimeFormat(navigator.language, { dateStyle: 'medium', timeZone: 'UTC' }).format(date);
}

/** A range of days in words: "on 28 Nov 2026", or "from 1 Nov 2026 to 30 Nov 2026". */
export function dayRangeText(first, last) {
  return first === last ? `on ${dayText(first)}` : `from ${dayText(first)} to ${dayText(last)}`;
}

export function when(value) {
  if (!value) return '—';
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
}

export function seconds(value) {
  const total = Math.round(Number(value) || 0);
  const minutes = Math.floor(total / 60);
  return minutes ? `${minutes} min ${total % 60} s` : `${total} s`;
}

/** A URL's path and query, which say more in a list than the shop's origin repeated. */
export function pagePath(url) {
  try {
    const parsed = new URL(url);
    return `${parsed.pathname}${parsed.search}`;
  } catch {
    return url || 'an unknown page';
  }
}

/** Terms and their values as a definition list; a missing value reads as a dash. */
export function facts(pairs) {
  return h(
    'dl',
    { class: 'facts' },
    pairs.map(([term, value]) => [h('dt', {}, term), h('dd', {}, value ?? '—')]),
  );
}

/**
 * Save a Response's body as a file (exports and CSVs) through a temporary object URL; the
 * saved name and the body, for callers that look inside it.
 */
export async function saveResponse(response, fallbackName) {
  const disposition = response.headers.get('Content-Disposition') || '';
  const name = /filename="?([^";]+)"?/.exec(disposition)?.[1] || fallbackName;
  const blob = await response.blob();
  const url = URL.createObjectURL(blob);
  const link = h('a', { href: url, download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
  return { saved: name, blob };
}
