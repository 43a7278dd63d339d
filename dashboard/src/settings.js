// The settings page: installing the site on a shop, collection and privacy, excluded URLs and
// masked pages, the reporting currency, allowed origins, notification channels and the keys.
import { describeError, siteApi } from './api.js';
import { actionButton, copyButton } from './controls.js';
import { alertBox, facts, h, when } from './dom.js';
import { deleteSitePanel, newSitePanel } from './sites.js';

function check(name, label, checked, hint, disabled) {
  return h(
    'label',
    { class: 'check' },
    h('input', { type: 'checkbox', name, checked, disabled }),
    h('span', {}, label, hint ? h('span', { class: 'hint' }, ` — ${hint}`) : null),
  );
}

function text(name, label, value, { type = 'text', placeholder, disabled, hint } = {}) {
  const id = `field-${name}`;
  return h(
    'label',
    { class: 'field', for: id },
    h('span', {}, label),
    h('input', { id, name, type, value: value ?? '', placeholder, disabled, autocomplete: 'off' }),
    hint ? h('span', { class: 'hint' }, hint) : null,
  );
}

/** The non-empty lines of a textarea's value, trimmed. */
function lines(value) {
  return String(value ?? '')
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);
}

function excludedRow(rule = { pattern: '', scope: 'replay' }, disabled) {
  const row = h(
    'div',
    { class: 'row excluded' },
    h('input', {
      name: 'pattern',
      value: rule.pattern,
      'aria-label': 'Excluded URL pattern',
      placeholder: '/checkout/*',
      disabled,
    }),
    h(
      'select',
      { name: 'scope', 'aria-label': 'What the exclusion stops', disabled },
      h('option', { value: 'replay', selected: rule.scope !== 'all' }, 'Session replay only'),
      h('option', { value: 'all', selected: rule.scope === 'all' }, 'All collection'),
    ),
    disabled ? null : h('button', { type: 'button', class: 'secondary', onclick: () => row.remove() }, 'Remove'),
  );
  return row;
}

