// Site settings (collection, privacy, origins, notifications, API key) and the privacy and
// exports page (CSV, account export, audit trail, restricted and objecting visitors,
// data-subject request log with due dates).
import { describeError } from './api.js';
import { actionButton, csvDownload, download } from './controls.js';
import { alertBox, empty, h, when } from './dom.js';
import { facts } from './pages.js';

const api = (site) => `/api/v1/sites/${site.id}`;

function check(name, label, checked, hint, disabled) {
  return h('label', { class: 'check' }, h('input', { type: 'checkbox', name, checked, disabled }),
    h('span', {}, label, hint ? h('span', { class: 'hint' }, ` — ${hint}`) : null));
}

function text(name, label, value, { type = 'text', placeholder, disabled, hint } = {}) {
  const id = `field-${name}`;
  return h('label', { class: 'field', for: id }, h('span', {}, label),
    h('input', { id, name, type, value: value ?? '', placeholder, disabled, autocomplete: 'off' }),
    hint ? h('span', { class: 'hint' }, hint) : null);
}

/** The non-empty lines of a textarea's value, trimmed. */
function lines(value) {
  return String(value ?? '').split('\n').map((line) => line.trim()).filter(Boolean);
}

function excludedRow(rule = { pattern: '', scope: 'replay' }, disabled) {
  const row = h('div', { class: 'row excluded' },
    h('input', { name: 'pattern', value: rule.pattern, 'aria-label': 'Excluded URL pattern', placeholder: '/checkout/*', disabled }),
    h('select', { name: 'scope', 'aria-label': 'What the exclusion stops', disabled },
      h('option', { value: 'replay', selected: rule.scope !== 'all' }, 'Session replay only'),
      h('option', { value: 'all', selected: rule.scope === 'all' }, 'All collection')),
    disabled ? null : h('button', { type: 'button', class: 'secondary', onclick: () => row.remove() }, 'Remove'));
  return row;
}

export async function settingsPage(app, site) {
  const admin = app.isAdmin(site);
  const disabled = !admin;
  const channels = await app.session.json(`${api(site)}/notifications`);
  const settings = { recordings: true, consoleCapture: false, requireConsent: false, excludedUrls: [], ...site.settings };
  const rules = h('div', {}, settings.excludedUrls.map((rule) => excludedRow(rule, disabled)));
  const outcome = h('div', { role: 'status' });
  const form = h('form', { class: 'panel', id: 'settings-form', onsubmit: async (event) => {
    event.preventDefault();
    outcome.replaceChildren();
    const data = new FormData(form);
    const excludedUrls = [...rules.querySelectorAll('.excluded')].map((row) => ({
      pattern: row.querySelector('[name=pattern]').value.trim(), scope: row.querySelector('[name=scope]').value,
    })).filter((rule) => rule.pattern);
    const change = {
      allowedOrigins: lines(data.get('origins')),
      settings: { recordings: data.has('recordings'), consoleCapture: data.has('consoleCapture'),
        requireConsent: data.has('requireConsent'), excludedUrls, personalPages: lines(data.get('personalPages')) },
    };
    // Sent only when changed; empty means the currency of the first paid order.
    const currency = String(data.get('reportingCurrency') || '').trim().toUpperCase() || null;
    if (currency !== (settings.reportingCurrency || null)) change.settings.reportingCurrency = currency;
    try {
      const updated = await app.session.json(api(site), { method: 'PATCH', json: change });
      Object.assign(site, updated);
      outcome.replaceChildren(h('div', { class: 'notice' }, 'Settings saved.'));
    } catch (failure) {
      outcome.replaceChildren(alertBox(describeError(failure)));
    }
  } },
  h('h2', {}, 'Collection and privacy'),
  check('recordings', 'Session recordings', settings.recordings, 'all input is masked', disabled),
  check('consoleCapture', 'Console capture', settings.consoleCapture, 'console output becomes part of recordings and cannot be masked', disabled),
  check('requireConsent', 'Require consent before tracking', settings.requireConsent, 'nothing is stored or sent until the banner signals acceptance', disabled),
  h('p', { class: 'hint' }, 'Global Privacy Control is always honoured; IP addresses are always stored anonymised.'),
  h('h3', {}, 'Excluded URLs'),
  h('p', { class: 'hint' }, '* matches anything; a pattern starting with / matches the path. “Session replay only” keeps traffic figures.'),
  rules,
  admin ? h('button', { type: 'button', class: 'secondary', onclick: () => rules.append(excludedRow(undefined, false)) }, 'Add an excluded URL') : null,
  h('h3', {}, 'Customer pages recorded masked'),
  h('label', { class: 'field', for: 'personal-pages' },
    h('span', {}, 'One pattern per line, written like excluded URLs. Every text and typed value on these pages is masked in recordings, whatever the browser sent.'),
    h('textarea', { id: 'personal-pages', name: 'personalPages', disabled }, (settings.personalPages || []).join('\n'))),
  h('h3', {}, 'Sales'),
  h('label', { class: 'field', for: 'reporting-currency' },
    h('span', {}, 'Reporting currency (ISO 4217, e.g. EUR). Revenue is shown in it; orders in other currencies are listed apart. Empty: the currency of the first paid order.'),
    h('input', { id: 'reporting-currency', name: 'reportingCurrency', maxlength: 3, pattern: '[A-Za-z]{3}',
      autocomplete: 'off', value: settings.reportingCurrency || '', disabled })),
  h('h3', {}, 'Allowed origins'),
  h('label', { class: 'field', for: 'origins' }, h('span', {}, 'One origin per line, e.g. https://shop.example'),
    h('textarea', { id: 'origins', name: 'origins', disabled }, (site.allowedOrigins || []).join('\n'))),
  outcome,
  admin ? h('button', { type: 'submit', id: 'save-settings' }, 'Save settings') : h('p', { class: 'hint' }, 'Viewers can read settings; owners and admins change them.'));
  return h('div', {}, h('h1', {}, 'Site settings'), await installPanel(app, site), form,
    notificationsForm(app, site, channels, disabled), keysPanel(app, site, admin));
}

