// Controls shared by the pages: buttons that show progress and say what happened.
import { describeError, siteApi } from './api.js';
import { alertBox, h, saveResponse } from './dom.js';

/**
 * A button that runs `action`, shows progress while it runs and the outcome in words.
 * `ariaLabel` names the button fully where several share a visible label (one per table row).
 */
export function actionButton(label, action, { busy = 'Working…', kind = '', id, ariaLabel } = {}) {
  const status = h('span', { role: 'status', class: 'hint' });
  const button = h(
    'button',
    {
      class: kind,
      id,
      type: 'button',
      'aria-label': ariaLabel,
      onclick: async () => {
        button.disabled = true;
        const before = button.textContent;
        button.textContent = busy;
        status.replaceChildren();
        try {
          const message = await action();
          if (message) status.replaceChildren(message);
        } catch (failure) {
          status.replaceChildren(alertBox(describeError(failure)));
        } finally {
          button.disabled = false;
          button.textContent = before;
        }
      },
    },
    label,
  );
  return h('span', { class: 'row' }, button, status);
}

/**
 * A form's submit handler: the page stays, `submit` is disabled while `work` runs, `outcome`
 * is cleared first and says a failure in words (`describe`'s; the API's by default).
 */
export function submitWith(submit, outcome, work, describe = describeError) {
  return async (event) => {
    event.preventDefault();
    submit.disabled = true;
    outcome.replaceChildren();
    try {
      await work();
    } catch (failure) {
      outcome.replaceChildren(alertBox(describe(failure)));
    } finally {
      submit.disabled = false;
    }
  };
}

/** The first cell of the row that ends a CSV export cut at the server's row cap. */
const TRUNCATION_MARKER = '\n#truncated,';

/**
 * Whether the server cut the export short. The header is decided before the body streams; the
 * marker row at the end of the file is written after, so it also catches rows that arrived in
 * between, and either one is enough.
 */
async function wasTruncated(response, blob) {
  if (response.headers.get('X-Export-Truncated') === 'true') return true;
  if (!(response.headers.get('Content-Type') || '').startsWith('text/csv')) return false;
  return (await blob.slice(-200).text()).includes(TRUNCATION_MARKER);
}

export function download(app, path, name, label, id) {
  return actionButton(
    label,
    async () => {
      const response = await app.session.send(path);
      const { saved, blob } = await saveResponse(response, name);
      if (!(await wasTruncated(response, blob))) return `Saved ${saved}.`;
      const cap = Number(response.headers.get('X-Export-Row-Cap'));
      const rows = cap > 0 ? `the newest ${cap.toLocaleString()} ${cap === 1 ? 'row' : 'rows'}` : 'the newest rows';
      return h(
        'span',
        { class: 'warning', dataset: { truncated: 'true' } },
        `Saved ${saved}, but it is incomplete: it holds only ${rows}, and more exist. ` +
          'Its last row, “#truncated”, marks the cut.',
      );
    },
    { busy: 'Preparing download…', kind: 'secondary', id },
  );
}

/** The CSV export of the site's errors, leads, recordings or orders (owners and admins only). */
export function csvDownload(app, site, kind) {
  return download(app, siteApi(site, `/${kind}.csv`), `${kind}.csv`, `Download ${kind}.csv`, `download-${kind}-csv`);
}

/**
 * The CSV download of a list page, with what the file holds, for owners and admins; nothing for
 * viewers. The CSV endpoints take no filters, so the hint says the file is the whole list.
 */
export function exportTools(app, site, kind, contents) {
  if (!app.isAdmin(site)) return null;
  return h('span', { class: 'row export' }, csvDownload(app, site, kind), h('span', { class: 'hint' }, contents));
}

export function exportPanel(app, site, kind, contents) {
  const tools = exportTools(app, site, kind, contents);
  return tools ? h('div', { class: 'panel row toolbar' }, tools) : null;
}

/**
 * A button that copies `text`, saying so beside it. Where the clipboard is refused (an insecure
 * origin, a permission denied), `selectable` (a field or an element showing the text) is selected
 * instead, for Ctrl+C.
 */
export function copyButton(label, text, selectable, { ariaLabel } = {}) {
  const status = h('span', { role: 'status', class: 'hint' });
  const button = h(
    'button',
    {
      type: 'button',
      class: 'secondary',
      'aria-label': ariaLabel,
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(text);
          status.textContent = 'Copied.';
        } catch {
          if (typeof selectable.select === 'function') selectable.select();
          else getSelection().selectAllChildren(selectable);
          status.textContent = 'Selected: press Ctrl+C to copy.';
        }
      },
    },
    label,
  );
  return h('span', { class: 'row copy' }, button, status);
}