export async function settingsPage(app, site) {
  const admin = app.isAdmin(site);
  const disabled = !admin;
  const channels = await app.session.json(siteApi(site, `/notifications`));
  const settings = {
    recordings: true,
    consoleCapture: false,
    requireConsent: false,
    excludedUrls: [],
    ...site.settings,
  };
  const rules = h(
    'div',
    {},
    settings.excludedUrls.map((rule) => excludedRow(rule, disabled)),
  );
  const outcome = h('div', { role: 'status' });
  const zoneList = h('div', {}, zoneChanges(site.timeZoneChanges || []));
  const form = h(
    'form',
    {
      class: 'panel',
      id: 'settings-form',
      onsubmit: async (event) => {
        event.preventDefault();
        outcome.replaceChildren();
        const data = new FormData(form);
        const excludedUrls = [...rules.querySelectorAll('.excluded')]
          .map((row) => ({
            pattern: row.querySelector('[name=pattern]').value.trim(),
            scope: row.querySelector('[name=scope]').value,
          }))
          .filter((rule) => rule.pattern);
        const change = {
          allowedOrigins: lines(data.get('origins')),
          settings: {
            recordings: data.has('recordings'),
            consoleCapture: data.has('consoleCapture'),
            requireConsent: data.has('requireConsent'),
            excludedUrls,
            personalPages: lines(data.get('personalPages')),
          },
        };
        // Sent only when changed; empty means the currency of the first paid order.
        const currency =
          String(data.get('reportingCurrency') || '')
            .trim()
            .toUpperCase() || null;
        if (currency !== (settings.reportingCurrency || null)) change.settings.reportingCurrency = currency;
        const zone = String(data.get('timeZone') || '').trim() || null;
        if (zone !== (settings.timeZone || null)) change.settings.timeZone = zone;
        try {
          const updated = await app.session.json(siteApi(site), { method: 'PATCH', json: change });
          Object.assign(site, updated);
          zoneList.replaceChildren(zoneChanges(updated.timeZoneChanges || []) || '');
          outcome.replaceChildren(h('div', { class: 'notice' }, 'Settings saved.'));
        } catch (failure) {
          outcome.replaceChildren(alertBox(describeError(failure)));
        }
      },
    },
    h('h2', {}, 'Collection and privacy'),
    check('recordings', 'Session recordings', settings.recordings, 'all input is masked', disabled),
    check(
      'consoleCapture',
      'Console capture',
      settings.consoleCapture,
      'console output becomes part of recordings and cannot be masked',
      disabled,
    ),
    check(
      'requireConsent',
      'Require consent before tracking',
      settings.requireConsent,
      'nothing is stored or sent until the banner signals acceptance',
      disabled,
    ),
    h('p', { class: 'hint' }, 'Global Privacy Control is always honoured; IP addresses are always stored anonymised.'),
    h(
      'p',
      { class: 'hint', id: 'retention-link' },
      'How long each kind of data is kept, and proof that older data is removed: ',
      h('a', { href: `/app/sites/${site.id}/privacy#retention` }, 'Data retention'),
      '.',
    ),
    h('h3', {}, 'Excluded URLs'),
    h(
      'p',
      { class: 'hint' },
      '* matches anything; a pattern starting with / matches the path. “Session replay only” keeps traffic figures.',
    ),
    rules,
    admin
      ? h(
          'button',
          { type: 'button', class: 'secondary', onclick: () => rules.append(excludedRow(undefined, false)) },
          'Add an excluded URL',
        )
      : null,
    h('h3', {}, 'Customer pages recorded masked'),
    h(
      'label',
      { class: 'field', for: 'personal-pages' },
      h(
        'span',
        {},
        'One pattern per line, written like excluded URLs. Every text and typed value on these pages is masked ' +
          'in recordings, whatever the browser sent.',
      ),
      h(
        'textarea',
        { id: 'personal-pages', name: 'personalPages', disabled },
        (settings.personalPages || []).join('\n'),
      ),
    ),
    h('h3', {}, 'Reports: money and days'),
    h(
      'label',
      { class: 'field', for: 'reporting-currency' },
      h(
        'span',
        {},
        'Reporting currency (ISO 4217, e.g. EUR). Revenue is shown in it; orders in other currencies are ' +
          'listed apart. Empty: the currency of the first paid order.',
      ),
      h('input', {
        id: 'reporting-currency',
        name: 'reportingCurrency',
        maxlength: 3,
        pattern: '[A-Za-z]{3}',
        autocomplete: 'off',
        value: settings.reportingCurrency || '',
        disabled,
      }),
    ),
    h(
      'label',
      { class: 'field', for: 'time-zone' },
      h(
        'span',
        {},
        'Time zone (e.g. Europe/Berlin). Days run from midnight to midnight there in every figure. ' +
          'A change takes effect when the current day ends; days already counted keep theirs. Empty: UTC.',
      ),
      h('input', {
        id: 'time-zone',
        name: 'timeZone',
        list: 'time-zones',
        maxlength: 64,
        autocomplete: 'off',
        value: settings.timeZone || '',
        disabled,
      }),
    ),
    zoneList,
    h('h3', {}, 'Allowed origins'),
    h(
      'label',
      { class: 'field', for: 'origins' },
      h('span', {}, 'One origin per line, e.g. https://shop.example'),
      h('textarea', { id: 'origins', name: 'origins', disabled }, (site.allowedOrigins || []).join('\n')),
    ),
    outcome,
    admin
      ? h('button', { type: 'submit', id: 'save-settings' }, 'Save settings')
      : h('p', { class: 'hint' }, 'Viewers can read settings; owners and admins change them.'),
  );
  return h(
    'div',
    {},
    h('h1', {}, 'Site settings'),
    await installPanel(app, site),
    form,
    notificationsForm(app, site, channels, disabled),
    keysPanel(app, site, admin),
    admin ? newSitePanel(app, site) : null,
    deleteSitePanel(app, site),
  );
}

/** How often the install panel asks whether the first pageview has arrived. */
const RECEIVING_POLL_MS = 3000;

function receivingState(install) {
  return install.receiving
    ? h(
        'div',
        { class: 'notice', id: 'install-state', dataset: { receiving: 'true' } },
        h('strong', {}, 'Receiving data.'),
        ` The latest pageview arrived ${when(install.lastPageviewAt)}.`,
      )
    : h(
        'div',
        { class: 'waiting', id: 'install-state', dataset: { receiving: 'false' } },
        h('strong', {}, 'Waiting for the first event…'),
        ' Install the plugin or the snippet below and open a page of your shop; this turns green when its ' +
          'first pageview arrives.',
      );
}

