// The Team page (the site's organization): members with role and last sign-in, pending
// invitations, and for owners and admins inviting, changing roles and removing. The invitation
// page (/app/invite#token) is where an invitee sets a password and joins.
import { actionButton, copyButton, submitWith } from './controls.js';
import { alertBox, h, table, when } from './dom.js';

const ROLES = ['owner', 'admin', 'viewer'];
const ROLE_WORDS = {
  owner: 'Owner — everything, including owners and the account',
  admin: 'Admin — settings, keys, team (not owners)',
  viewer: 'Viewer — reads only',
};

function organizationPath(site, path) {
  return `/api/v1/organizations/${site.organizationId}${path}`;
}

/** A link shown once, selectable, with a button that copies it. */
function shownOnce(link) {
  const field = h('input', { id: 'invitation-link', readonly: true, value: link, 'aria-label': 'Invitation link' });
  return h(
    'div',
    { class: 'notice', id: 'invitation-shown' },
    h(
      'p',
      {},
      'No mail server is configured, so pass this link on yourself. It is shown only now, ' +
        'works once and expires in 7 days.',
    ),
    h('div', { class: 'row' }, field, copyButton('Copy link', link, field)),
  );
}

function roleSelect(id, label, value, options) {
  return h(
    'select',
    { id, 'aria-label': label },
    options.map((role) => h('option', { value: role, selected: role === value }, role)),
  );
}

function inviteForm(app, site, isOwner, refresh) {
  const outcome = h('div', { role: 'status' });
  const email = h('input', { id: 'invite-email', type: 'email', required: true, autocomplete: 'off' });
  const role = roleSelect(
    'invite-role',
    'Role',
    'viewer',
    ROLES.filter((r) => isOwner || r !== 'owner'),
  );
  const submit = h('button', { type: 'submit' }, 'Invite');
  return h(
    'form',
    {
      class: 'panel',
      id: 'invite-form',
      onsubmit: submitWith(submit, outcome, async () => {
        const issued = await app.session.json(organizationPath(site, '/invitations'), {
          method: 'POST',
          json: { email: email.value, role: role.value },
        });
        await refresh();
        outcome.replaceChildren(
          issued.link
            ? shownOnce(issued.link)
            : h('p', { class: 'notice' }, `Invitation mailed to ${issued.invitation.email}.`),
        );
        email.value = '';
      }),
    },
    h('h2', {}, 'Invite someone'),
    h(
      'p',
      { class: 'hint' },
      'They get a link to choose a password; it works once, within 7 days.',
      ' ',
      ROLES.filter((r) => isOwner || r !== 'owner')
        .map((r) => ROLE_WORDS[r])
        .join('. '),
      '.',
    ),
    h('label', { class: 'field', for: 'invite-email' }, h('span', {}, 'E-mail'), email),
    h('label', { class: 'field', for: 'invite-role' }, h('span', {}, 'Role'), role),
    submit,
    outcome,
  );
}

function memberRow(app, site, member, canManage, isOwner, refresh) {
  const name = member.displayName && member.displayName !== member.email ? member.displayName : '';
  const mayTouch = canManage && (isOwner || member.role !== 'owner');
  let actions = h('td', {}, '—');
  if (mayTouch) {
    const select = roleSelect(
      `role-${member.userId}`,
      `Role of ${member.email}`,
      member.role,
      ROLES.filter((r) => isOwner || r !== 'owner'),
    );
    const path = organizationPath(site, `/members/${member.userId}`);
    actions = h(
      'td',
      { class: 'actions' },
      select,
      actionButton(
        'Change role',
        async () => {
          await app.session.json(path, { method: 'PATCH', json: { role: select.value } });
          await refresh();
          return 'Role changed.';
        },
        { kind: 'secondary', ariaLabel: `Change role of ${member.email}` },
      ),
      isOwner && member.userId !== app.me.id
        ? actionButton(
            'Reset password',
            async () => {
              const issued = await app.session.json(`${path}/password-reset`, { method: 'POST' });
              if (issued.emailed) return `A reset link was mailed to ${member.email}.`;
              const field = h('input', {
                readonly: true,
                value: issued.link,
                'aria-label': `Reset link for ${member.email}`,
              });
              return h('span', {}, 'Pass this link on; it works once, within 30 minutes: ', field);
            },
            { kind: 'secondary', ariaLabel: `Reset password of ${member.email}` },
          )
        : null,
      actionButton(
        'Remove',
        async () => {
          if (!confirm(`Remove ${member.email}? They are signed out at once.`)) return null;
          await app.session.json(path, { method: 'DELETE' });
          if (member.userId === app.me.id) {
            await app.session.logout();
            return null;
          }
          await refresh();
          return 'Removed.';
        },
        { kind: 'danger', ariaLabel: `Remove ${member.email}` },
      ),
    );
  }
  return h(
    'tr',
    { dataset: { member: member.email } },
    h('td', { 'data-label': 'Member' }, member.email, name ? h('span', { class: 'hint' }, ` ${name}`) : null),
    h('td', { 'data-label': 'Role' }, member.role),
    h('td', { 'data-label': 'Last sign-in' }, member.lastSignInAt ? when(member.lastSignInAt) : 'never'),
    actions,
  );
}