/** How often the install panel asks whether the first pageview has arrived. */
const RECEIVING_POLL_MS = 3000;

/** A copy button for `text`; where the clipboard is refused, the text is selected instead. */
function copyButton(label, text, selectable) {
  return h('button', { type: 'button', class: 'secondary', onclick: async (event) => {
    try {
      await navigator.clipboard.writeText(text);
      event.target.textContent = 'Copied';
    } catch {
      getSelection().selectAllChildren(selectable);
      event.target.textContent = 'Selected: press Ctrl+C';
    }
  } }, label);
}

function receivingState(install) {
  return install.receiving
    ? h('div', { class: 'notice', id: 'install-state', dataset: { receiving: 'true' } },
      h('strong', {}, 'Receiving data.'), ` The latest pageview arrived ${when(install.lastPageviewAt)}.`)
    : h('div', { class: 'waiting', id: 'install-state', dataset: { receiving: 'false' } },
      h('strong', {}, 'Waiting for the first event…'),
      ' Install the plugin or the snippet below and open a page of your shop; this turns green when its first pageview arrives.');
}

/**
 * Installing the site on a shop: the state of the first pageview (polled until it arrives),
 * the WordPress plugin with the values to enter, and the loader snippet for any other site.
 */
async function installPanel(app, site) {
  const install = await app.session.json(`${api(site)}/install`);
  const state = h('div', { role: 'status', 'aria-live': 'polite' }, receivingState(install));
  if (!install.receiving) {
    const timer = setInterval(async () => {
      if (!state.isConnected) { clearInterval(timer); return; }
      try {
        const now = await app.session.json(`${api(site)}/install`);
        if (now.receiving) {
          clearInterval(timer);
          state.replaceChildren(receivingState(now));
        }
      } catch { /* a missed poll is retried on the next tick */ }
    }, RECEIVING_POLL_MS);
  }
  const snippet = h('code', { id: 'loader-snippet' }, install.loaderSnippet);
  const value = (id, text) => h('span', { class: 'key', id }, text);
  const plugin = install.plugin.available
    ? h('p', {}, h('a', { class: 'button', id: 'plugin-download', href: install.plugin.url, download: 'visitor-service.zip' },
      'Download the WordPress plugin'), ' ', h('span', { class: 'hint' }, `visitor-service.zip, ${Math.ceil(install.plugin.bytes / 1024)} KB`))
    : h('p', { id: 'plugin-missing' }, 'The plugin archive has not been built on this server. Build it with ',
      h('code', {}, install.plugin.build), ' in the service’s directory; it is then offered here.');
  return h('section', { class: 'panel', 'aria-labelledby': 'install-title', id: 'install' },
    h('h2', { id: 'install-title' }, 'Install on your shop'), state,
    h('h3', {}, 'WordPress and WooCommerce'), plugin,
    h('p', {}, 'Upload it under Plugins → Add New → Upload Plugin, activate it, then enter under Settings → Visitor Service:'),
    facts([
      ['Service URL', value('install-service-url', install.serviceUrl)],
      ['Public key', value('install-public-key', install.publicKey)],
      ['API key', h('span', {}, value('install-api-key', install.apiKeyHint || 'hidden'),
        h('span', { class: 'hint' }, ' shown in full only when created or rotated (Keys, below); '
          + 'keep it in wp-config.php as VISITOR_SERVICE_API_KEY')),
      ]]),
    install.allowedOrigins.length ? null : h('p', { class: 'warning' },
      'Add your shop’s address to the allowed origins below, or browsers’ data is refused.'),
    h('h3', {}, 'Any other site'),
    h('p', {}, 'Paste this into every page, just before </head>:'),
    h('pre', {}, snippet), copyButton('Copy the snippet', install.loaderSnippet, snippet));
}