/**
 * Installing the site on a shop: the state of the first pageview (polled until it arrives),
 * the WordPress plugin with the values to enter, and the loader snippet for any other site.
 */
async function installPanel(app, site) {
  const install = await app.session.json(siteApi(site, `/install`));
  const state = h('div', { role: 'status', 'aria-live': 'polite' }, receivingState(install));
  if (!install.receiving) {
    const timer = setInterval(async () => {
      if (!state.isConnected) {
        clearInterval(timer);
        return;
      }
      try {
        const now = await app.session.json(siteApi(site, `/install`));
        if (now.receiving) {
          clearInterval(timer);
          state.replaceChildren(receivingState(now));
        }
      } catch {
        /* a missed poll is retried on the next tick */
      }
    }, RECEIVING_POLL_MS);
  }
  const snippet = h('code', { id: 'loader-snippet' }, install.loaderSnippet);
  const value = (id, text) => h('span', { class: 'key', id }, text);
  const plugin = install.plugin.available
    ? h(
        'p',
        {},
        h(
          'a',
          { class: 'button', id: 'plugin-download', href: install.plugin.url, download: 'visitor-service.zip' },
          'Download the WordPress plugin',
        ),
        ' ',
        h('span', { class: 'hint' }, `visitor-service.zip, ${Math.ceil(install.plugin.bytes / 1024)} KB`),
      )
    : h(
        'p',
        { id: 'plugin-missing' },
        'The plugin archive has not been built on this server. Build it with ',
        h('code', {}, install.plugin.build),
        ' in the service’s directory; it is then offered here.',
      );
  return h(
    'section',
    { class: 'panel', 'aria-labelledby': 'install-title', id: 'install' },
    h('h2', { id: 'install-title' }, 'Install on your shop'),
    state,
    h('h3', {}, 'WordPress and WooCommerce'),
    plugin,
    h(
      'p',
      {},
      'Upload it under Plugins → Add New → Upload Plugin, activate it, then enter under Settings → Visitor Service:',
    ),
    facts([
      ['Service URL', value('install-service-url', install.serviceUrl)],
      ['Public key', value('install-public-key', install.publicKey)],
      [
        'API key',
        h(
          'span',
          {},
          value('install-api-key', install.apiKeyHint || 'hidden'),
          h(
            'span',
            { class: 'hint' },
            ' shown in full only when created or rotated (Keys, below); ' +
              'keep it in wp-config.php as VISITOR_SERVICE_API_KEY',
          ),
        ),
      ],
    ]),
    install.allowedOrigins.length
      ? null
      : h(
          'p',
          { class: 'warning' },
          'Add your shop’s address to the allowed origins below, or browsers’ data is refused.',
        ),
    h('h3', {}, 'Any other site'),
    h('p', {}, 'Paste this into every page, just before </head>:'),
    h('pre', {}, snippet),
    copyButton('Copy the snippet', install.loaderSnippet, snippet),
  );
}

