/**
 * The survey widget: loaded by the loader (sdk/src/loader.js) only after its privacy gate let
 * collection run, and only on a page one of the site's active surveys targets. It shows at most
 * one survey per page, after its delay or on exit intent, to the sampled share of visitors, once
 * per visitor when asked. Answers go through the loader's `svc('survey')`, which posts them to
 * the shop's same-origin route where the WordPress plugin is installed and to /sdk/v1 otherwise.
 *
 * Accessible: a labelled modal dialog with a focus trap, native radio groups, Escape closes,
 * focus returns where it was. Styled by a constructed stylesheet in a shadow root: no inline
 * script or style attribute, so a strict Content-Security-Policy holds; no motion when the
 * visitor prefers reduced motion. Documented in docs/sdk.md, "Surveys".
 */
import { matches } from './exclusion.js';

// What this browser did with each survey: answered or closed ("done"), sampled in or out.
const DONE_KEY = 'wpelSurveysDone';
const SAMPLE_KEY = 'wpelSurveySample';

const STYLES = `
:host { all: initial; }
.box { position: fixed; right: 16px; bottom: 16px; z-index: 2147483647; max-width: 360px;
  width: calc(100vw - 32px); box-sizing: border-box; background: #fff; color: #1d1d1f;
  border: 1px solid #8a8a8e; border-radius: 10px; padding: 16px 18px;
  box-shadow: 0 8px 28px rgba(0, 0, 0, .25); font: 15px/1.4 system-ui, sans-serif;
  animation: rise .25s ease-out; }
@keyframes rise { from { transform: translateY(24px); opacity: 0; } to { transform: none; opacity: 1; } }
@media (prefers-reduced-motion: reduce) { .box { animation: none; } }
h2 { font-size: 16px; margin: 0 32px 10px 0; }
fieldset { border: 0; margin: 0 0 10px; padding: 0; }
legend { padding: 0; margin-bottom: 8px; font-weight: 600; }
.scale { display: flex; flex-wrap: wrap; gap: 4px; }
.scale label { position: relative; }
.scale input { position: absolute; opacity: 0; width: 100%; height: 100%; margin: 0; }
.scale span { display: inline-block; min-width: 24px; padding: 6px 4px; text-align: center;
  border: 1px solid #6e6e73; border-radius: 6px; }
.scale input:checked + span { background: #1d4ed8; border-color: #1d4ed8; color: #fff; }
.scale input:focus-visible + span { outline: 3px solid #f59e0b; outline-offset: 1px; }
.ends { display: flex; justify-content: space-between; font-size: 13px; color: #4b4b50; margin-top: 4px; }
.choices label { display: block; margin: 4px 0; }
textarea { width: 100%; box-sizing: border-box; min-height: 64px; font: inherit; margin-top: 4px;
  border: 1px solid #6e6e73; border-radius: 6px; padding: 6px; }
button { font: inherit; border-radius: 6px; padding: 6px 14px; cursor: pointer;
  border: 1px solid #1d4ed8; background: #1d4ed8; color: #fff; }
button:focus-visible, textarea:focus-visible, .choices input:focus-visible { outline: 3px solid #f59e0b; outline-offset: 2px; }
.close { position: absolute; top: 8px; right: 8px; background: #fff; color: #1d1d1f;
  border-color: #8a8a8e; padding: 2px 9px; }
.note { color: #b91c1c; margin: 6px 0 0; min-height: 1em; }
`;

function readJson(storage, key) {
  try {
    return JSON.parse(storage.getItem(key)) || {};
  } catch (e) {
    return {};
  }
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : value);
  }
  for (const child of children.flat()) if (child) node.append(child);
  return node;
}

/** Whether this browser is in the survey's sample; drawn once and remembered. */
function sampled(storage, survey) {
  if (survey.sampling >= 100) return true;
  const samples = readJson(storage, SAMPLE_KEY);
  if (!(survey.id in samples)) {
    samples[survey.id] = Math.random() * 100 < survey.sampling;
    storage.setItem(SAMPLE_KEY, JSON.stringify(samples));
  }
  return samples[survey.id];
}

function scaleField(survey, low, high, ends) {
  const options = [];
  for (let value = low; value <= high; value++) {
    options.push(el('label', {}, el('input', { type: 'radio', name: 'score', value, required: true,
      'aria-label': `${value} of ${high}` }), el('span', { 'aria-hidden': 'true' }, String(value))));
  }
  return el('fieldset', {}, el('legend', {}, survey.question),
    el('div', { class: 'scale' }, options),
    el('div', { class: 'ends', 'aria-hidden': 'true' }, el('span', {}, ends[0]), el('span', {}, ends[1])));
}

