// The surveys pages: the site's surveys, a form to create or change one (owners and admins),
// and one survey's results: how many chose each score or choice, the NPS of a 0–10 question,
// the free-text answers with page and date, each linked to the visitor and to the recording
// running when it was given, and a formula-safe CSV of every answer.
import { describeError, siteApi } from './api.js';
import { download } from './controls.js';
import { alertBox, empty, facts, h, pagePath, percent as percentText, table, when } from './dom.js';
import { replayControl } from './replay.js';

const TYPES = { score: '0–10 score (NPS)', rating: 'Rating 1–5', choice: 'Single choice' };
const lines = (text) =>
  text
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);

export async function surveysPage(app, site, item) {
  if (item === 'new') return surveyForm(app, site, null);
  if (item) return surveyResults(app, site, item);
  const surveys = await app.session.json(siteApi(site, '/surveys'));
  const rows = surveys.map((survey) =>
    h(
      'tr',
      { dataset: { surveyId: survey.id } },
      h('td', {}, h('a', { href: `/app/sites/${site.id}/surveys/${survey.id}` }, survey.name)),
      h('td', {}, TYPES[survey.questionType]),
      h('td', { class: 'optional' }, survey.pages.join(' ')),
      h('td', {}, survey.trigger === 'exit' ? 'On exit intent' : `After ${survey.delaySeconds} s`),
      h('td', {}, h('span', { class: 'badge' }, survey.active ? 'active' : 'paused')),
    ),
  );
  return h(
    'div',
    {},
    h('h1', {}, 'Surveys'),
    app.isAdmin(site)
      ? h(
          'div',
          { class: 'panel row toolbar' },
          h('a', { class: 'button', href: `/app/sites/${site.id}/surveys/new`, id: 'new-survey' }, 'New survey'),
        )
      : null,
    h(
      'div',
      { class: 'panel' },
      rows.length
        ? table({ id: 'surveys', head: ['Name', 'Question', ['Pages', { class: 'optional' }], 'Shows', 'State'], rows })
        : empty(
            'No surveys yet',
            app.isAdmin(site)
              ? 'Create one to ask visitors a question on the pages you choose.'
              : 'An owner or admin of the site can create one.',
          ),
    ),
  );
}

function field(id, label, control, hint) {
  return h(
    'div',
    { class: 'field', id: `${id}-field` },
    h('label', { for: id }, label),
    control,
    hint ? h('span', { class: 'hint', id: `${id}-hint` }, hint) : null,
  );
}

