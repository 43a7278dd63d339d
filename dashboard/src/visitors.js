// The visitors pages: the list, searched and filtered in the URL, and one visitor's profile
// (identity, location and device, session timeline with replays, what they said in chats and
// surveys, recent activity, errors, recordings, leads, orders, linked profiles) with the
// data-subject actions: export, restriction, objection and erasure with its receipt in the
// server's words. A visitor is named by the server's label (a lead's name, else a short
// pseudonym), with the full id on hover.
import { describeError, siteApi } from './api.js';
import { actionButton, download } from './controls.js';
import { alertBox, empty, facts, h, pagePath, progress, seconds, table, when } from './dom.js';
import { DEVICES, choice, field, filterForm, listQuery, pager, yesNo } from './filters.js';
import { replayControl } from './replay.js';
import { visitorOrders } from './orders.js';
import { segmentChoice } from './sessions.js';

function visitorName(visitor) {
  return visitor.visitorLabel || visitor.displayName || visitor.visitorId;
}

/** A link to a visitor's profile, named by their label, the full id on hover. */
function visitorLink(site, visitor) {
  return h(
    'a',
    { href: `/app/sites/${site.id}/visitors/${encodeURIComponent(visitor.visitorId)}`, title: visitor.visitorId },
    visitorName(visitor),
  );
}

/** The visitor id, selectable, with a button that copies it (or selects it to copy by hand). */
function visitorIdControl(visitorId) {
  const code = h('code', { id: 'visitor-id' }, visitorId);
  const status = h('span', { class: 'hint', role: 'status' });
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(visitorId);
      status.textContent = 'Copied.';
    } catch {
      // No clipboard (an insecure origin, or permission refused): select it for Ctrl+C.
      window.getSelection().selectAllChildren(code);
      status.textContent = 'Selected: press Ctrl+C to copy.';
    }
  };
  return h(
    'span',
    { class: 'row' },
    code,
    h('button', { type: 'button', class: 'secondary', id: 'copy-visitor-id', onclick: copy }, 'Copy id'),
    status,
  );
}

/** The visitors list's filters, each a query parameter of the page and of the API. */
const VISITOR_FILTERS = [
  'q',
  'country',
  'device',
  'loggedIn',
  'hasLead',
  'hasError',
  'firstSeenFrom',
  'firstSeenTo',
  'lastSeenFrom',
  'lastSeenTo',
  'segment',
];