function notificationsForm(app, site, channels, disabled) {
  const email = channels.email || {};
  const webhook = channels.webhook || {};
  const outcome = h('div', { role: 'status' });
  const form = h('form', { class: 'panel', id: 'notifications-form', onsubmit: async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const change = {};
    if (data.get('smtpHost')) {
      change.email = { enabled: data.has('emailEnabled'), from: data.get('from'), smtpHost: data.get('smtpHost'),
        smtpPort: Number(data.get('smtpPort') || 587), smtpSecurity: data.get('smtpSecurity'),
        recipients: String(data.get('recipients')).split(',').map((r) => r.trim()).filter(Boolean),
        smtpUsername: data.get('smtpUsername') || null };
      // Write-only: an empty box keeps the stored secret (the key is left out).
      if (data.get('smtpPassword')) change.email.smtpPassword = data.get('smtpPassword');
    }
    if (data.get('webhookUrl')) {
      change.webhook = { enabled: data.has('webhookEnabled'), url: data.get('webhookUrl') };
      if (data.get('webhookSecret')) change.webhook.secret = data.get('webhookSecret');
    }
    try {
      await app.session.json(`${api(site)}/notifications`, { method: 'PUT', json: change });
      form.querySelectorAll('input[type=password]').forEach((input) => { input.value = ''; });
      outcome.replaceChildren(h('div', { class: 'notice' }, 'Notification channels saved.'));
    } catch (failure) {
      outcome.replaceChildren(alertBox(describeError(failure)));
    }
  } },
  h('h2', {}, 'Notifications for new and re-opened errors'),
  h('fieldset', {}, h('legend', {}, 'E-mail'),
    check('emailEnabled', 'Send e-mails', email.enabled, null, disabled),
    text('recipients', 'Recipients (comma-separated)', (email.recipients || []).join(', '), { disabled }),
    text('from', 'From address', email.from, { disabled }),
    text('smtpHost', 'SMTP host', email.smtpHost, { disabled }),
    text('smtpPort', 'SMTP port', email.smtpPort || 587, { type: 'number', disabled }),
    h('label', { class: 'field', for: 'smtpSecurity' }, h('span', {}, 'Security'),
      h('select', { id: 'smtpSecurity', name: 'smtpSecurity', disabled }, ['starttls', 'tls', 'none'].map((value) =>
        h('option', { value, selected: (email.smtpSecurity || 'starttls') === value }, value)))),
    text('smtpUsername', 'SMTP user name', email.smtpUsername, { disabled }),
    text('smtpPassword', 'SMTP password', '', { type: 'password', disabled,
      placeholder: email.smtpPasswordSet ? 'Stored — type to replace' : 'Not set',
      hint: 'Write-only: never shown again once saved.' })),
  h('fieldset', {}, h('legend', {}, 'Webhook'),
    check('webhookEnabled', 'Call the webhook', webhook.enabled, null, disabled),
    text('webhookUrl', 'URL', webhook.url, { type: 'url', disabled }),
    text('webhookSecret', 'Signing secret (16+ characters)', '', { type: 'password', disabled,
      placeholder: webhook.secretSet ? 'Stored — type to replace' : 'Not set', hint: 'Write-only.' })),
  outcome,
  disabled ? null : h('button', { type: 'submit' }, 'Save channels'));
  return form;
}

