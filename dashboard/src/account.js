// Pages for someone who cannot sign in: asking for a password reset link, and the page that
// link opens (/app/reset#token), where a new password is set. The token stays in the fragment,
// so it never reaches a server log; it is sent in a POST body.
import { alertBox, h } from './dom.js';
import { publicCall } from './team.js';

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
        onsubmit: async (event) => {
          event.preventDefault();
          submit.disabled = true;
          outcome.replaceChildren();
          try {
            const answer = await publicCall('/auth/password-reset/request', { email: email.value });
            outcome.replaceChildren(h('p', { class: 'notice' }, answer.message));
          } catch (failure) {
            outcome.replaceChildren(alertBox(failure.message));
          } finally {
            submit.disabled = false;
          }
        },
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
      onsubmit: async (event) => {
        event.preventDefault();
        submit.disabled = true;
        error.replaceChildren();
        try {
          await publicCall('/auth/password-reset/confirm', { token, password: password.value });
          form.replaceChildren(
            h('h1', {}, 'Password set'),
            h('p', { class: 'notice', role: 'status' }, 'Every session was signed out. Sign in with the new password.'),
            h('p', {}, h('a', { href: '/app/login' }, 'Sign in')),
          );
        } catch (failure) {
          error.replaceChildren(
            alertBox(
              failure.code === 'invalid_link'
                ? 'This reset link is unknown, used or expired. Ask for a new one.'
                : failure.message,
            ),
          );
          submit.disabled = false;
        }
      },
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
