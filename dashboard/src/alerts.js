// The Alerts page (issue 42): the site's alert rules with each one's last evaluation and state
// (owners and admins create, edit, mute and delete them; viewers read), each member's own
// settings (a rule muted for oneself, the digest), "Send test" on each notification channel,
// and the alerts' delivery log.
import { describeError, siteApi } from './api.js';
import { actionButton } from './controls.js';
import { alertBox, empty, h, table, when } from './dom.js';

const CHANNELS = [
  ['email', 'E-mail'],
  ['webhook', 'Signed webhook'],
  ['slack', 'Slack-compatible webhook'],
];
const CHANNEL_NAMES = Object.fromEntries(CHANNELS);

/** A table cell with its label for the phone's cards; one wrapper, so the card's grid has the
 * label in one column and everything else in the other. */
function cell(label, ...children) {
  return h('td', { 'data-label': label }, h('div', {}, ...children));
}

const STATES = {
  ok: 'OK',
  firing: 'Firing',
  notEnoughData: 'Not enough data yet',
  failed: 'Evaluation failed',
};

/** The badge each state wears (styles.css's error-status colours). */
const STATE_BADGES = { ok: 'resolved', firing: 'open', failed: 'open' };

const OUTCOMES = { delivered: 'Delivered', failed: 'Failed', retrying: 'Retrying', pending: 'Sending' };

const DIGESTS = [
  ['', 'No digest'],
  ['daily', 'Daily (yesterday)'],
  ['weekly', 'Weekly (last week)'],
];

/** The parameters each kind takes, as form fields: [param, label, hint, fallback]. */
const PARAMS = {
  checkoutErrors: [
    ['sessions', 'Sessions with an error in the last hour', 'Fires at this many.', 5],
    ['pages', 'Pages (path prefixes, comma-separated)', 'Checkout and cart by default.', '/checkout, /cart'],
  ],
  conversionDrop: [['dropPercent', 'Fall in conversion (%)', 'And a significant one, by a stated test.', 20]],
  surveyScore: [['below', 'Score under', 'An answer under this score fires.', 5]],
};

/** A rule's parameters in words, for the table. */
function paramsText(rule) {
  const p = rule.params || {};
  if (rule.kind === 'checkoutErrors') return `${p.sessions} sessions on ${(p.pages || []).join(', ')}`;
  if (rule.kind === 'conversionDrop') return `a fall of ${p.dropPercent} % or more`;
  if (rule.kind === 'surveyScore') return `a score under ${p.below}`;
  return '';
}

/** A figure's name in words ("baselineConversion" → "baseline conversion"). */
function figureName(name) {
  return name.replace(/([A-Z])/g, ' $1').toLowerCase();
}

function figureValue(value) {
  if (typeof value === 'number' && !Number.isInteger(value)) return value.toPrecision(3);
  return String(value);
}

function evaluationCell(rule) {
  const evaluation = rule.evaluation;
  if (!evaluation) return cell('Last evaluation', 'Not evaluated yet');
  const figures = Object.entries(evaluation.figures || {}).filter(
    ([, value]) => value !== null && typeof value !== 'object',
  );
  return cell(
    'Last evaluation',
    h('span', { class: `badge ${STATE_BADGES[evaluation.state] || ''}` }, STATES[evaluation.state] || evaluation.state),
    ' ',
    h('span', { class: 'hint' }, when(evaluation.at)),
    figures.length
      ? h(
          'span',
          { class: 'hint evaluation-figures' },
          ' · ',
          figures
            .slice(0, 4)
            .map(([name, value]) => `${figureName(name)} ${figureValue(value)}`)
            .join(', '),
        )
      : null,
  );
}