function keysPanel(app, site, admin) {
  const shown = h('div', { id: 'new-key' });
  return h('section', { class: 'panel' }, h('h2', {}, 'Keys'),
    h('p', {}, 'Public browser key: ', h('span', { class: 'key' }, site.publicKey)),
    h('p', {}, 'API key: ', h('span', { class: 'key' }, site.apiKeyHint || 'hidden'),
      site.apiKeyRotatedAt ? h('span', { class: 'hint' }, ` rotated ${when(site.apiKeyRotatedAt)}`) : null),
    admin ? actionButton('Rotate API key', async () => {
      const rotated = await app.session.json(`${api(site)}/api-key/rotate`, { method: 'POST' });
      Object.assign(site, rotated.site);
      const key = h('span', { class: 'key', id: 'api-key-value' }, rotated.apiKey);
      shown.replaceChildren(h('div', { class: 'notice' },
        h('p', {}, 'Your new API key. Copy it now: it will not be shown again. The old key stopped working.'), key, ' ',
        h('button', { type: 'button', class: 'secondary', onclick: async (event) => {
          try {
            await navigator.clipboard.writeText(rotated.apiKey);
            event.target.textContent = 'Copied';
          } catch {
            getSelection().selectAllChildren(key);
            event.target.textContent = 'Selected: press Ctrl+C';
          }
        } }, 'Copy')));
      return null;
    }, { busy: 'Rotating…', kind: 'danger', id: 'rotate-key' }) : h('p', { class: 'hint', id: 'viewer-note' }, 'Only owners and admins can rotate keys.'),
    shown);
}

/** When a hold was set: its time, or just that it is on (set before times were recorded). */
function heldSince(on, at) {
  if (!on) return '—';
  return at ? when(at) : 'yes';
}

/**
 * Restricted and objecting visitors, each with the switch that lifts its hold. A restricted
 * visitor is hidden from every other page, so this is the way back to the switch.
 */
