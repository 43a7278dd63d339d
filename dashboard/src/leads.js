// The leads page: the site's leads, newest first, each linked to its visitor; owners and admins
// correct a lead in place and download the CSV.
import { describeError, siteApi } from './api.js';
import { exportPanel } from './controls.js';
import { alertBox, empty, h, table, when } from './dom.js';

export async function leadsPage(app, site, item, query) {
  const cursor = query.get('cursor');
  const page = await app.session.json(
    siteApi(site, `/leads?limit=25${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`),
  );
  const admin = app.isAdmin(site);
  const rows = page.items.map((lead) => {
    const row = h('tr', { dataset: { leadId: lead.id } });
    const show = () =>
      row.replaceChildren(
        h('td', {}, lead.name || '—'),
        h('td', {}, lead.email),
        h('td', { class: 'optional' }, lead.phone || '—'),
        h('td', { class: 'optional' }, when(lead.createdAt)),
        h(
          'td',
          {},
          h(
            'a',
            { href: `/app/sites/${site.id}/visitors/${encodeURIComponent(lead.visitorId)}`, title: lead.visitorId },
            lead.visitorLabel || 'Visitor',
          ),
          ' ',
          admin
            ? h(
                'button',
                { type: 'button', class: 'secondary', onclick: edit, 'aria-label': `Edit lead ${lead.email}` },
                'Edit',
              )
            : null,
        ),
      );
    const edit = () => {
      const field = (name, label, value, type = 'text') =>
        h(
          'label',
          { class: 'field' },
          h('span', {}, label),
          h('input', { name, type, value: value || '', 'aria-label': label }),
        );
      const message = h('div');
      const form = h(
        'form',
        {
          onsubmit: async (event) => {
            event.preventDefault();
            const data = new FormData(form);
            const change = {
              name: data.get('name') || null,
              email: data.get('email'),
              phone: data.get('phone') || null,
            };
            try {
              Object.assign(
                lead,
                await app.session.json(siteApi(site, `/leads/${lead.id}`), { method: 'PATCH', json: change }),
              );
              show();
            } catch (failure) {
              message.replaceChildren(alertBox(describeError(failure)));
            }
          },
        },
        field('name', 'Name', lead.name),
        field('email', 'E-mail', lead.email, 'email'),
        field('phone', 'Phone', lead.phone, 'tel'),
        message,
        h(
          'div',
          { class: 'row' },
          h('button', { type: 'submit' }, 'Save correction'),
          h('button', { type: 'button', class: 'secondary', onclick: show }, 'Cancel'),
        ),
      );
      row.replaceChildren(h('td', { colspan: '5' }, form));
      form.querySelector('input').focus();
    };
    show();
    return row;
  });
  return h(
    'div',
    {},
    h('h1', {}, 'Leads'),
    exportPanel(app, site, 'leads', 'Every lead of the site, newest first; those of restricted visitors are left out.'),
    h(
      'div',
      { class: 'panel' },
      rows.length
        ? table({
            id: 'leads',
            head: ['Name', 'E-mail', ['Phone', { class: 'optional' }], ['Received', { class: 'optional' }], ''],
            rows,
          })
        : empty('No leads yet', 'Leads arrive from your shop’s forms and checkout.'),
      page.nextCursor
        ? h(
            'a',
            {
              class: 'button secondary',
              href: `/app/sites/${site.id}/leads?cursor=${encodeURIComponent(page.nextCursor)}`,
            },
            'Next page',
          )
        : null,
    ),
  );
}