export async function visitorsPage(app, site, item, query) {
  if (item) return visitorProfile(app, site, item);
  const { filters, cursor, params } = listQuery(query, VISITOR_FILTERS);
  const page = await app.session.json(siteApi(site, `/visitors?${params}`));
  const path = `/app/sites/${site.id}/visitors`;
  const form = filterForm(app, {
    id: 'visitor-filters',
    label: 'Search and filter visitors',
    path,
    submit: 'Search',
    controls: [
      await segmentChoice(app, site, query.get('segment')),
      field('q', 'Search visitors', query.get('q'), {
        type: 'search',
        placeholder: 'Name, e-mail or visitor id',
        maxlength: 200,
      }),
      field('country', 'Country code', query.get('country'), {
        placeholder: 'DE',
        maxlength: 2,
        pattern: '[A-Za-z]{2}',
      }),
      choice('device', 'Device', DEVICES, query.get('device')),
      yesNo('loggedIn', 'Logged in', query.get('loggedIn')),
      yesNo('hasLead', 'Left a lead', query.get('hasLead')),
      yesNo('hasError', 'Met an error', query.get('hasError')),
      field('firstSeenFrom', 'First seen from', query.get('firstSeenFrom'), { type: 'date' }),
      field('firstSeenTo', 'First seen to', query.get('firstSeenTo'), { type: 'date' }),
      field('lastSeenFrom', 'Last seen from', query.get('lastSeenFrom'), { type: 'date' }),
      field('lastSeenTo', 'Last seen to', query.get('lastSeenTo'), { type: 'date' }),
    ],
  });
  const rows = page.items.map((visitor) =>
    h(
      'tr',
      { dataset: { visitorId: visitor.visitorId } },
      h(
        'td',
        {},
        visitorLink(site, visitor),
        visitor.counts?.leads ? [' ', h('span', { class: 'badge lead' }, 'lead')] : null,
        visitor.hasError ? [' ', h('span', { class: 'badge error' }, 'error')] : null,
        visitor.wpUserId ? [' ', h('span', { class: 'badge' }, 'logged in')] : null,
      ),
      h('td', { class: 'optional' }, (visitor.emails || []).join(', ') || '—'),
      h('td', {}, visitor.country || '—'),
      h('td', { class: 'optional' }, visitor.device?.type || '—'),
      h('td', { class: 'optional' }, String(visitor.counts?.pageviews || 0)),
      h('td', {}, when(visitor.lastSeen)),
    ),
  );
  return h(
    'div',
    {},
    h('h1', {}, 'Visitors'),
    form,
    h(
      'div',
      { class: 'panel' },
      rows.length
        ? table({
            id: 'visitors',
            head: [
              'Visitor',
              ['E-mail', { class: 'optional' }],
              'Country',
              ['Device', { class: 'optional' }],
              ['Pageviews', { class: 'optional' }],
              'Last seen',
            ],
            rows,
          })
        : empty(
            filters.size ? `No visitor matches${query.get('q') ? ` “${query.get('q')}”` : ''}` : 'No visitors yet',
            filters.size
              ? 'Try part of a name or e-mail, the start of a visitor id, or fewer filters.'
              : 'Visitors appear once the loader or the plugin sends their first pageview.',
          ),
      searchedNote(page),
      pager(path, filters, cursor, page.nextCursor),
    ),
  );
}

/** Where a filtered page stopped searching, when it stopped early. */
function searchedNote(page) {
  return page.searchedTo
    ? h(
        'p',
        { class: 'hint', id: 'searched-to' },
        `Searched back to ${when(page.searchedTo)}; use Next page to search further back.`,
      )
    : null;
}

