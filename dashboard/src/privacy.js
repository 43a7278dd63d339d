// The privacy and exports page: CSV exports, retention per kind of data, restricted and
// objecting visitors, the account export and audit trail, and the data-subject request log
// with due dates.
import { siteApi } from './api.js';
import { actionButton, csvDownload, download } from './controls.js';
import { empty, h, table, when } from './dom.js';

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
  const switchPath = (hold, kind) => siteApi(site, `/visitors/${encodeURIComponent(hold.visitorId)}/${kind}`);
  const lift = (hold, kind, label, done) =>
    actionButton(
      label,
      async () => {
        await app.session.json(switchPath(hold, kind), { method: 'PUT', json: { on: false } });
        outcome.replaceChildren(h('div', { class: 'notice' }, done));
        show(await app.session.json(siteApi(site, `/privacy-holds`)));
        return null;
      },
      { kind: 'secondary', busy: 'Lifting…', ariaLabel: `${label} of visitor ${hold.visitorId}` },
    );
  const show = (current) =>
    holder.replaceChildren(
      current.items.length
        ? h(
            'div',
            { class: 'table-wrap' },
            h(
              'table',
              { id: 'privacy-holds' },
              h(
                'thead',
                {},
                h(
                  'tr',
                  {},
                  h('th', {}, 'Visitor id'),
                  h('th', {}, 'Restricted since'),
                  h('th', {}, 'Objecting since'),
                  h('th', {}, ''),
                ),
              ),
              h(
                'tbody',
                {},
                current.items.map((hold) =>
                  h(
                    'tr',
                    { dataset: { visitorId: hold.visitorId } },
                    // A restricted profile answers 404, so only an objecting visitor's id links to it.
                    h(
                      'td',
                      {},
                      hold.restricted
                        ? hold.visitorId
                        : h(
                            'a',
                            { href: `/app/sites/${site.id}/visitors/${encodeURIComponent(hold.visitorId)}` },
                            hold.visitorId,
                          ),
                    ),
                    h('td', {}, heldSince(hold.restricted, hold.restrictedAt)),
                    h('td', {}, heldSince(hold.objected, hold.objectedAt)),
                    h(
                      'td',
                      {},
                      h(
                        'div',
                        { class: 'row' },
                        hold.restricted
                          ? lift(
                              hold,
                              'restriction',
                              'Lift restriction',
                              `Restriction of ${hold.visitorId} lifted; the visitor is listed again.`,
                            )
                          : null,
                        hold.objected
                          ? lift(
                              hold,
                              'objection',
                              'Withdraw objection',
                              `Objection of ${hold.visitorId} withdrawn; new data from this visitor is stored again.`,
                            )
                          : null,
                      ),
                    ),
                  ),
                ),
              ),
            ),
          )
        : empty(
            'No restricted or objecting visitors',
            'Restrict processing or record an objection from a visitor’s page.',
          ),
    );
  show(holds);
  return h(
    'section',
    { class: 'panel', 'aria-labelledby': 'holds-title' },
    h('h2', { id: 'holds-title' }, 'Restricted and objecting visitors'),
    h(
      'p',
      { class: 'hint' },
      'A restricted visitor is hidden everywhere else in the dashboard, and nothing new is stored for a ' +
        'restricted or objecting visitor. Tell the visitor before you lift a restriction (GDPR Art. 18(3)).',
    ),
    outcome,
    holder,
  );
}

const REQUEST_TYPES = { access: 'access (export)' };

/**
 * Whom a request was about: the visitor, linked to the profile while it can be opened. An
 * erasure removes the id from the log, so an erased subject reads as such, never as an id.
 */
function requestSubject(site, request) {
  if (!request.visitorId) {
    return h(
      'td',
      { class: 'hint' },
      request.type === 'erasure' && request.status === 'completed' ? 'erased visitor' : 'not recorded',
    );
  }
  const name = request.visitorName || request.visitorId;
  return h(
    'td',
    {},
    request.visitorName
      ? h('a', { href: `/app/sites/${site.id}/visitors/${encodeURIComponent(request.visitorId)}` }, name)
      : h('span', {}, name, h('span', { class: 'hint' }, ' (no data held)')),
  );
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
    const input = editable
      ? h('input', {
          type: 'number',
          name: kind.kind,
          min: kind.minDays,
          max: kind.maxDays,
          value: kind.retentionDays,
          'aria-label': `Days to keep: ${kind.label}`,
          class: 'days',
        })
      : null;
    if (input) inputs[kind.kind] = input;
    return h(
      'tr',
      { dataset: { kind: kind.kind } },
      h('td', {}, kind.label),
      h(
        'td',
        {},
        input || days(kind.retentionDays),
        h('span', { class: 'hint' }, kind.settable ? ` ${kind.minDays}–${kind.maxDays}` : ' fixed by law'),
      ),
      h('td', {}, when(kind.oldestHeldAt)),
      h('td', { class: 'optional' }, when(kind.lastPurgeAt)),
      h('td', {}, String(kind.removedLastRun)),
      h('td', { class: 'optional' }, String(kind.removedTotal)),
    );
  });
  const changed = () =>
    Object.fromEntries(
      Object.entries(inputs)
        .map(([kind, input]) => [kind, Number(input.value)])
        .filter(([kind, value]) => value !== status.kinds.find((k) => k.kind === kind).retentionDays),
    );
  const controls = admin
    ? h(
        'div',
        { class: 'row' },
        actionButton(
          'Preview deletions',
          async () => {
            const preview = await app.session.json(siteApi(site, `/retention/preview`), {
              method: 'POST',
              json: { retentionDays: changed() },
            });
            const counts = status.kinds
              .filter((kind) => preview.wouldRemove[kind.kind])
              .map((kind) => `${kind.label}: ${preview.wouldRemove[kind.kind]}`);
            outcome.replaceChildren(
              h(
                'div',
                { class: 'notice', id: 'retention-preview' },
                counts.length
                  ? `The next purge would remove ${counts.join('; ')}.`
                  : 'The next purge would remove nothing.',
              ),
            );
            return null;
          },
          { busy: 'Counting…', kind: 'secondary' },
        ),
        actionButton(
          'Save retention',
          async () => {
            const updated = await app.session.json(siteApi(site), {
              method: 'PATCH',
              json: { settings: { retentionDays: changed() } },
            });
            Object.assign(site, updated);
            outcome.replaceChildren(h('div', { class: 'notice' }, 'Retention saved; it applies at the next purge.'));
            return null;
          },
          { busy: 'Saving…', id: 'save-retention' },
        ),
      )
    : null;
  const lag = status.lastError
    ? h('p', { class: 'warning' }, `The last purge failed (${status.lastError}); it is retried.`)
    : null;
  // No run finished for two intervals and an hour: most likely no process is purging at all.
  const overdue = status.overdueSince
    ? h(
        'p',
        { class: 'warning', id: 'retention-overdue' },
        `No purge has finished since ${when(status.overdueSince)}: what is past its retention is not ` +
          'being removed. Check that the process that purges is running (the worker, where REDIS_URL is set).',
      )
    : null;
  return h(
    'section',
    { class: 'panel', 'aria-labelledby': 'retention-title', id: 'retention' },
    h('h2', { id: 'retention-title' }, 'Retention'),
    h(
      'p',
      { class: 'hint' },
      `What is older is removed automatically. Last purge finished: ${when(status.lastRunCompletedAt)}.`,
    ),
    overdue,
    lag,
    table({
      id: 'retention-table',
      head: [
        'Data',
        'Kept (days)',
        'Oldest held',
        ['Last purge', { class: 'optional' }],
        'Removed last run',
        ['Removed in all', { class: 'optional' }],
      ],
      rows,
    }),
    controls,
    outcome,
  );
}