function ruleRow(app, site, rule, mine, canManage, refresh, edit) {
  const path = siteApi(site, `/alert-rules/${rule.id}`);
  const mutedForMe = mine.mutedRules.includes(rule.id);
  const actions = canManage
    ? cell(
        'Change',
        h(
          'div',
          { class: 'row' },
          h(
            'button',
            { type: 'button', class: 'secondary', 'aria-label': `Edit ${rule.name}`, onclick: () => edit(rule) },
            'Edit',
          ),
          actionButton(
            rule.muted ? 'Unmute' : 'Mute',
            async () => {
              await app.session.json(path, { method: 'PATCH', json: { muted: !rule.muted } });
              await refresh();
              return null;
            },
            { kind: 'secondary', ariaLabel: `${rule.muted ? 'Unmute' : 'Mute'} ${rule.name} for everyone` },
          ),
          rule.builtIn
            ? null
            : actionButton(
                'Delete',
                async () => {
                  if (!confirm(`Delete the rule “${rule.name}” and its history?`)) return null;
                  await app.session.json(path, { method: 'DELETE' });
                  await refresh();
                  return null;
                },
                { kind: 'danger', ariaLabel: `Delete ${rule.name}` },
              ),
        ),
      )
    : null;
  return h(
    'tr',
    { dataset: { rule: rule.id } },
    cell(
      'Rule',
      h('strong', {}, rule.name),
      rule.muted ? [' ', h('span', { class: 'badge' }, 'muted for everyone')] : null,
    ),
    cell(
      'Watches',
      app.kindLabels[rule.kind] || rule.kind,
      paramsText(rule) ? h('span', { class: 'hint' }, ` — ${paramsText(rule)}`) : null,
    ),
    cell('Channels', rule.channels.map((c) => CHANNEL_NAMES[c] || c).join(', ') || '—'),
    evaluationCell(rule),
    cell(
      'For you',
      actionButton(
        mutedForMe ? 'Unmute for me' : 'Mute for me',
        async () => {
          await app.session.json(siteApi(site, '/alert-preferences'), {
            method: 'PATCH',
            json: { muted: { [rule.id]: !mutedForMe } },
          });
          await refresh();
          return null;
        },
        { kind: 'secondary', ariaLabel: `${mutedForMe ? 'Unmute' : 'Mute'} for me: ${rule.name}` },
      ),
      mutedForMe ? h('span', { class: 'hint' }, 'Your e-mail is left out.') : null,
    ),
    actions,
  );
}

function paramFields(kind, params) {
  return (PARAMS[kind] || []).map(([name, label, hint, fallback]) => {
    const id = `rule-param-${name}`;
    const value = params?.[name] ?? fallback;
    return h(
      'label',
      { class: 'field', for: id },
      h('span', {}, label),
      h('input', {
        id,
        name,
        type: name === 'pages' ? 'text' : 'number',
        min: name === 'pages' ? null : name === 'below' ? 0 : 1,
        value: Array.isArray(value) ? value.join(', ') : value,
      }),
      h('span', { class: 'hint' }, hint),
    );
  });
}

function readParams(kind, form) {
  const params = {};
  for (const [name] of PARAMS[kind] || []) {
    const raw = form.querySelector(`[name="${name}"]`).value;
    params[name] =
      name === 'pages'
        ? raw
            .split(',')
            .map((page) => page.trim())
            .filter(Boolean)
        : Number(raw);
  }
  return params;
}

/**
 * The form that creates a rule, or edits `rule` when one is given; `done(message)` is called
 * after a save with what to say, or with nothing when the edit is cancelled.
 */