function notificationsForm(app, site, channels, disabled) {
  const email = channels.email || {};
  const webhook = channels.webhook || {};
  const outcome = h('div', { role: 'status' });
  const form = h(
    'form',
    {
      class: 'panel',
      id: 'notifications-form',
      onsubmit: async (event) => {
        event.preventDefault();
        const data = new FormData(form);
        const change = {};
        if (data.get('smtpHost')) {
          change.email = {
            enabled: data.has('emailEnabled'),
            from: data.get('from'),
            smtpHost: data.get('smtpHost'),
            smtpPort: Number(data.get('smtpPort') || 587),
            smtpSecurity: data.get('smtpSecurity'),
            recipients: String(data.get('recipients'))
              .split(',')
              .map((r) => r.trim())
              .filter(Boolean),
            smtpUsername: data.get('smtpUsername') || null,
          };
          // Write-only: an empty box keeps the stored secret (the key is left out).
          if (data.get('smtpPassword')) change.email.smtpPassword = data.get('smtpPassword');
        }
        if (data.get('webhookUrl')) {
          change.webhook = { enabled: data.has('webhookEnabled'), url: data.get('webhookUrl') };
          if (data.get('webhookSecret')) change.webhook.secret = data.get('webhookSecret');
        }
        try {
          await app.session.json(siteApi(site, `/notifications`), { method: 'PUT', json: change });
          form.querySelectorAll('input[type=password]').forEach((input) => {
            input.value = '';
          });
          outcome.replaceChildren(h('div', { class: 'notice' }, 'Notification channels saved.'));
        } catch (failure) {
          outcome.replaceChildren(alertBox(describeError(failure)));
        }
      },
    },
    h('h2', {}, 'Notifications for new and re-opened errors'),
    h(
      'fieldset',
      {},
      h('legend', {}, 'E-mail'),
      check('emailEnabled', 'Send e-mails', email.enabled, null, disabled),
      text('recipients', 'Recipients (comma-separated)', (email.recipients || []).join(', '), { disabled }),
      text('from', 'From address', email.from, { disabled }),
      text('smtpHost', 'SMTP host', email.smtpHost, { disabled }),
      text('smtpPort', 'SMTP port', email.smtpPort || 587, { type: 'number', disabled }),
      h(
        'label',
        { class: 'field', for: 'smtpSecurity' },
        h('span', {}, 'Security'),
        h(
          'select',
          { id: 'smtpSecurity', name: 'smtpSecurity', disabled },
          ['starttls', 'tls', 'none'].map((value) =>
            h('option', { value, selected: (email.smtpSecurity || 'starttls') === value }, value),
          ),
        ),
      ),
      text('smtpUsername', 'SMTP user name', email.smtpUsername, { disabled }),
      text('smtpPassword', 'SMTP password', '', {
        type: 'password',
        disabled,
        placeholder: email.smtpPasswordSet ? 'Stored — type to replace' : 'Not set',
        hint: 'Write-only: never shown again once saved.',
      }),
    ),
    h(
      'fieldset',
      {},
      h('legend', {}, 'Webhook'),
      check('webhookEnabled', 'Call the webhook', webhook.enabled, null, disabled),
      text('webhookUrl', 'URL', webhook.url, { type: 'url', disabled }),
      text('webhookSecret', 'Signing secret (16+ characters)', '', {
        type: 'password',
        disabled,
        placeholder: webhook.secretSet ? 'Stored — type to replace' : 'Not set',
        hint: 'Write-only.',
      }),
    ),
    outcome,
    disabled ? null : h('button', { type: 'submit' }, 'Save channels'),
  );
  return form;
}

function keysPanel(app, site, admin) {
  const shown = h('div', { id: 'new-key' });
  return h(
    'section',
    { class: 'panel' },
    h('h2', {}, 'Keys'),
    h('p', {}, 'Public browser key: ', h('span', { class: 'key' }, site.publicKey)),
    h(
      'p',
      {},
      'API key: ',
      h('span', { class: 'key' }, site.apiKeyHint || 'hidden'),
      site.apiKeyRotatedAt ? h('span', { class: 'hint' }, ` rotated ${when(site.apiKeyRotatedAt)}`) : null,
    ),
    admin
      ? actionButton(
          'Rotate API key',
          async () => {
            const rotated = await app.session.json(siteApi(site, `/api-key/rotate`), { method: 'POST' });
            Object.assign(site, rotated.site);
            const key = h('span', { class: 'key', id: 'api-key-value' }, rotated.apiKey);
            shown.replaceChildren(
              h(
                'div',
                { class: 'notice' },
                h('p', {}, 'Your new API key. Copy it now: it will not be shown again. The old key stopped working.'),
                key,
                ' ',
                copyButton('Copy', rotated.apiKey, key),
              ),
            );
            return null;
          },
          { busy: 'Rotating…', kind: 'danger', id: 'rotate-key' },
        )
      : h('p', { class: 'hint', id: 'viewer-note' }, 'Only owners and admins can rotate keys.'),
    shown,
  );
}

/** The site's changes of time zone, each with the moment it took (or takes) effect. */
function zoneChanges(changes) {
  if (!changes.length) return null;
  return h(
    'ul',
    { class: 'hint', id: 'time-zone-changes' },
    changes.map((change) => h('li', {}, `${change.zone} from ${when(change.at)}`)),
  );
}