/** The create or edit form; `survey` is null for a new one. */
function surveyForm(app, site, survey) {
  const s = survey || {
    name: '',
    questionType: 'score',
    question: '',
    followUp: '',
    choices: [],
    pages: ['/*'],
    trigger: 'delay',
    delaySeconds: 5,
    samplingPercent: 100,
    oncePerVisitor: true,
    active: true,
  };
  const error = h('div');
  const type = h(
    'select',
    { id: 'survey-type', name: 'questionType' },
    Object.entries(TYPES).map(([value, text]) => h('option', { value, selected: value === s.questionType }, text)),
  );
  const followUp = field(
    'survey-follow-up',
    'Follow-up question (free text, optional)',
    h('input', { id: 'survey-follow-up', name: 'followUp', value: s.followUp || '', maxlength: 500 }),
  );
  const choices = field(
    'survey-choices',
    'Choices, one per line (2 to 10)',
    h(
      'textarea',
      { id: 'survey-choices', name: 'choices', 'aria-describedby': 'survey-choices-hint' },
      s.choices.join('\n'),
    ),
    'Visitors pick exactly one.',
  );
  const shown = () => {
    followUp.hidden = type.value !== 'score';
    choices.hidden = type.value !== 'choice';
  };
  type.addEventListener('change', shown);
  shown();
  const trigger = h(
    'select',
    { id: 'survey-trigger', name: 'trigger' },
    h('option', { value: 'delay', selected: s.trigger === 'delay' }, 'After a delay'),
    h('option', { value: 'exit', selected: s.trigger === 'exit' }, 'On exit intent (after the delay)'),
  );
  const checkbox = (id, name, label, checked) =>
    h('label', { class: 'row', for: id }, h('input', { id, name, type: 'checkbox', checked }), label);
  const form = h(
    'form',
    {
      class: 'panel',
      id: 'survey-form',
      onsubmit: async (event) => {
        event.preventDefault();
        const data = new FormData(form);
        const body = {
          name: data.get('name').trim(),
          questionType: data.get('questionType'),
          question: data.get('question').trim(),
          followUp: data.get('questionType') === 'score' ? data.get('followUp').trim() || null : null,
          choices: data.get('questionType') === 'choice' ? lines(data.get('choices')) : [],
          pages: lines(data.get('pages')),
          trigger: data.get('trigger'),
          delaySeconds: Number(data.get('delaySeconds')),
          samplingPercent: Number(data.get('samplingPercent')),
          oncePerVisitor: data.has('oncePerVisitor'),
          active: data.has('active'),
        };
        error.replaceChildren();
        try {
          const saved = await app.session.json(
            survey ? siteApi(site, `/surveys/${survey.id}`) : siteApi(site, '/surveys'),
            { method: survey ? 'PATCH' : 'POST', json: body },
          );
          app.go(`/app/sites/${site.id}/surveys/${saved.id}`);
        } catch (failure) {
          error.replaceChildren(alertBox(describeError(failure)));
        }
      },
    },
    h('h2', {}, survey ? 'Edit the survey' : 'New survey'),
    error,
    field(
      'survey-name',
      'Name (only you see it)',
      h('input', { id: 'survey-name', name: 'name', value: s.name, required: true, maxlength: 200 }),
    ),
    field('survey-type', 'Kind of question', type),
    field(
      'survey-question',
      'Question',
      h('input', { id: 'survey-question', name: 'question', value: s.question, required: true, maxlength: 500 }),
    ),
    followUp,
    choices,
    field(
      'survey-pages',
      'Pages, one pattern per line',
      h(
        'textarea',
        { id: 'survey-pages', name: 'pages', required: true, 'aria-describedby': 'survey-pages-hint' },
        s.pages.join('\n'),
      ),
      'The excluded-URL syntax: * matches anything; /product/* is every product page.',
    ),
    field('survey-trigger', 'Shows', trigger),
    field(
      'survey-delay',
      'Delay in seconds',
      h('input', {
        id: 'survey-delay',
        name: 'delaySeconds',
        type: 'number',
        min: 0,
        max: 600,
        value: s.delaySeconds,
        required: true,
      }),
    ),
    field(
      'survey-sampling',
      'Share of visitors who may see it (%)',
      h('input', {
        id: 'survey-sampling',
        name: 'samplingPercent',
        type: 'number',
        min: 1,
        max: 100,
        value: s.samplingPercent,
        required: true,
      }),
    ),
    checkbox('survey-once', 'oncePerVisitor', 'Show once per visitor', s.oncePerVisitor),
    checkbox('survey-active', 'active', 'Active', s.active),
    h(
      'div',
      { class: 'row' },
      h('button', { type: 'submit', id: 'save-survey' }, survey ? 'Save changes' : 'Create survey'),
      h(
        'a',
        { class: 'button secondary', href: `/app/sites/${site.id}/surveys${survey ? `/${survey.id}` : ''}` },
        'Cancel',
      ),
    ),
  );
  return survey ? form : h('div', {}, h('h1', {}, 'New survey'), form);
}

function distribution(results) {
  const total = results.distribution.reduce((sum, row) => sum + row.count, 0);
  return h(
    'table',
    { id: 'distribution' },
    h('caption', {}, 'Answers per ' + (results.survey.questionType === 'choice' ? 'choice' : 'score')),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', { scope: 'col' }, results.survey.questionType === 'choice' ? 'Choice' : 'Score'),
        h('th', { scope: 'col' }, 'Answers'),
        h('th', { scope: 'col' }, 'Share'),
      ),
    ),
    h(
      'tbody',
      {},
      results.distribution.map((row) => {
        const percent = total ? Math.round((row.count / total) * 100) : 0;
        const bar = h('span');
        bar.style.width = `${percent}%`; // CSSOM, which the dashboard's CSP allows (a style attribute it would not)
        return h(
          'tr',
          { dataset: { value: row.value } },
          h('th', { scope: 'row' }, String(row.value)),
          h('td', {}, row.count),
          h(
            'td',
            {},
            h('div', { class: 'share-bar', 'aria-hidden': 'true' }, bar),
            h('span', { class: 'share-value' }, percentText(total ? row.count / total : 0)),
          ),
        );
      }),
    ),
  );
}

