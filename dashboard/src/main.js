// The dashboard: sign-in, the shell (site switcher, tabs, live state) and a path router over the
// page modules.
import './styles.css';
import { accountPage, forgotPage, resetPage, signIn } from './account.js';
import { alertsPage } from './alerts.js';
import { createSession, describeError } from './api.js';
import { openLive } from './live.js';
import { alertBox, h } from './dom.js';
import { errorsPage } from './errors.js';
import { funnelsPage } from './funnels.js';
import { heatmapsPage } from './heatmaps.js';
import { leadsPage } from './leads.js';
import { ordersPage } from './orders.js';
import { overviewPage } from './overview.js';
import { privacyPage } from './privacy.js';
import { recordingsPage } from './recordings.js';
import { sessionsPage } from './sessions.js';
import { settingsPage } from './settings.js';
import { surveysPage } from './surveys.js';
import { invitePage, teamPage } from './team.js';
import { visitorsPage } from './visitors.js';

/**
 * The pages by their section of the address (/app/sites/{site}/{section}/{item}): one module
 * each, every one an async (app, site, item, query) -> Element that reads only the JSON API;
 * admin actions are left out for viewers (the server refuses them anyway).
 */
const PAGES = {
  '': overviewPage,
  visitors: visitorsPage,
  errors: errorsPage,
  leads: leadsPage,
  orders: ordersPage,
  sessions: sessionsPage,
  recordings: recordingsPage,
  settings: settingsPage,
  privacy: privacyPage,
  heatmaps: heatmapsPage,
  surveys: surveysPage,
  funnels: funnelsPage,
  team: teamPage,
  alerts: alertsPage,
  account: accountPage,
};

const root = document.getElementById('app');

function createApp() {
  const app = {
    session: null,
    me: null,
    sites: [],
    live: null,
    liveState: 'offline',
    feed: [],
    listeners: new Set(),
    site() {
      const id = location.pathname.split('/')[3];
      return app.sites.find((site) => site.id === id) || app.sites[0] || null;
    },
    role(site = app.site()) {
      return app.me?.organizations.find((org) => org.id === site?.organizationId)?.role || 'viewer';
    },
    isAdmin(site) {
      return ['owner', 'admin'].includes(app.role(site));
    },
    go(path) {
      history.pushState({}, '', path);
      render();
    },
    /** Pages register to hear live events and reconnects while they are shown. */
    listen(listener) {
      app.listeners.add(listener);
    },
  };
  return app;
}

const app = createApp();

app.session = createSession({
  onSignedOut: () => signedOut(),
  onToken: (token) => app.live?.reauthenticate(token),
});

function signedOut() {
  app.live?.close();
  app.live = null;
  app.me = null;
  app.feed = [];
  if (!location.pathname.startsWith('/app/login')) history.replaceState({}, '', '/app/login');
  render();
}

function loginPage(message) {
  const error = h('div');
  if (message) error.append(alertBox(message));
  const email = h('input', { id: 'email', type: 'email', name: 'email', autocomplete: 'username', required: true });
  const password = h('input', {
    id: 'password',
    type: 'password',
    name: 'password',
    autocomplete: 'current-password',
    required: true,
  });
  const submit = h('button', { type: 'submit' }, 'Sign in');
  const form = h(
    'form',
    {
      class: 'panel login',
      onsubmit: async (event) => {
        event.preventDefault();
        submit.disabled = true;
        submit.textContent = 'Signing in…';
        error.replaceChildren();
        try {
          await signIn(app.session, email.value, password.value, form.parentElement);
          await start();
          app.go(`/app/sites/${app.sites[0]?.id || 'none'}`);
        } catch (failure) {
          error.replaceChildren(
            alertBox(failure.status === 401 ? 'The e-mail or password is not right.' : describeError(failure)),
          );
          submit.disabled = false;
          submit.textContent = 'Sign in';
        }
      },
    },
    h('h1', {}, 'Sign in to Visitor Service'),
    error,
    h('label', { class: 'field', for: 'email' }, h('span', {}, 'E-mail'), email),
    h('label', { class: 'field', for: 'password' }, h('span', {}, 'Password'), password),
    submit,
    h('p', {}, h('a', { href: '/app/forgot', id: 'forgot' }, 'Forgot your password?')),
    demoHint(),
  );
  return h('main', { id: 'main' }, form);
}

/** Only the embedded demo's shell names its credentials file; production shows no hint. */
function demoHint() {
  const file = document.body.dataset.demoFile;
  if (!file) return null;
  return h(
    'p',
    { class: 'hint', id: 'demo-hint' },
    'Trying the demo? Sign in with the e-mail and password ',
    h('code', {}, 'make run'),
    ' printed; they are also saved in ',
    h('code', {}, file),
    '.',
  );
}

async function start() {
  [app.me, app.sites] = await Promise.all([app.session.json('/auth/me'), app.session.json('/api/v1/sites')]);
  app.live?.close();
  if (app.sites.length) {
    app.live = openLive({
      getToken: () => app.session.token,
      siteIds: app.sites.map((site) => site.id),
      onEvent: (event) => {
        app.feed.unshift({ ...event, fresh: true });
        app.feed.length = Math.min(app.feed.length, 100);
        for (const listener of app.listeners) listener.onEvent?.(event);
      },
      onReconnect: () => {
        for (const listener of app.listeners) listener.onReconnect?.();
      },
      onState: (state) => {
        app.liveState = state;
        const badge = document.getElementById('live-state');
        if (badge) {
          badge.textContent = state === 'live' ? 'Live' : state === 'connecting' ? 'Connecting…' : 'Offline';
          badge.className = `live-state ${state === 'live' ? 'on' : ''}`;
        }
      },
    });
  }
}