async function visitorProfile(app, site, visitorId) {
  const base = siteApi(site, `/visitors/${encodeURIComponent(visitorId)}`);
  const [visitor, sessions] = await Promise.all([
    app.session.json(base),
    app.session.json(`/dashboard/visitors/${site.id}:${encodeURIComponent(visitorId)}/sessions`),
  ]);
  const admin = app.isAdmin(site);
  // Kept as a node so the objection buttons can show the new state without a reload.
  const objected = h('span', {}, visitor.objected ? 'yes' : 'no');
  const device = visitor.device || {};
  const location = visitor.location || {};
  const sections = [
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'Identity'),
      facts([
        ['Name', visitorName(visitor)],
        ['E-mail', (visitor.emails || []).join(', ') || null],
        ['Visitor id', visitorIdControl(visitor.visitorId)],
        ['Shop user id', visitor.wpUserId],
        ['First seen', when(visitor.firstSeen)],
        ['Last seen', when(visitor.lastSeen)],
        ['Objected', objected],
      ]),
    ),
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'Location and device'),
      facts([
        ['Country', location.country || visitor.country],
        ['Time zone', location.timeZone],
        ['Browser', device.browser],
        ['System', device.os],
        ['Device', device.deviceType || device.type],
        ['Screen', device.screen],
        ['Language', device.language],
      ]),
    ),
  ];
  const activity = (visitor.recent || []).slice(0, 12).map((entry) => activityItem(site, visitor, entry));
  const errors = (visitor.errors || []).map((error) =>
    h(
      'li',
      {},
      h('a', { href: `/app/sites/${site.id}/errors/${error.errorId}` }, error.what),
      ' ',
      h('span', { class: 'hint' }, when(error.when)),
    ),
  );
  const leads = (visitor.leads || []).map((lead) =>
    h('li', {}, `${lead.name || ''} <${lead.email}>`, ' ', h('span', { class: 'hint' }, when(lead.createdAt))),
  );
  const linked = (visitor.linkedProfiles || []).map((other) => h('li', {}, visitorLink(site, other)));
  const said = (visitor.said || []).map(saidItem);
  const list = (items, title, hint) => (items.length ? h('ul', {}, items) : empty(title, hint));
  return h(
    'div',
    {},
    h('p', {}, h('a', { href: `/app/sites/${site.id}/visitors` }, '← All visitors')),
    h('h1', { id: 'visitor-name', title: visitor.visitorId }, visitorName(visitor)),
    h('div', { class: 'grid' }, sections),
    h(
      'section',
      { class: 'panel', 'aria-labelledby': 'sessions-title' },
      h('h2', { id: 'sessions-title' }, 'Session timeline'),
      sessionTimeline(app, site, sessions),
    ),
    h(
      'section',
      { class: 'panel', 'aria-labelledby': 'said-title' },
      h('h2', { id: 'said-title' }, 'What they said'),
      said.length
        ? h('ol', { class: 'timeline', id: 'said' }, said)
        : empty('Nothing said', 'Their chat messages and survey answers appear here, newest first.'),
    ),
    h(
      'section',
      { class: 'panel', 'aria-labelledby': 'orders-title' },
      h('h2', { id: 'orders-title' }, `Orders (${(visitor.orders || []).length})`),
      visitorOrders(visitor.orders || []),
    ),
    h(
      'div',
      { class: 'grid' },
      h('section', { class: 'panel' }, h('h2', {}, 'Recent activity'), list(activity, 'No activity recorded')),
      h(
        'section',
        { class: 'panel' },
        h('h2', {}, 'Errors hit'),
        list(errors, 'No errors', 'This visitor met no errors.'),
      ),
      h(
        'section',
        { class: 'panel' },
        h('h2', {}, `Recordings (${(visitor.recordings || []).length})`),
        list(
          (visitor.recordings || []).map((r) =>
            h('li', {}, `${when(r.startedAt)} · ${seconds(r.duration)} · ${r.pageUrl || ''}`),
          ),
          'No recordings',
        ),
      ),
      h('section', { class: 'panel' }, h('h2', {}, 'Leads'), list(leads, 'No leads')),
      h(
        'section',
        { class: 'panel' },
        h('h2', {}, 'Linked profiles'),
        list(linked, 'No linked profiles', 'Profiles of the same shop user appear here.'),
      ),
    ),
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'Data-subject requests'),
      h('p', { class: 'hint' }, 'Each action is logged with its due date under Privacy & exports.'),
      admin
        ? subjectActions(app, site, visitor, objected)
        : h(
            'p',
            { class: 'hint', id: 'viewer-note' },
            'Your role (viewer) can read this profile; exports, erasure, restriction and objection need an ' +
              'owner or admin.',
          ),
    ),
  );
}

/**
 * One entry of a visitor's recent activity in words: the page viewed, the lead left, the
 * session recorded. Leads and recordings are looked up in the profile (the entry holds ids).
 */
