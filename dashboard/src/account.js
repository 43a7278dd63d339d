// The signed-in user's Account page (password, two-factor sign-in, and for owners whether the
// organization requires it); the second step of a sign-in with two-factor; and the pages for
// someone who cannot sign in: asking for a password reset link, and the page that link opens
// (/app/reset#token), where a new password is set. Tokens stay in the fragment or in memory, so
// they never reach a server log; they are sent in POST bodies.
import { describeError } from './api.js';
import { actionButton, copyButton, submitWith } from './controls.js';
import { h, when } from './dom.js';
import { publicCall } from './team.js';

/** What a failed call to a public (signed-out) endpoint says: the server's own words. */
const serverWords = (failure) => failure.message;

/** The form that asks for a reset link by e-mail; the answer is the same for any address. */
export function forgotPage() {
  const outcome = h('div', { role: 'status' });
  const email = h('input', { id: 'reset-email', type: 'email', autocomplete: 'username', required: true });
  const submit = h('button', { type: 'submit' }, 'Send a reset link');
  return h(
    'main',
    { id: 'main' },
    h(
      'form',
      {
        class: 'panel login',
        onsubmit: submitWith(
          submit,
          outcome,
          async () => {
            const answer = await publicCall('/auth/password-reset/request', { email: email.value });
            outcome.replaceChildren(h('p', { class: 'notice' }, answer.message));
          },
          serverWords,
        ),
      },
      h('h1', {}, 'Forgot your password?'),
      h('label', { class: 'field', for: 'reset-email' }, h('span', {}, 'E-mail'), email),
      submit,
      outcome,
      h('p', {}, h('a', { href: '/app/login' }, 'Back to sign-in')),
    ),
  );
}

/** The page a reset link opens: a new password, then sign-in with it. */
export function resetPage() {
  const token = location.hash.slice(1);
  const error = h('div');
  const password = h('input', {
    id: 'new-password',
    type: 'password',
    autocomplete: 'new-password',
    required: true,
    minlength: 10,
  });
  const submit = h('button', { type: 'submit' }, 'Set password');
  const form = h(
    'form',
    {
      class: 'panel login',
      onsubmit: submitWith(
        submit,
        error,
        async () => {
          await publicCall('/auth/password-reset/confirm', { token, password: password.value });
          form.replaceChildren(
            h('h1', {}, 'Password set'),
            h('p', { class: 'notice', role: 'status' }, 'Every session was signed out. Sign in with the new password.'),
            h('p', {}, h('a', { href: '/app/login' }, 'Sign in')),
          );
        },
        (failure) =>
          failure.code === 'invalid_link'
            ? 'This reset link is unknown, used or expired. Ask for a new one.'
            : failure.message,
      ),
    },
    h('h1', {}, 'Choose a new password'),
    error,
    h(
      'label',
      { class: 'field', for: 'new-password' },
      h('span', {}, 'New password'),
      password,
      h('span', { class: 'hint' }, 'At least 10 characters; a few unrelated words make a strong one.'),
    ),
    submit,
  );
  return h('main', { id: 'main' }, form);
}

/** A labelled field: `input` with its label and an optional hint. */
function field(id, label, input, hint) {
  input.id = id;
  return h(
    'label',
    { class: 'field', for: id },
    h('span', {}, label),
    input,
    hint ? h('span', { class: 'hint' }, hint) : null,
  );
}

function codeInput() {
  return h('input', {
    type: 'text',
    inputmode: 'numeric',
    autocomplete: 'one-time-code',
    pattern: '[0-9 ]{6,7}',
    maxlength: 7,
    required: true,
  });
}

function passwordInput(autocomplete = 'current-password') {
  return h('input', { type: 'password', autocomplete, required: true });
}

/** The ten recovery codes, shown once, with a copy button. */
function recoveryCodesShown(codes) {
  const list = h(
    'ol',
    { class: 'recovery-codes', id: 'recovery-codes' },
    codes.map((code) => h('li', {}, h('code', {}, code))),
  );
  return h(
    'div',
    { class: 'notice' },
    h(
      'p',
      {},
      h('strong', {}, 'Your recovery codes. '),
      'Keep them somewhere safe, apart from your phone: each signs you in once if the app is lost. ' +
        'They are shown only now.',
    ),
    list,
    copyButton('Copy the recovery codes', codes.join('\n'), list),
  );
}

/** The secret of a new enrolment, shown once, as text and as a link an authenticator app opens. */
function secretShown(enrolment) {
  const secret = h('input', { readonly: true, value: enrolment.secret, id: 'two-factor-secret', class: 'key' });
  return h(
    'div',
    { class: 'notice', id: 'two-factor-enrolment' },
    h(
      'p',
      {},
      'Add this key to an authenticator app (a time-based code, 6 digits, every 30 seconds), or ',
      h('a', { href: enrolment.otpauthUri }, 'open it in the app on this device'),
      '. It is shown only now.',
    ),
    h('label', { class: 'field', for: 'two-factor-secret' }, h('span', {}, 'Key'), secret),
    copyButton('Copy the key', enrolment.secret, secret),
  );
}