function ruleForm(app, site, kinds, rule, done) {
  const outcome = h('div', { role: 'status' });
  const kind = h(
    'select',
    { id: 'rule-kind', disabled: Boolean(rule) },
    kinds.map((k) => h('option', { value: k.kind, selected: k.kind === rule?.kind }, k.label)),
  );
  const name = h('input', { id: 'rule-name', required: true, maxlength: 120, value: rule?.name || '' });
  const params = h('div', {}, paramFields(rule?.kind || kinds[0].kind, rule?.params));
  kind.addEventListener('change', () => params.replaceChildren(...paramFields(kind.value)));
  const channels = h(
    'fieldset',
    { class: 'checks' },
    h('legend', {}, 'Send to'),
    CHANNELS.map(([value, label]) =>
      h(
        'label',
        { class: 'check' },
        h('input', {
          type: 'checkbox',
          name: 'channel',
          value,
          checked: rule ? rule.channels.includes(value) : value === 'email',
        }),
        h('span', {}, label),
      ),
    ),
  );
  const cooldown = h('input', {
    id: 'rule-cooldown',
    type: 'number',
    min: 0,
    max: 10080,
    value: rule?.cooldownMinutes ?? 60,
  });
  const submit = h('button', { type: 'submit' }, rule ? 'Save rule' : 'Create rule');
  const form = h(
    'form',
    {
      class: 'panel',
      id: 'rule-form',
      onsubmit: async (event) => {
        event.preventDefault();
        submit.disabled = true;
        outcome.replaceChildren();
        const body = {
          name: name.value,
          params: readParams(rule?.kind || kind.value, form),
          channels: [...form.querySelectorAll('[name="channel"]:checked')].map((box) => box.value),
          cooldownMinutes: Number(cooldown.value),
        };
        try {
          if (rule) {
            await app.session.json(siteApi(site, `/alert-rules/${rule.id}`), { method: 'PATCH', json: body });
          } else {
            await app.session.json(siteApi(site, '/alert-rules'), {
              method: 'POST',
              json: { kind: kind.value, ...body },
            });
          }
          await done(rule ? `Rule “${body.name}” saved.` : `Rule “${body.name}” created.`);
        } catch (failure) {
          outcome.replaceChildren(alertBox(describeError(failure)));
        } finally {
          submit.disabled = false;
        }
      },
    },
    h('h2', { id: 'rule-form-heading' }, rule ? `Edit “${rule.name}”` : 'New rule'),
    h('label', { class: 'field', for: 'rule-kind' }, h('span', {}, 'Watch for'), kind),
    h('label', { class: 'field', for: 'rule-name' }, h('span', {}, 'Name'), name),
    params,
    channels,
    h(
      'label',
      { class: 'field', for: 'rule-cooldown' },
      h('span', {}, 'Cool-down (minutes)'),
      cooldown,
      h('span', { class: 'hint' }, 'No new alert about the same thing sooner than this after the last one.'),
    ),
    h(
      'div',
      { class: 'row' },
      submit,
      rule ? h('button', { type: 'button', class: 'secondary', onclick: () => done() }, 'Cancel') : null,
    ),
    outcome,
  );
  return form;
}

function channelsPanel(app, site, channels, canManage) {
  return h(
    'section',
    { class: 'panel', 'aria-labelledby': 'channels-heading' },
    h('h2', { id: 'channels-heading' }, 'Channels'),
    h(
      'ul',
      { class: 'plain', id: 'alert-channels' },
      CHANNELS.map(([channel, label]) => {
        const enabled = Boolean(channels[channel]?.enabled);
        return h(
          'li',
          { dataset: { channel } },
          h('strong', {}, label),
          ' ',
          h('span', { class: 'hint' }, enabled ? 'set up' : 'not set up'),
          enabled && canManage
            ? actionButton(
                'Send test',
                async () => {
                  const sent = await app.session.json(siteApi(site, `/notifications/${channel}/test`), {
                    method: 'POST',
                  });
                  const status = sent.responseStatus ? ` (HTTP ${sent.responseStatus})` : '';
                  return sent.status === 'delivered'
                    ? `Test delivered${status}.`
                    : alertBox(`Test failed${status}: ${sent.lastError || 'no answer'}`);
                },
                { kind: 'secondary', ariaLabel: `Send test on ${label}`, busy: 'Sending…' },
              )
            : null,
        );
      }),
    ),
    h(
      'p',
      { class: 'hint' },
      'Channels are set up on the ',
      h('a', { href: `/app/sites/${site.id}/settings` }, 'Settings'),
      ' page.',
    ),
  );
}

function digestPanel(app, site, mine) {
  const select = h(
    'select',
    { id: 'digest-period' },
    DIGESTS.map(([value, label]) => h('option', { value, selected: (mine.digest || '') === value }, label)),
  );
  return h(
    'section',
    { class: 'panel', 'aria-labelledby': 'digest-heading' },
    h('h2', { id: 'digest-heading' }, 'Your digest'),
    h(
      'p',
      { class: 'hint' },
      "Visitors, orders, revenue and conversion against the period before, the errors with the most revenue at risk and the funnel's biggest drop-off, by e-mail to you, in the site's time zone.",
    ),
    h('label', { class: 'field', for: 'digest-period' }, h('span', {}, 'Send me'), select),
    actionButton('Save digest', async () => {
      await app.session.json(siteApi(site, '/alert-preferences'), {
        method: 'PATCH',
        json: { digest: select.value || null },
      });
      return select.value ? 'Digest saved.' : 'No digest will be sent.';
    }),
  );
}