export async function privacyPage(app, site) {
  const admin = app.isAdmin(site);
  const [requests, holds] = admin
    ? await Promise.all([app.session.json('/api/v1/requests'), app.session.json(siteApi(site, `/privacy-holds`))])
    : [[], null];
  const retention = await app.session.json(siteApi(site, `/retention`));
  const auditHolder = h('div', {}, h('p', { class: 'hint' }, 'The audit trail is part of the account export.'));
  const showAudit = actionButton(
    'Show the audit trail',
    async () => {
      const exported = await (await app.session.send('/auth/me/export.json')).json();
      const trail = exported.auditTrail || [];
      auditHolder.replaceChildren(
        trail.length
          ? h(
              'div',
              { class: 'table-wrap' },
              h(
                'table',
                { id: 'audit' },
                h(
                  'thead',
                  {},
                  h('tr', {}, h('th', {}, 'When'), h('th', {}, 'Action'), h('th', { class: 'optional' }, 'Details')),
                ),
                h(
                  'tbody',
                  {},
                  trail
                    .slice(0, 200)
                    .map((entry) =>
                      h(
                        'tr',
                        {},
                        h('td', {}, when(entry.at)),
                        h('td', {}, entry.action),
                        h('td', { class: 'optional' }, JSON.stringify(entry.details || {})),
                      ),
                    ),
                ),
              ),
            )
          : empty('No audit entries'),
      );
      return null;
    },
    { busy: 'Loading…', kind: 'secondary' },
  );
  const now = Date.now();
  const rows = requests
    .filter((r) => r.siteId === site.id)
    .map((r) => {
      const overdue = !r.completedAt && new Date(r.dueAt).getTime() < now;
      return h(
        'tr',
        { dataset: { requestId: r.id } },
        h('td', {}, REQUEST_TYPES[r.type] || r.type),
        requestSubject(site, r),
        h(
          'td',
          {},
          r.status === 'failed'
            ? [
                h('span', { class: 'badge open' }, 'failed'),
                ' ',
                r.failureReason ? `because ${r.failureReason}` : 'no reason recorded',
              ]
            : r.status,
        ),
        h('td', { class: 'optional' }, when(r.receivedAt)),
        h('td', {}, overdue ? h('strong', {}, `${when(r.dueAt)} (overdue)`) : when(r.dueAt)),
        h('td', { class: 'optional' }, when(r.completedAt)),
      );
    });
  return h(
    'div',
    {},
    h('h1', {}, 'Privacy & exports'),
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'CSV exports'),
      admin
        ? h(
            'div',
            { class: 'row' },
            ['errors', 'leads', 'recordings', 'orders'].map((kind) => csvDownload(app, site, kind)),
          )
        : h('p', { class: 'hint' }, 'CSV exports need an owner or admin.'),
    ),
    retentionPanel(app, site, retention, admin),
    admin ? holdsPanel(app, site, holds) : null,
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'Your account'),
      download(app, '/auth/me/export.json', 'account-export.json', 'Download account export'),
      showAudit,
      auditHolder,
    ),
    h(
      'section',
      { class: 'panel' },
      h('h2', {}, 'Data-subject requests'),
      h(
        'p',
        { class: 'hint' },
        'Every export, erasure, restriction, objection and rectification is due one month after it was received.',
      ),
      rows.length
        ? table({
            id: 'requests',
            head: [
              'Type',
              'Visitor',
              'Status',
              ['Received', { class: 'optional' }],
              'Due',
              ['Completed', { class: 'optional' }],
            ],
            rows,
          })
        : empty(
            'No requests yet',
            admin
              ? 'Requests appear here when you export, erase, restrict or rectify.'
              : 'The request log needs an owner or admin.',
          ),
    ),
  );
}