/**
 * The second step of a sign-in, in `place`: a code (or a recovery code), or, when an organization
 * requires two-factor and the user has none yet, an enrolment. Resolves once the server has set
 * the refresh cookie, so the caller's session adopts it with a refresh.
 */
function secondStepForm(answer, place) {
  return new Promise((resolve) => {
    const error = h('div');
    const token = answer.secondStepToken;
    const show = (...children) =>
      place.replaceChildren(h('form', { class: 'panel login', ...children[0] }, ...children.slice(1)));
    if (answer.secondStep === 'code') {
      let recovery = false;
      const code = codeInput();
      const label = h('span', {}, 'Code from your authenticator app');
      const submit = h('button', { type: 'submit' }, 'Sign in');
      const other = h(
        'button',
        {
          type: 'button',
          class: 'link',
          onclick: () => {
            recovery = !recovery;
            label.textContent = recovery ? 'Recovery code' : 'Code from your authenticator app';
            other.textContent = recovery ? 'Use a code from the app' : 'Use a recovery code instead';
            Object.assign(
              code,
              recovery
                ? { inputMode: 'text', pattern: '.*', maxLength: 40 }
                : { inputMode: 'numeric', pattern: '[0-9 ]{6,7}', maxLength: 7 },
            );
            code.autocomplete = recovery ? 'off' : 'one-time-code';
            code.value = '';
            code.focus();
          },
        },
        'Use a recovery code instead',
      );
      code.id = 'second-step-code';
      show(
        {
          onsubmit: submitWith(
            submit,
            error,
            async () => {
              await publicCall('/auth/login/two-factor', {
                token,
                [recovery ? 'recoveryCode' : 'code']: code.value.trim(),
              });
              resolve();
            },
            serverWords,
          ),
        },
        h('h1', {}, 'Two-factor sign-in'),
        error,
        h('label', { class: 'field', for: 'second-step-code' }, label, code),
        submit,
        h('p', {}, other),
      );
      code.focus();
      return;
    }
    const start = h('button', { type: 'submit' }, 'Show my key');
    show(
      {
        onsubmit: submitWith(
          start,
          error,
          async () => {
            enrolAtSignIn(await publicCall('/auth/login/two-factor/setup', { token }), token, place, resolve);
          },
          serverWords,
        ),
      },
      h('h1', {}, 'Set up two-factor sign-in'),
      error,
      h(
        'p',
        {},
        'Your organization requires a second factor: a code from an authenticator app on your phone, ' +
          'as well as your password. Setting it up takes a minute.',
      ),
      start,
    );
  });
}

function enrolAtSignIn(enrolment, token, place, resolve) {
  const error = h('div');
  const code = codeInput();
  const submit = h('button', { type: 'submit' }, 'Turn on and sign in');
  place.replaceChildren(
    h(
      'form',
      {
        class: 'panel login',
        onsubmit: submitWith(
          submit,
          error,
          async () => {
            const answer = await publicCall('/auth/login/two-factor/confirm', { token, code: code.value.trim() });
            place.replaceChildren(
              h(
                'div',
                { class: 'panel login' },
                h('h1', {}, 'Two-factor sign-in is on'),
                recoveryCodesShown(answer.recoveryCodes),
                h('button', { type: 'button', id: 'continue', onclick: () => resolve() }, 'Continue'),
              ),
            );
          },
          serverWords,
        ),
      },
      h('h1', {}, 'Set up two-factor sign-in'),
      error,
      secretShown(enrolment),
      field('enrol-code', 'Code the app shows', code),
      submit,
    ),
  );
}

/**
 * Sign in with e-mail and password: the session adopts the token pair the answer carries, or,
 * when a second step is needed (shown in `place`), the refresh cookie its answer set.
 */
export async function signIn(session, email, password, place) {
  const answer = await publicCall('/auth/login', { email, password });
  if (!answer.secondStep) {
    session.adopt(answer);
    return;
  }
  await secondStepForm(answer, place);
  await session.refresh();
}

function passwordPanel(app) {
  const outcome = h('div', { role: 'status' });
  const current = passwordInput();
  const next = passwordInput('new-password');
  next.minLength = 10;
  const submit = h('button', { type: 'submit' }, 'Change password');
  return h(
    'form',
    {
      class: 'panel',
      id: 'password-form',
      onsubmit: submitWith(
        submit,
        outcome,
        async () => {
          await app.session.json('/auth/password', {
            method: 'POST',
            json: { currentPassword: current.value, newPassword: next.value },
          });
          current.value = next.value = '';
          outcome.replaceChildren(
            h('p', { class: 'notice' }, 'Password changed. Your other sessions were signed out.'),
          );
        },
        (failure) =>
          failure.code === 'wrong_password' ? 'The current password is not right.' : describeError(failure),
      ),
    },
    h('h2', {}, 'Password'),
    field('current-password', 'Current password', current),
    field('new-password', 'New password', next, 'At least 10 characters; a few unrelated words make a strong one.'),
    submit,
    outcome,
  );
}