const TABS = [
  ['', 'Overview'],
  ['visitors', 'Visitors'],
  ['errors', 'Errors'],
  ['leads', 'Leads'],
  ['orders', 'Orders'],
  ['sessions', 'Sessions'],
  ['recordings', 'Recordings'],
  ['funnels', 'Funnels'],
  ['heatmaps', 'Heatmaps'],
  ['surveys', 'Surveys'],
  ['settings', 'Settings'],
  ['alerts', 'Alerts'],
  ['privacy', 'Privacy & exports'],
  ['team', 'Team'],
];

function shell(site, section, content) {
  const switcher = h(
    'select',
    { id: 'site-switcher', onchange: (event) => app.go(`/app/sites/${event.target.value}`) },
    app.sites.map((s) => h('option', { value: s.id, selected: s.id === site?.id }, s.name)),
  );
  const state = app.liveState;
  return [
    h(
      'header',
      { class: 'top' },
      h('span', { class: 'brand' }, 'Visitor Service'),
      h('label', { for: 'site-switcher' }, h('span', { class: 'label-text' }, 'Site '), switcher),
      h(
        'span',
        { id: 'live-state', class: `live-state ${state === 'live' ? 'on' : ''}`, role: 'status' },
        state === 'live' ? 'Live' : state === 'connecting' ? 'Connecting…' : 'Offline',
      ),
      h('span', { class: 'hint who' }, `${app.me.email} · ${app.role(site)}`),
      h(
        'a',
        {
          href: `/app/sites/${site.id}/account`,
          id: 'account-link',
          'aria-current': section === 'account' ? 'page' : null,
        },
        'Account',
      ),
      h(
        'button',
        {
          class: 'secondary',
          id: 'logout',
          onclick: async () => {
            await app.session.logout().catch(() => signedOut());
          },
        },
        'Sign out',
      ),
    ),
    scrollingTabs(
      h(
        'nav',
        { class: 'tabs', 'aria-label': 'Sections' },
        TABS.map(([path, label]) =>
          h(
            'a',
            {
              href: `/app/sites/${site.id}${path ? `/${path}` : ''}`,
              'aria-current': section === path ? 'page' : null,
            },
            label,
          ),
        ),
      ),
    ),
    h('main', { id: 'main', tabindex: '-1' }, content),
  ];
}

/**
 * On a narrow screen the tabs are one scrolling row: the current tab is scrolled into sight,
 * and `more-left` / `more-right` say on which side tabs are hidden (styles.css fades that side).
 */
function scrollingTabs(nav) {
  const hint = () => {
    nav.classList.toggle('more-left', nav.scrollLeft > 1);
    nav.classList.toggle('more-right', nav.scrollLeft + nav.clientWidth < nav.scrollWidth - 1);
  };
  nav.addEventListener('scroll', hint, { passive: true });
  new ResizeObserver(() => {
    const current = nav.querySelector('[aria-current="page"]');
    if (current && nav.scrollWidth > nav.clientWidth) {
      nav.scrollLeft = Math.max(0, current.offsetLeft + current.offsetWidth - nav.clientWidth + 24);
    }
    hint();
  }).observe(nav);
  return nav;
}

async function render() {
  app.listeners.clear();
  const parts = location.pathname.split('/').filter(Boolean); // app, sites, id, section, item
  if (parts[1] === 'reset') {
    root.replaceChildren(resetPage());
    return;
  }
  if (parts[1] === 'forgot') {
    root.replaceChildren(forgotPage());
    return;
  }
  if (parts[1] === 'invite') {
    root.replaceChildren(
      invitePage(async (answer, email, password) => {
        // The accept's own token pair, unless the organization asks for a second factor first.
        if (answer.secondStep) await signIn(app.session, email, password, root.firstElementChild);
        else app.session.adopt(answer);
        await start();
        app.go(`/app/sites/${app.sites[0]?.id || 'none'}`);
      }),
    );
    return;
  }
  if (!app.me || parts[1] === 'login') {
    root.replaceChildren(loginPage());
    return;
  }
  const site = app.site();
  if (!site) {
    root.replaceChildren(
      ...shell(
        { id: 'none' },
        '',
        h(
          'div',
          { class: 'panel' },
          h('h1', {}, 'No sites yet'),
          h('p', {}, 'Ask an owner of your organization to add a site.'),
        ),
      ),
    );
    return;
  }
  const section = parts[3] || '';
  const item = parts[4] ? decodeURIComponent(parts[4]) : null;
  const page = PAGES[section] || PAGES[''];
  const content = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
  root.replaceChildren(...shell(site, section, content));
  try {
    content.replaceChildren(await page(app, site, item, new URLSearchParams(location.search)));
  } catch (failure) {
    content.replaceChildren(alertBox(describeError(failure)));
  }
}

// Links inside the app navigate without reloading, so the live socket stays open.
document.addEventListener('click', (event) => {
  const link = event.target.closest('a[href^="/app/"]');
  if (!link || event.ctrlKey || event.metaKey || event.shiftKey || link.hasAttribute('download')) return;
  event.preventDefault();
  app.go(link.getAttribute('href'));
});
window.addEventListener('popstate', render);

(async () => {
  try {
    // The HttpOnly cookie signs a returning user in silently; a first visit goes to sign-in.
    if (!(await app.session.resume())) throw new Error('not signed in');
    await start();
    if (!location.pathname.startsWith('/app/sites/')) {
      history.replaceState({}, '', `/app/sites/${app.sites[0]?.id || 'none'}`);
    }
  } catch {
    // An invitation's page is for someone not signed in yet.
    if (!/^\/app\/(invite|reset|forgot)/.test(location.pathname)) history.replaceState({}, '', '/app/login');
  }
  render();
})();