function activityItem(site, visitor, entry) {
  const lead = entry.kind === 'lead' ? (visitor.leads || []).find((l) => l.id === entry.leadId) : null;
  const recording =
    entry.kind === 'recording' ? (visitor.recordings || []).find((r) => r.id === entry.recordingId) : null;
  const describe = {
    pageview: () => [
      'Viewed ',
      /^https?:\/\//.test(entry.url || '')
        ? h('a', { href: entry.url, rel: 'noreferrer noopener', target: '_blank' }, entry.title || pagePath(entry.url))
        : entry.title || pagePath(entry.url),
      entry.title ? h('span', { class: 'hint' }, ` ${pagePath(entry.url)}`) : null,
    ],
    lead: () =>
      lead
        ? `Left a lead (${lead.kind || 'form'}): ${lead.name ? `${lead.name}, ` : ''}${lead.email}`
        : 'Left a lead (since corrected or removed)',
    recording: () =>
      recording
        ? `Session recorded on ${pagePath(recording.pageUrl)}, ${seconds(recording.duration)}`
        : 'Session recorded',
  }[entry.kind];
  const labels = { pageview: 'page', lead: 'lead', recording: 'recording' };
  return h(
    'li',
    { dataset: { kind: entry.kind } },
    h('span', { class: 'badge' }, labels[entry.kind] || 'activity'),
    ' ',
    describe ? describe() : 'Activity',
    ' ',
    h('span', { class: 'hint' }, when(entry.at)),
  );
}

/**
 * One thing the visitor said: a chat message in their words, or a survey answer after its
 * question (the score, the choice or the text), with the page and the time.
 */
function saidItem(item) {
  const answer = [item.score ?? null, item.text ? `“${item.text}”` : null].filter((part) => part !== null);
  return h(
    'li',
    { dataset: { kind: item.kind } },
    h('span', { class: 'badge' }, item.kind === 'survey' ? 'survey' : 'chat'),
    ' ',
    item.kind === 'survey'
      ? [h('span', { class: 'hint' }, `${item.question}: `), h('strong', {}, answer.join(' · ') || '—')]
      : `“${item.text}”`,
    ' ',
    h('span', { class: 'hint' }, [item.page ? `on ${item.page} · ` : '', when(item.at)].join('')),
  );
}

function sessionTimeline(app, site, sessions) {
  if (!sessions.length)
    return empty('No recorded sessions', 'Sessions appear when recordings are on and the visitor consented.');
  const items = [];
  let lastDay = null;
  for (const session of sessions) {
    const day = new Date(session.startedAt).toDateString();
    if (day !== lastDay) items.push(h('li', { class: 'day' }, day));
    lastDay = day;
    const { play, holder } = replayControl(app, site, session.id);
    items.push(
      h(
        'li',
        { class: 'session', dataset: { sessionId: session.id, startedAt: session.startedAt } },
        h(
          'div',
          { class: 'row' },
          h('strong', {}, new Date(session.startedAt).toLocaleTimeString()),
          h('span', {}, session.pageUrl || 'unknown page'),
          h('span', { class: 'hint' }, seconds(session.duration)),
          play,
        ),
        holder,
      ),
    );
  }
  return h('ol', { class: 'timeline', id: 'sessions' }, items);
}

/**
 * One switch of a GDPR hold: only the action that applies now (restrict or lift, object or
 * withdraw), swapped for its opposite once the server has answered, with what happened beside it.
 */
function holdSwitch(app, site, visitor, kind, on, [setLabel, liftLabel], onChange) {
  const path = siteApi(site, `/visitors/${encodeURIComponent(visitor.visitorId)}/${kind}`);
  const holder = h('span', { class: 'row', dataset: { hold: kind, on: String(on) } });
  const show = (state, message) => {
    const label = state ? liftLabel : setLabel;
    const control = actionButton(
      label,
      async () => {
        await app.session.json(path, { method: 'PUT', json: { on: !state } });
        onChange?.(!state);
        show(
          !state,
          kind === 'restriction' && !state
            ? h(
                'span',
                {},
                'Processing is restricted; the visitor is now hidden from lists. Lift it later under ',
                h('a', { href: `/app/sites/${site.id}/privacy` }, 'Privacy & exports'),
                '.',
              )
            : `${label}: done.`,
        );
        holder.querySelector('button')?.focus();
        return null;
      },
      { kind: 'secondary' },
    );
    holder.dataset.on = String(state);
    holder.replaceChildren(
      ...[control, message && h('span', { role: 'status', class: 'hint' }, message)].filter(Boolean),
    );
  };
  show(on);
  return holder;
}