function choiceField(survey) {
  return el('fieldset', { class: 'choices' }, el('legend', {}, survey.question),
    survey.choices.map((choice) => el('label', {},
      el('input', { type: 'radio', name: 'choice', value: choice, required: true }), ' ', choice)));
}

function questionField(survey) {
  if (survey.type === 'choice') return choiceField(survey);
  if (survey.type === 'rating') return scaleField(survey, 1, 5, ['Poor', 'Excellent']);
  return scaleField(survey, 0, 10, ['Not at all likely', 'Extremely likely']);
}

function answersFrom(survey, form) {
  if (survey.type === 'choice') return [{ question: survey.question, text: form.elements.choice.value }];
  const answers = [{ question: survey.question, score: Number(form.elements.score.value) }];
  const text = form.elements.followUp && form.elements.followUp.value.trim();
  if (text) answers.push({ question: survey.followUp, text: text.slice(0, 5000) });
  return answers;
}

function show(survey, storage) {
  const host = el('div', { 'data-svc-survey': survey.id });
  const root = host.attachShadow({ mode: 'open' });
  const sheet = new CSSStyleSheet();
  sheet.replaceSync(STYLES);
  root.adoptedStyleSheets = [sheet];
  const before = document.activeElement;
  const titleId = 'svc-survey-title';
  const note = el('p', { class: 'note', role: 'status' });

  function close() {
    if (survey.once) markDone();
    removeEventListener('keydown', onKey, true);
    host.remove();
    if (before && before.focus) before.focus();
  }

  function markDone() {
    const done = readJson(storage, DONE_KEY);
    done[survey.id] = 1;
    storage.setItem(DONE_KEY, JSON.stringify(done));
  }

  const form = el('form', { novalidate: true, onsubmit: (event) => {
    event.preventDefault();
    const picked = form.querySelector('input[type=radio]:checked');
    if (!picked) {
      note.textContent = 'Please choose an answer first.';
      form.querySelector('input[type=radio]').focus();
      return;
    }
    window.svc('survey', { surveyId: survey.id, answers: answersFrom(survey, form) });
    markDone();
    const done = el('button', { type: 'button', onclick: close }, 'Close');
    box.replaceChildren(el('h2', { id: titleId, tabindex: '-1' }, 'Thank you!'),
      el('p', {}, 'Your answer was sent.'), done);
    done.focus();
  } }, questionField(survey),
  survey.type === 'score' && survey.followUp ? el('label', { class: 'follow' }, survey.followUp,
    el('textarea', { name: 'followUp', maxlength: '5000' })) : null,
  note, el('button', { type: 'submit' }, 'Send'));

  const box = el('div', { class: 'box', role: 'dialog', 'aria-modal': 'true',
    'aria-labelledby': titleId },
  el('h2', { id: titleId }, 'A quick question'),
  el('button', { type: 'button', class: 'close', 'aria-label': 'Close the survey', onclick: close }, '×'),
  form);

  // Escape closes; Tab and Shift+Tab stay inside the dialog.
  function onKey(event) {
    if (event.key === 'Escape') {
      event.preventDefault();
      close();
      return;
    }
    if (event.key !== 'Tab') return;
    // The close button comes first and the send (or close) button last; a radio group is one
    // stop in between, as the browser orders it.
    const focusable = box.querySelectorAll('button, textarea, input');
    const first = focusable[0];
    const last = focusable[focusable.length - 1];
    const active = root.activeElement;
    if (event.shiftKey && (active === first || !box.contains(active))) {
      event.preventDefault();
      last.focus();
    } else if (!event.shiftKey && (active === last || !box.contains(active))) {
      event.preventDefault();
      first.focus();
    }
  }

  root.append(box);
  document.body.append(host);
  addEventListener('keydown', onKey, true);
  box.querySelector('input, textarea, button:not(.close)').focus();
}

function arm(survey, storage) {
  let shown = false;
  const once = () => {
    if (shown) return;
    shown = true;
    show(survey, storage);
  };
  const delay = Math.max(0, survey.delay) * 1000;
  if (survey.trigger === 'exit') {
    // Exit intent: the pointer leaves the window through its top, once the delay has passed.
    setTimeout(() => document.addEventListener('mouseout', (event) => {
      if (!event.relatedTarget && event.clientY <= 0) once();
    }), delay);
  } else {
    setTimeout(once, delay);
  }
}

window.svc('surveys', (surveys, storage) => {
  const done = readJson(storage, DONE_KEY);
  const survey = surveys.find((s) => s.pages.some((p) => matches(location.href, p))
    && !(s.once && done[s.id]) && sampled(storage, s));
  if (survey) arm(survey, storage);
});
