// Controls shared by the pages: buttons that show progress and say what happened.
import { describeError } from './api.js';
import { alertBox, h, saveResponse } from './dom.js';

/** A button that runs `action`, shows progress while it runs and the outcome in words. */
export function actionButton(label, action, { busy = 'Working…', kind = '', id } = {}) {
  const status = h('span', { role: 'status', class: 'hint' });
  const button = h('button', { class: kind, id, type: 'button', onclick: async () => {
    button.disabled = true;
    const before = button.textContent;
    button.textContent = busy;
    status.replaceChildren();
    try {
      const message = await action();
      if (message) status.replaceChildren(message);
    } catch (failure) {
      status.replaceChildren(alertBox(describeError(failure)));
    } finally {
      button.disabled = false;
      button.textContent = before;
    }
  } }, label);
  return h('span', { class: 'row' }, button, status);
}

export function download(app, path, name, label, id) {
  return actionButton(label, async () => {
    const saved = await saveResponse(await app.session.send(path), name);
    return `Saved ${saved}.`;
  }, { busy: 'Preparing download…', kind: 'secondary', id });
}