function holdsPanel(app, site, holds) {
  const outcome = h('div', { role: 'status' });
  const holder = h('div');
  const switchPath = (hold, kind) => `${api(site)}/visitors/${encodeURIComponent(hold.visitorId)}/${kind}`;
  const lift = (hold, kind, label, done) => actionButton(label, async () => {
    await app.session.json(switchPath(hold, kind), { method: 'PUT', json: { on: false } });
    outcome.replaceChildren(h('div', { class: 'notice' }, done));
    show(await app.session.json(`${api(site)}/privacy-holds`));
    return null;
  }, { kind: 'secondary', busy: 'Lifting…', ariaLabel: `${label} of visitor ${hold.visitorId}` });
  const show = (current) => holder.replaceChildren(current.items.length ? h('div', { class: 'table-wrap' }, h('table', { id: 'privacy-holds' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Visitor id'), h('th', {}, 'Restricted since'), h('th', {}, 'Objecting since'), h('th', {}, ''))),
    h('tbody', {}, current.items.map((hold) => h('tr', { dataset: { visitorId: hold.visitorId } },
      // A restricted profile answers 404, so only an objecting visitor's id links to it.
      h('td', {}, hold.restricted ? hold.visitorId
        : h('a', { href: `/app/sites/${site.id}/visitors/${encodeURIComponent(hold.visitorId)}` }, hold.visitorId)),
      h('td', {}, heldSince(hold.restricted, hold.restrictedAt)),
      h('td', {}, heldSince(hold.objected, hold.objectedAt)),
      h('td', {}, h('div', { class: 'row' },
        hold.restricted ? lift(hold, 'restriction', 'Lift restriction',
          `Restriction of ${hold.visitorId} lifted; the visitor is listed again.`) : null,
        hold.objected ? lift(hold, 'objection', 'Withdraw objection',
          `Objection of ${hold.visitorId} withdrawn; new data from this visitor is stored again.`) : null)))))))
    : empty('No restricted or objecting visitors', 'Restrict processing or record an objection from a visitor’s page.'));
  show(holds);
  return h('section', { class: 'panel', 'aria-labelledby': 'holds-title' },
    h('h2', { id: 'holds-title' }, 'Restricted and objecting visitors'),
    h('p', { class: 'hint' }, 'A restricted visitor is hidden everywhere else in the dashboard, and nothing new is stored for a '
      + 'restricted or objecting visitor. Tell the visitor before you lift a restriction (GDPR Art. 18(3)).'),
    outcome, holder);
}

const REQUEST_TYPES = { access: 'access (export)' };

/**
 * Whom a request was about: the visitor, linked to the profile while it can be opened. An
 * erasure removes the id from the log, so an erased subject reads as such, never as an id.
 */
function requestSubject(site, request) {
  if (!request.visitorId) {
    return h('td', { class: 'hint' }, request.type === 'erasure' && request.status === 'completed'
      ? 'erased visitor' : 'not recorded');
  }
  const name = request.visitorName || request.visitorId;
  return h('td', {}, request.visitorName
    ? h('a', { href: `/app/sites/${site.id}/visitors/${encodeURIComponent(request.visitorId)}` }, name)
    : h('span', {}, name, h('span', { class: 'hint' }, ' (no data held)')));
}

/** "90 days", "25 months"-free: retention is set and shown in days. */
function days(value) {
  return value === 1 ? '1 day' : `${value} days`;
}

/**
 * Retention, per kind: how long it is kept, the oldest item still held, the last purge and what
 * it removed, so the owner can see the durations are enforced. Owners and admins change a
 * retention here; a shorter one is previewed (how many items the next purge removes) first.
 */
function retentionPanel(app, site, status, admin) {
  const outcome = h('div', { role: 'status' });
  const inputs = {};
  const rows = status.kinds.map((kind) => {
    const editable = admin && kind.settable;
    const input = editable ? h('input', { type: 'number', name: kind.kind, min: kind.minDays, max: kind.maxDays,
      value: kind.retentionDays, 'aria-label': `Days to keep: ${kind.label}`, class: 'days' }) : null;
    if (input) inputs[kind.kind] = input;
    return h('tr', { dataset: { kind: kind.kind } }, h('td', {}, kind.label),
      h('td', {}, input || days(kind.retentionDays),
        h('span', { class: 'hint' }, kind.settable ? ` ${kind.minDays}–${kind.maxDays}` : ' fixed by law')),
      h('td', {}, when(kind.oldestHeldAt)), h('td', { class: 'optional' }, when(kind.lastPurgeAt)),
      h('td', {}, String(kind.removedLastRun)), h('td', { class: 'optional' }, String(kind.removedTotal)));
  });
  const changed = () => Object.fromEntries(Object.entries(inputs).map(([kind, input]) => [kind, Number(input.value)])
    .filter(([kind, value]) => value !== status.kinds.find((k) => k.kind === kind).retentionDays));
  const controls = admin ? h('div', { class: 'row' },
    actionButton('Preview deletions', async () => {
      const preview = await app.session.json(`${api(site)}/retention/preview`, { method: 'POST', json: { retentionDays: changed() } });
      const counts = status.kinds.filter((kind) => preview.wouldRemove[kind.kind])
        .map((kind) => `${kind.label}: ${preview.wouldRemove[kind.kind]}`);
      outcome.replaceChildren(h('div', { class: 'notice', id: 'retention-preview' }, counts.length
        ? `The next purge would remove ${counts.join('; ')}.` : 'The next purge would remove nothing.'));
      return null;
    }, { busy: 'Counting…', kind: 'secondary' }),
    actionButton('Save retention', async () => {
      const updated = await app.session.json(api(site), { method: 'PATCH', json: { settings: { retentionDays: changed() } } });
      Object.assign(site, updated);
      outcome.replaceChildren(h('div', { class: 'notice' }, 'Retention saved; it applies at the next purge.'));
      return null;
    }, { busy: 'Saving…', id: 'save-retention' })) : null;
  const lag = status.lastError ? h('p', { class: 'warning' }, `The last purge failed (${status.lastError}); it is retried.`) : null;
  return h('section', { class: 'panel', 'aria-labelledby': 'retention-title', id: 'retention' },
    h('h2', { id: 'retention-title' }, 'Retention'),
    h('p', { class: 'hint' }, `What is older is removed automatically. Last purge finished: ${when(status.lastRunCompletedAt)}.`),
    lag,
    h('div', { class: 'table-wrap' }, h('table', { id: 'retention-table' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Data'), h('th', {}, 'Kept (days)'), h('th', {}, 'Oldest held'),
        h('th', { class: 'optional' }, 'Last purge'), h('th', {}, 'Removed last run'), h('th', { class: 'optional' }, 'Removed in all'))),
      h('tbody', {}, rows))),
    controls, outcome);
}