function subjectActions(app, site, visitor, objected) {
  const base = siteApi(site, `/visitors/${encodeURIComponent(visitor.visitorId)}`);
  // A restricted visitor's profile answers 404, so a profile that is shown is not restricted.
  return h(
    'div',
    { class: 'row' },
    download(app, `${base}/export.json`, `visitor-${visitor.visitorId}.json`, 'Download export.json', 'export-visitor'),
    holdSwitch(app, site, visitor, 'restriction', Boolean(visitor.restricted), [
      'Restrict processing',
      'Lift restriction',
    ]),
    holdSwitch(
      app,
      site,
      visitor,
      'objection',
      Boolean(visitor.objected),
      ['Record objection', 'Withdraw objection'],
      (on) => {
        objected.textContent = on ? 'yes' : 'no';
      },
    ),
    h(
      'button',
      { type: 'button', class: 'danger', id: 'erase', onclick: () => eraseDialog(app, site, visitor) },
      'Erase data…',
    ),
  );
}

function eraseDialog(app, site, visitor) {
  const counts = visitor.counts || {};
  const count = (n, one, many) => `${n || 0} ${n === 1 ? one : many}`;
  const what = [
    count(counts.pageviews, 'pageview', 'pageviews'),
    count(counts.recordings, 'recording with its segments', 'recordings with their segments'),
    count(counts.leads, 'lead', 'leads'),
    'their orders, carts and checkouts, visits, consent decisions, chat transcripts and survey answers',
    'the visitor profile itself',
  ];
  const body = h('div', {});
  const confirm = h(
    'button',
    { type: 'button', class: 'danger', id: 'confirm-erase' },
    `Erase ${visitorName(visitor)}`,
  );
  const cancel = h('button', { type: 'button', class: 'secondary', onclick: () => dialog.close() }, 'Cancel');
  const dialog = h(
    'dialog',
    { 'aria-labelledby': 'erase-title' },
    h('h2', { id: 'erase-title' }, `Erase all data of ${visitorName(visitor)}?`),
    h('p', {}, 'This cannot be undone. These will be permanently deleted:'),
    h(
      'ul',
      {},
      what.map((line) => h('li', {}, line)),
    ),
    h('p', {}, 'Error records the visitor hit are kept but anonymised.'),
    body,
    h('div', { class: 'row' }, confirm, cancel),
  );
  confirm.addEventListener('click', async () => {
    confirm.disabled = true;
    body.replaceChildren(progress('Erasing…'));
    try {
      const receipt = await app.session.json(siteApi(site, `/visitors/${encodeURIComponent(visitor.visitorId)}/data`), {
        method: 'DELETE',
      });
      app.feed = app.feed.filter((event) => event.lead?.visitorId !== visitor.visitorId);
      // replaceChildren would print a null child as the text "null", so build the list first.
      const parts = [
        h('h2', { id: 'erase-title' }, 'Erased'),
        h(
          'div',
          { class: 'notice', id: 'erasure-receipt' },
          `Request ${receipt.requestId} completed ${when(receipt.completedAt)}.`,
        ),
        h(
          'ul',
          {},
          Object.entries(receipt.counts).map(([name, count]) =>
            h('li', {}, `${receipt.labels[name] || name}: ${count}`),
          ),
        ),
      ];
      if (receipt.legacyFootage.length) {
        parts.push(h('p', {}, `Files on your own server to delete: ${receipt.legacyFootage.join(', ')}`));
      }
      parts.push(
        h(
          'button',
          {
            type: 'button',
            id: 'receipt-done',
            onclick: () => {
              dialog.close();
              app.go(`/app/sites/${site.id}/visitors`);
            },
          },
          'Back to visitors',
        ),
      );
      dialog.replaceChildren(...parts);
    } catch (failure) {
      body.replaceChildren(alertBox(describeError(failure)));
      confirm.disabled = false;
    }
  });
  dialog.addEventListener('close', () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
}