async function surveyResults(app, site, surveyId) {
  const results = await app.session.json(siteApi(site, `/surveys/${surveyId}/results`));
  const survey = results.survey;
  const texts = results.textAnswers.map((answer) => {
    const { play, holder } = answer.recordingId
      ? replayControl(app, site, answer.recordingId, {
          label: 'Play recording',
          name: 'Play recording of the visit around this answer',
        })
      : {};
    return h(
      'li',
      { class: 'answer', dataset: { responseId: answer.responseId } },
      h('blockquote', {}, answer.text),
      h(
        'div',
        { class: 'row hint' },
        answer.score !== null ? h('span', { class: 'badge' }, `score ${answer.score}`) : null,
        h('span', {}, `on ${answer.page || pagePath(answer.url)}`),
        h('span', {}, when(answer.answeredAt)),
        answer.visitorId
          ? h(
              'a',
              { href: `/app/sites/${site.id}/visitors/${encodeURIComponent(answer.visitorId)}` },
              'Visitor profile',
            )
          : h('span', {}, 'linked by session only'),
        play,
      ),
      holder,
    );
  });
  const admin = app.isAdmin(site);
  return h(
    'div',
    {},
    h('h1', {}, survey.name),
    h('p', {}, h('a', { href: `/app/sites/${site.id}/surveys` }, '← All surveys')),
    h(
      'div',
      { class: 'panel' },
      facts([
        ['Question', survey.question],
        ['Kind', TYPES[survey.questionType]],
        ['Pages', survey.pages.join(' ')],
        ['State', survey.active ? 'active' : 'paused'],
        ['Responses', String(results.responses)],
        ...(survey.questionType === 'score' ? [['NPS', results.nps === null ? '—' : String(results.nps)]] : []),
      ]),
      admin
        ? h(
            'div',
            { class: 'row export' },
            download(
              app,
              siteApi(site, `/surveys/${survey.id}/answers.csv`),
              'survey-answers.csv',
              'Download answers.csv',
              'download-survey-csv',
            ),
            h('span', { class: 'hint' }, 'Every answer, newest first; nothing of restricted visitors.'),
          )
        : null,
    ),
    h(
      'div',
      { class: 'panel' },
      h('h2', {}, 'Distribution'),
      results.responses
        ? h('div', { class: 'table-wrap' }, distribution(results))
        : empty('No answers yet', 'Answers appear here as visitors send them.'),
    ),
    survey.questionType !== 'choice'
      ? h(
          'div',
          { class: 'panel' },
          h('h2', {}, 'Free-text answers'),
          texts.length
            ? h('ul', { class: 'answers', id: 'text-answers' }, texts)
            : empty(
                'No free-text answers yet',
                survey.followUp
                  ? `Visitors answer “${survey.followUp}” after their score.`
                  : 'This survey asks no free-text question.',
              ),
        )
      : null,
    admin
      ? h(
          'details',
          { class: 'panel' },
          h('summary', {}, 'Edit the survey'),
          surveyForm(app, site, survey),
          h(
            'button',
            {
              type: 'button',
              class: 'secondary',
              id: 'delete-survey',
              onclick: async () => {
                if (!window.confirm(`Delete “${survey.name}”? Its answers stay with the visitors' data.`)) return;
                await app.session.json(siteApi(site, `/surveys/${survey.id}`), { method: 'DELETE' });
                app.go(`/app/sites/${site.id}/surveys`);
              },
            },
            'Delete the survey',
          ),
        )
      : null,
  );
}
