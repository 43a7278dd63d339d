// A site's life from the Settings page: adding another site (name, origins, time zone; its API
// key shown once) and deleting this one (owners only: an export offered first, its name typed
// to confirm).
import { describeError, siteApi } from './api.js';
import { copyButton, csvDownload, download, submitWith } from './controls.js';
import { alertBox, h } from './dom.js';

function browserTimeZone() {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

/** The time zones the browser knows, offered as a list beside a zone field (`list: 'time-zones'`:
 * the settings form's field uses it too). */
function zoneChoices() {
  const zones = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];
  return h(
    'datalist',
    { id: 'time-zones' },
    ['UTC', ...zones].map((zone) => h('option', { value: zone })),
  );
}

/** The form that adds a site to the organization; the new site's keys are shown once. */
export function newSitePanel(app, site) {
  const outcome = h('div', { role: 'status' });
  const name = h('input', { id: 'new-site-name', name: 'name', required: true, maxlength: 200 });
  const origins = h('textarea', { id: 'new-site-origins', name: 'origins' });
  const zone = h('input', {
    id: 'new-site-zone',
    name: 'timeZone',
    list: 'time-zones',
    value: browserTimeZone(),
    required: true,
  });
  const submit = h('button', { type: 'submit', id: 'create-site' }, 'Add site');
  const form = h(
    'form',
    {
      class: 'panel',
      id: 'new-site',
      onsubmit: submitWith(submit, outcome, async () => {
        const created = await app.session.json('/api/v1/sites', {
          method: 'POST',
          json: {
            name: name.value.trim(),
            organizationId: site.organizationId,
            allowedOrigins: origins.value
              .split('\n')
              .map((line) => line.trim())
              .filter(Boolean),
            settings: { timeZone: zone.value.trim() },
          },
        });
        app.sites.push(created.site);
        const key = h('span', { class: 'key', id: 'new-site-key' }, created.apiKey);
        outcome.replaceChildren(
          h(
            'div',
            { class: 'notice' },
            h('p', {}, `${created.site.name} is added. Its API key, shown only now, for the shop’s server:`),
            key,
            ' ',
            copyButton('Copy the API key', created.apiKey, key),
            h(
              'p',
              {},
              h(
                'a',
                { href: `/app/sites/${created.id}/settings` },
                `Install ${created.site.name}: its snippet and plugin settings`,
              ),
            ),
          ),
        );
        name.value = origins.value = '';
      }),
    },
    h('h2', {}, 'Add a site'),
    h('label', { class: 'field', for: 'new-site-name' }, h('span', {}, 'Name'), name),
    h(
      'label',
      { class: 'field', for: 'new-site-origins' },
      h('span', {}, 'Allowed origins, one per line, e.g. https://shop.example'),
      origins,
    ),
    h(
      'label',
      { class: 'field', for: 'new-site-zone' },
      h('span', {}, 'Time zone (an IANA name such as Europe/Berlin): where its days begin'),
      zone,
    ),
    zoneChoices(),
    submit,
    outcome,
  );
  return form;
}

/** Deleting this site, for owners: the exports first, then its name typed to confirm. */
export function deleteSitePanel(app, site) {
  if (app.role(site) !== 'owner') return null;
  const outcome = h('div', { role: 'status' });
  const typed = h('input', { id: 'delete-site-name', autocomplete: 'off' });
  const submit = h(
    'button',
    { type: 'submit', class: 'danger', id: 'delete-site', disabled: true },
    'Delete this site and all its data',
  );
  typed.addEventListener('input', () => {
    submit.disabled = typed.value !== site.name;
  });
  return h(
    'form',
    {
      class: 'panel',
      id: 'delete-site-form',
      onsubmit: async (event) => {
        event.preventDefault();
        submit.disabled = true;
        outcome.replaceChildren();
        try {
          await app.session.json(siteApi(site, '/deletion'), { method: 'POST', json: { confirmName: typed.value } });
          app.sites = app.sites.filter((other) => other.id !== site.id);
          app.go(`/app/sites/${app.sites[0]?.id || 'none'}`);
        } catch (failure) {
          outcome.replaceChildren(alertBox(describeError(failure)));
          submit.disabled = false;
        }
      },
    },
    h('h2', {}, 'Delete this site'),
    h(
      'p',
      {},
      'Every visitor, recording, order, error and figure of the site goes for good, and its keys stop ' +
        'working at once. Download what you want to keep first:',
    ),
    h(
      'div',
      { class: 'row' },
      ['orders', 'leads', 'errors', 'recordings'].map((kind) => csvDownload(app, site, kind)),
      download(
        app,
        '/auth/me/export.json',
        'account-export.json',
        'Download the account export',
        'download-account-export',
      ),
    ),
    h(
      'label',
      { class: 'field', for: 'delete-site-name' },
      h('span', {}, `Type the site’s name, ${site.name}, to confirm`),
      typed,
    ),
    submit,
    outcome,
  );
}
