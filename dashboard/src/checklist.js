// The first-run checklist on an empty site's overview (issue 43 point 4): the snippet or plugin
// installed, a first pageview, a first recording, a first order (for shops), each ticked as
// data arrives, and why items of the site were dropped lately (GET .../setup-status).
import { siteApi } from './api.js';
import { h, when } from './dom.js';

const STEPS = {
  installed: ['Snippet or plugin installed', 'Something arrived from your shop.'],
  pageview: ['First pageview', 'A visit was counted.'],
  recording: ['First recording', 'A session replay was stored.'],
  order: ['First order', 'An order arrived from your shop.'],
};

/** What each drop reason means, and what to do about it. */
const REASONS = {
  bot: 'from a crawler or bot: these are never counted as visitors.',
  headless_browser:
    'from a headless browser (a test script or a preview): open your shop in an ordinary browser to test.',
  origin_not_allowed:
    'from a page whose address is not among the allowed origins: add it under Settings, Allowed origins.',
  consent_missing:
    'without consent, which this site requires: accept the consent banner (or send the consent) to be counted.',
  gpc: 'from a browser sending Global Privacy Control, which is always honoured.',
  excluded_url: 'from pages excluded from collection in the site settings.',
};

function stepItem(step) {
  const [title, doneText] = STEPS[step.step];
  const label = step.required ? title : `${title} (shops only)`;
  const state = step.done ? 'Done' : 'Waiting';
  const detail = step.done
    ? step.lastAt
      ? `${doneText} Last ${when(step.lastAt)}.`
      : doneText
    : step.step === 'recording' && !step.required
      ? 'Recordings are off for this site.'
      : 'Nothing yet.';
  return h(
    'li',
    {
      class: `checklist-step ${step.done ? 'done' : 'waiting'}`,
      dataset: { step: step.step, done: String(step.done) },
    },
    h('span', { class: 'checklist-mark', 'aria-hidden': 'true' }, step.done ? '✓' : '○'),
    h('span', {}, h('strong', {}, label), ` (${state}). `, detail),
  );
}

function dropsPart(status) {
  if (!status.drops.length) return null;
  return h(
    'div',
    { id: 'checklist-drops' },
    h('h3', {}, `Not counted in the last ${status.dropDays} days`),
    h(
      'ul',
      {},
      status.drops.map((drop) =>
        h(
          'li',
          { dataset: { reason: drop.reason } },
          h('strong', {}, drop.count.toLocaleString()),
          ` ${drop.count === 1 ? 'item' : 'items'} ${REASONS[drop.reason] || `dropped (${drop.reason}).`}`,
          ` Last ${when(drop.lastAt)}.`,
        ),
      ),
    ),
  );
}

/** The checklist panel for `site`, or null once the site is set up. */
export async function setupChecklist(app, site) {
  const status = await app.session.json(siteApi(site, '/setup-status'));
  if (status.setUp) return null;
  return h(
    'section',
    { class: 'panel checklist', id: 'setup-checklist', 'aria-labelledby': 'checklist-title' },
    h('h2', { id: 'checklist-title' }, 'Getting started'),
    h(
      'p',
      { class: 'hint' },
      'Each step is ticked as its first data arrives; reload to check again. The snippet and the plugin are under ',
      h('a', { href: `/app/sites/${site.id}/settings#install` }, 'Settings, Install on your shop'),
      '.',
    ),
    h('ol', { class: 'checklist-steps' }, status.steps.map(stepItem)),
    dropsPart(status),
  );
}