export async function privacyPage(app, site) {
  const admin = app.isAdmin(site);
  const [requests, holds] = admin ? await Promise.all([
    app.session.json('/api/v1/requests'), app.session.json(`${api(site)}/privacy-holds`)]) : [[], null];
  const retention = await app.session.json(`${api(site)}/retention`);
  const auditHolder = h('div', {}, h('p', { class: 'hint' }, 'The audit trail is part of the account export.'));
  const showAudit = actionButton('Show the audit trail', async () => {
    const exported = await (await app.session.send('/auth/me/export.json')).json();
    const trail = exported.auditTrail || [];
    auditHolder.replaceChildren(trail.length ? h('div', { class: 'table-wrap' }, h('table', { id: 'audit' },
      h('thead', {}, h('tr', {}, h('th', {}, 'When'), h('th', {}, 'Action'), h('th', { class: 'optional' }, 'Details'))),
      h('tbody', {}, trail.slice(0, 200).map((entry) => h('tr', {}, h('td', {}, when(entry.at)), h('td', {}, entry.action),
        h('td', { class: 'optional' }, JSON.stringify(entry.details || {})))))))
      : empty('No audit entries'));
    return null;
  }, { busy: 'Loading…', kind: 'secondary' });
  const now = Date.now();
  const rows = requests.filter((r) => r.siteId === site.id).map((r) => {
    const overdue = !r.completedAt && new Date(r.dueAt).getTime() < now;
    return h('tr', { dataset: { requestId: r.id } }, h('td', {}, REQUEST_TYPES[r.type] || r.type), requestSubject(site, r),
      h('td', {}, r.status === 'failed' ? [h('span', { class: 'badge open' }, 'failed'), ' ',
        r.failureReason ? `because ${r.failureReason}` : 'no reason recorded'] : r.status),
      h('td', { class: 'optional' }, when(r.receivedAt)),
      h('td', {}, overdue ? h('strong', {}, `${when(r.dueAt)} (overdue)`) : when(r.dueAt)), h('td', { class: 'optional' }, when(r.completedAt)));
  });
  return h('div', {}, h('h1', {}, 'Privacy & exports'),
    h('section', { class: 'panel' }, h('h2', {}, 'CSV exports'),
      admin ? h('div', { class: 'row' }, ['errors', 'leads', 'recordings', 'orders'].map((kind) => csvDownload(app, site, kind)))
        : h('p', { class: 'hint' }, 'CSV exports need an owner or admin.')),
    retentionPanel(app, site, retention, admin),
    admin ? holdsPanel(app, site, holds) : null,
    h('section', { class: 'panel' }, h('h2', {}, 'Your account'),
      download(app, '/auth/me/export.json', 'account-export.json', 'Download account export'), showAudit, auditHolder),
    h('section', { class: 'panel' }, h('h2', {}, 'Data-subject requests'),
      h('p', { class: 'hint' }, 'Every export, erasure, restriction, objection and rectification is due one month after it was received.'),
      rows.length ? h('div', { class: 'table-wrap' }, h('table', { id: 'requests' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Type'), h('th', {}, 'Visitor'), h('th', {}, 'Status'), h('th', { class: 'optional' }, 'Received'),
          h('th', {}, 'Due'), h('th', { class: 'optional' }, 'Completed'))), h('tbody', {}, rows)))
        : empty('No requests yet', admin ? 'Requests appear here when you export, erase, restrict or rectify.' : 'The request log needs an owner or admin.')));
}