function deliveriesPanel(deliveries, ruleNames) {
  return h(
    'section',
    { class: 'panel', 'aria-labelledby': 'deliveries-heading' },
    h('h2', { id: 'deliveries-heading' }, 'Delivery log'),
    deliveries.length
      ? table({
          id: 'alert-deliveries',
          caption: 'Every alert sent, newest first, kept 90 days.',
          wrap: { class: 'table-wrap alerts-wrap', tabindex: '0', 'aria-label': 'Delivery log' },
          head: ['Time', 'Rule', 'Channel', 'Outcome', 'Attempts', 'Response'],
          rows: deliveries.map((d) =>
            h(
              'tr',
              { dataset: { delivery: d.id } },
              cell('Time', when(d.createdAt)),
              cell('Rule', ruleNames[d.ruleId] || 'a deleted rule'),
              cell('Channel', CHANNEL_NAMES[d.channel] || d.channel),
              cell(
                'Outcome',
                `${OUTCOMES[d.status] || d.status}${d.event === 'alert.resolved' ? ' (resolved)' : ''}`,
                d.lastError ? h('span', { class: 'hint' }, ` — ${d.lastError}`) : null,
              ),
              cell('Attempts', String(d.attempts)),
              cell('Response', d.responseStatus ? `HTTP ${d.responseStatus}` : '—'),
            ),
          ),
        })
      : empty('Nothing sent yet', h('p', { class: 'hint' }, 'Alerts appear here once a rule fires.')),
  );
}

export async function alertsPage(app, site) {
  const canManage = app.isAdmin(site);
  const body = h('div', {});
  const said = h('div', { role: 'status', id: 'alerts-said' });
  let data = null;
  let editing = null;

  function draw() {
    const { listed, mine, deliveries, channels } = data;
    const ruleNames = Object.fromEntries(listed.rules.map((rule) => [rule.id, rule.name]));
    const edit = (rule) => {
      editing = rule;
      draw();
      document.getElementById('rule-name')?.focus();
    };
    body.replaceChildren(
      h(
        'section',
        { class: 'panel', 'aria-labelledby': 'rules-heading' },
        h('h2', { id: 'rules-heading' }, 'Rules'),
        listed.rules.length
          ? table({
              id: 'alert-rules',
              wrap: { class: 'table-wrap alerts-wrap', tabindex: '0', 'aria-label': 'Alert rules' },
              head: ['Rule', 'Watches', 'Channels', 'Last evaluation', 'For you', canManage ? 'Change' : null].filter(
                (cell) => cell !== null,
              ),
              rows: listed.rules.map((rule) => ruleRow(app, site, rule, mine, canManage, refresh, edit)),
            })
          : empty(
              'No alert rules yet',
              h(
                'p',
                { class: 'hint' },
                canManage
                  ? 'Create one below to hear when conversion falls, orders stop or checkout breaks.'
                  : 'An owner or admin can create them.',
              ),
            ),
      ),
      canManage
        ? ruleForm(app, site, listed.kinds, editing, async (message) => {
            editing = null;
            if (message) await refresh();
            else draw();
            said.replaceChildren(message ? h('p', { class: 'notice' }, message) : '');
          })
        : h('p', { class: 'hint', id: 'viewer-note' }, 'Only owners and admins create and change rules.'),
      channelsPanel(app, site, channels, canManage),
      digestPanel(app, site, mine),
      deliveriesPanel(deliveries.deliveries, ruleNames),
    );
  }

  async function refresh() {
    const [listed, mine, deliveries, channels] = await Promise.all([
      app.session.json(siteApi(site, '/alert-rules')),
      app.session.json(siteApi(site, '/alert-preferences')),
      app.session.json(siteApi(site, '/alert-deliveries')),
      app.session.json(siteApi(site, '/notifications')),
    ]);
    app.kindLabels = Object.fromEntries(listed.kinds.map((k) => [k.kind, k.label]));
    data = { listed, mine, deliveries, channels };
    draw();
  }

  await refresh();
  return h('div', {}, h('h1', {}, 'Alerts'), said, body);
}