function invitationRow(app, site, invitation, canManage, refresh) {
  return h(
    'tr',
    { dataset: { invitation: invitation.email } },
    h('td', { 'data-label': 'Invited' }, invitation.email),
    h('td', { 'data-label': 'Role' }, invitation.role),
    h('td', { 'data-label': 'Expires' }, when(invitation.expiresAt)),
    h(
      'td',
      {},
      canManage
        ? actionButton(
            'Revoke',
            async () => {
              await app.session.json(organizationPath(site, `/invitations/${invitation.id}`), { method: 'DELETE' });
              await refresh();
              return 'Revoked.';
            },
            { kind: 'secondary', ariaLabel: `Revoke the invitation of ${invitation.email}` },
          )
        : '—',
    ),
  );
}

export async function teamPage(app, site) {
  const role = app.role(site);
  const canManage = app.isAdmin(site);
  const isOwner = role === 'owner';
  const lists = h('div', {});
  async function refresh() {
    const team = await app.session.json(organizationPath(site, '/team'));
    lists.replaceChildren(
      h(
        'section',
        { class: 'panel', 'aria-labelledby': 'members-heading' },
        h('h2', { id: 'members-heading' }, 'Members'),
        table({
          id: 'members',
          head: ['Member', 'Role', 'Last sign-in', canManage ? 'Change' : ''],
          rows: team.members.map((member) => memberRow(app, site, member, canManage, isOwner, refresh)),
        }),
        h(
          'p',
          { class: 'hint' },
          'Every organization keeps at least one owner: make someone else owner before the last one steps down.',
        ),
      ),
      team.invitations.length
        ? h(
            'section',
            { class: 'panel', 'aria-labelledby': 'invitations-heading' },
            h('h2', { id: 'invitations-heading' }, 'Pending invitations'),
            table({
              id: 'invitations',
              head: ['Invited', 'Role', 'Expires', ''],
              rows: team.invitations.map((invitation) => invitationRow(app, site, invitation, canManage, refresh)),
            }),
          )
        : null,
    );
  }
  await refresh();
  return h(
    'div',
    {},
    h('h1', {}, 'Team'),
    lists,
    canManage
      ? inviteForm(app, site, isOwner, refresh)
      : h('p', { class: 'hint', id: 'viewer-note' }, 'Only owners and admins invite and change members.'),
  );
}

/** A POST without a session (invitation and reset pages); Error with the API's code. */
export async function publicCall(path, body) {
  const response = await fetch(path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => null);
  if (!response.ok) {
    const error = new Error(answer?.error?.message || 'The request failed.');
    error.code = answer?.error?.code;
    throw error;
  }
  return answer;
}

/**
 * The page an invitation's link opens: the token is in the fragment, so it never reaches a
 * server log; it is sent in a POST body. `joined(answer, email, password)` signs the new member
 * in with the accept's answer (a token pair, or the second step an organization requires).
 */
export function invitePage(joined) {
  const token = location.hash.slice(1);
  const main = h('main', { id: 'main' });
  const box = h(
    'div',
    { class: 'panel login' },
    h('h1', {}, 'Join Visitor Service'),
    h('p', { class: 'loading' }, 'Loading…'),
  );
  main.append(box);
  (async () => {
    let details;
    try {
      details = await publicCall('/auth/invitations/details', { token });
    } catch (failure) {
      box.replaceChildren(
        h('h1', {}, 'Join Visitor Service'),
        alertBox(
          failure.code === 'invalid_link'
            ? 'This invitation link is unknown, used or expired. Ask whoever invited you for a new one.'
            : failure.message,
        ),
      );
      return;
    }
    const error = h('div');
    const name = h('input', { id: 'display-name', autocomplete: 'name' });
    const password = h('input', {
      id: 'new-password',
      type: 'password',
      autocomplete: 'new-password',
      required: true,
      minlength: 10,
    });
    const submit = h('button', { type: 'submit' }, 'Join');
    box.replaceChildren(
      h(
        'form',
        {
          onsubmit: async (event) => {
            event.preventDefault();
            submit.disabled = true;
            error.replaceChildren();
            try {
              const answer = await publicCall('/auth/invitations/accept', {
                token,
                password: password.value,
                ...(name.value.trim() ? { displayName: name.value.trim() } : {}),
              });
              await joined(answer, details.email, password.value);
            } catch (failure) {
              error.replaceChildren(alertBox(failure.message));
              submit.disabled = false;
            }
          },
        },
        h('h1', {}, `Join ${details.organizationName || 'the organization'}`),
        h('p', {}, `You are invited as ${details.role}. You will sign in as `, h('strong', {}, details.email), '.'),
        error,
        h('label', { class: 'field', for: 'display-name' }, h('span', {}, 'Your name (optional)'), name),
        h(
          'label',
          { class: 'field', for: 'new-password' },
          h('span', {}, 'Choose a password'),
          password,
          h('span', { class: 'hint' }, 'At least 10 characters; a few unrelated words make a strong one.'),
        ),
        submit,
      ),
    );
  })();
  return main;
}