/** A form asking for the password and a code, for `action(password, code)`. */
function confirmForm(id, title, button, action) {
  const outcome = h('div', { role: 'status' });
  const password = passwordInput();
  const code = codeInput();
  code.maxLength = 40;
  code.pattern = '.*';
  const submit = h('button', { type: 'submit', class: 'secondary' }, button);
  return h(
    'form',
    {
      id,
      class: 'stack',
      onsubmit: submitWith(submit, outcome, async () => {
        outcome.replaceChildren((await action(password.value, code.value.trim())) || '');
      }),
    },
    h('h3', {}, title),
    field(`${id}-password`, 'Password', password),
    field(`${id}-code`, 'Code from the app', code),
    submit,
    outcome,
  );
}

async function twoFactorPanel(app) {
  const panel = h('section', { class: 'panel', id: 'two-factor', 'aria-labelledby': 'two-factor-title' });
  // `shownOnce`: what the last change answered that is never shown again (recovery codes).
  const refresh = async (shownOnce = null) => {
    const status = await app.session.json('/auth/two-factor');
    panel.replaceChildren(
      h('h2', { id: 'two-factor-title' }, 'Two-factor sign-in'),
      shownOnce,
      ...twoFactorBody(app, status, refresh),
    );
  };
  await refresh();
  return panel;
}

function twoFactorBody(app, status, refresh) {
  const shown = h('div');
  const body = [];
  if (!status.enabled) {
    body.push(
      h(
        'p',
        { id: 'two-factor-state' },
        'Off. With it on, signing in also asks for a code from an authenticator app on your phone.',
      ),
      actionButton(
        'Turn on two-factor sign-in',
        async () => {
          const enrolment = await app.session.json('/auth/two-factor/setup', { method: 'POST' });
          const error = h('div');
          const code = codeInput();
          const submit = h('button', { type: 'submit' }, 'Confirm');
          shown.replaceChildren(
            secretShown(enrolment),
            h(
              'form',
              {
                onsubmit: submitWith(submit, error, async () => {
                  const answer = await app.session.json('/auth/two-factor/confirm', {
                    method: 'POST',
                    json: { code: code.value.trim() },
                  });
                  await refresh(recoveryCodesShown(answer.recoveryCodes));
                }),
              },
              error,
              field('confirm-code', 'Code the app shows', code),
              submit,
            ),
          );
          return null;
        },
        { busy: 'Making a key…', id: 'two-factor-on' },
      ),
      shown,
    );
  } else {
    body.push(
      h(
        'p',
        { id: 'two-factor-state' },
        h('strong', {}, 'On'),
        ` since ${when(status.enabledAt)}; ${status.recoveryCodesLeft} of 10 recovery codes left.`,
      ),
      shown,
      confirmForm('renew-codes', 'New recovery codes', 'Make new recovery codes', async (password, code) => {
        const answer = await app.session.json('/auth/two-factor/recovery-codes', {
          method: 'POST',
          json: { password, code },
        });
        return recoveryCodesShown(answer.recoveryCodes);
      }),
      confirmForm('two-factor-off', 'Turn it off', 'Turn off two-factor sign-in', async (password, code) => {
        const proof = /^[0-9 ]+$/.test(code) ? { code } : { recoveryCode: code };
        await app.session.json('/auth/two-factor/disable', { method: 'POST', json: { password, ...proof } });
        await refresh();
        return null;
      }),
    );
  }
  for (const org of status.organizations) {
    const id = `require-${org.id}`;
    if (!org.canChange) {
      body.push(
        h(
          'p',
          { class: 'hint' },
          `${org.name} ${org.required ? 'requires' : 'does not require'} two-factor sign-in of its members.`,
        ),
      );
      continue;
    }
    const box = h('input', { type: 'checkbox', id, checked: org.required });
    const outcome = h('span', { role: 'status', class: 'hint' });
    box.addEventListener('change', async () => {
      box.disabled = true;
      try {
        await app.session.json(`/api/v1/organizations/${org.id}/two-factor`, {
          method: 'PUT',
          json: { required: box.checked },
        });
        outcome.textContent = box.checked
          ? 'Required: members without it set it up at their next sign-in.'
          : 'No longer required.';
      } catch (failure) {
        box.checked = !box.checked;
        outcome.textContent = describeError(failure);
      } finally {
        box.disabled = false;
      }
    });
    body.push(
      h(
        'p',
        { class: 'row' },
        box,
        h('label', { for: id }, `Require two-factor sign-in of every member of ${org.name}`),
        outcome,
      ),
    );
  }
  return body;
}

/** The Account page: the signed-in user's password and two-factor sign-in. */
export async function accountPage(app) {
  return h(
    'div',
    { class: 'stack' },
    h('h1', {}, 'Your account'),
    h('p', {}, `Signed in as ${app.me.email}.`),
    passwordPanel(app),
    await twoFactorPanel(app),
  );
}
