// Filter forms whose every value lives in the page's URL, so a filtered view can be bookmarked
// and shared: the form reads its values from the query and submitting it navigates.
import { h } from './dom.js';

/** The device types a list filters by. */
export const DEVICES = { '': 'Any', desktop: 'Desktop', mobile: 'Phone', tablet: 'Tablet' };

/** A labelled <select> of {value: text} options; `id` names the control (filter-<name>). */
export function choice(name, label, options, value, { id = `filter-${name}` } = {}) {
  // The control sits beside its label, not inside it: a label holding a list would be named by
  // every option's text as well.
  return h(
    'div',
    { class: 'field' },
    h('label', { for: id }, label),
    h(
      'select',
      { id, name },
      Object.entries(options).map(([key, text]) => h('option', { value: key, selected: key === (value || '') }, text)),
    ),
  );
}

/** A labelled <input>; `attrs.id` names the control (filter-<name>). */
export function field(name, label, value, { id = `filter-${name}`, ...attrs } = {}) {
  return h(
    'div',
    { class: 'field' },
    h('label', { for: id }, label),
    h('input', { id, name, value: value || '', ...attrs }),
  );
}

/** Check boxes of one name, in a fieldset; their values join with commas in the URL. */
export function checks(name, legend, options, value) {
  const chosen = new Set((value || '').split(',').filter(Boolean));
  return h(
    'fieldset',
    { class: 'checks' },
    h('legend', {}, legend),
    Object.entries(options).map(([key, text]) =>
      h(
        'label',
        { class: 'check' },
        h('input', { type: 'checkbox', name, value: key, checked: chosen.has(key) }),
        text,
      ),
    ),
  );
}

/** Any / yes / no for a true-false filter. */
export function yesNo(name, label, value) {
  return choice(name, label, { '': 'Any', true: 'Yes', false: 'No' }, value);
}

/**
 * A search form over `names`: filled from `query`, and on submit navigating to `path` with the
 * values that are set (check boxes of one name joined by commas). A choice from a list or a
 * box applies at once; typed values apply with the button or Enter. A value equal to its
 * `defaults` entry is left out, so the plainest view has the plainest address.
 */
export function filterForm(app, { id, label, path, controls, submit = 'Apply', defaults = {} }) {
  const form = h(
    'form',
    {
      class: 'panel filters',
      id,
      role: 'search',
      'aria-label': label,
      onsubmit: (event) => {
        event.preventDefault();
        app.go(`${path}${queryString(form, defaults)}`);
      },
      onchange: (event) => {
        if (event.target.tagName === 'SELECT' || event.target.type === 'checkbox') form.requestSubmit();
      },
    },
    controls,
    h(
      'div',
      { class: 'row' },
      h('button', { type: 'submit' }, submit),
      h('a', { class: 'button secondary', href: path }, 'Clear'),
    ),
  );
  return form;
}

/** The form's set values as `?a=1&b=x,y` (those equal to their `defaults` left out), or ''. */
export function queryString(form, defaults = {}) {
  const values = new Map();
  for (const [name, value] of new FormData(form)) {
    if (!value || defaults[name] === value) continue;
    values.set(name, values.has(name) ? `${values.get(name)},${value}` : value);
  }
  const params = new URLSearchParams([...values]);
  return params.size ? `?${params}` : '';
}

/** The query's values of these names that are set, for the API call. */
export function picked(query, names) {
  const params = new URLSearchParams();
  for (const name of names) if (query.get(name)) params.set(name, query.get(name));
  return params;
}

/**
 * A list page's request: the query's filters of these names that are set, and the API's
 * parameters for one page of 25 from the query's cursor.
 */
export function listQuery(query, names) {
  const filters = picked(query, names);
  const cursor = query.get('cursor');
  const params = new URLSearchParams(filters);
  params.set('limit', '25');
  if (cursor) params.set('cursor', cursor);
  return { filters, cursor, params };
}

/** The links of a list's pages, keeping the filters: first page and next page. */
export function pager(path, filters, cursor, nextCursor) {
  const withCursor = (value) => {
    const params = new URLSearchParams(filters);
    if (value) params.set('cursor', value);
    return params.size ? `${path}?${params}` : path;
  };
  return h(
    'div',
    { class: 'row' },
    cursor ? h('a', { class: 'button secondary', href: withCursor(null) }, 'First page') : null,
    nextCursor
      ? h('a', { class: 'button secondary', id: 'next-page', href: withCursor(nextCursor) }, 'Next page')
      : null,
  );
}

/** The site's day `offset` days from today, in its time zone (the server's days are the same). */
export function siteDay(site, offset = 0) {
  const timeZone = site.settings?.timeZone || 'UTC';
  const parts = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' })
    .formatToParts(new Date())
    .reduce((found, part) => ({ ...found, [part.type]: part.value }), {});
  const day = new Date(Date.UTC(Number(parts.year), Number(parts.month) - 1, Number(parts.day) + offset));
  return day.toISOString().slice(0, 10);
}

/** The last 30 days, today included: the one default range of every page and of the API. */
export const DEFAULT_OFFSET = -29;
