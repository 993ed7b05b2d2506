// The operator's pages (platform token): apps (GET/POST /v1/admin/apps, …/disable, …/enable) and
// the server's health (/healthz, /readyz, /metrics).
import { call, text } from './api.js';
import { el, field, form, announce, table, lines, when } from './ui.js';

export async function appsPage() {
  const list = el('div', { id: 'apps-list' });
  const created = el('div', { id: 'app-created' });
  async function load() {
    const apps = [];
    let cursor = null;
    do {
      const page = await call('GET', '/v1/admin/apps', { query: { limit: 100, cursor } });
      apps.push(...page.data);
      cursor = page.next_cursor;
    } while (cursor && apps.length < 1000);
    list.replaceChildren(table('Apps, oldest first', [
      { label: 'Name', cell: (a) => a.name },
      { label: 'App id', cell: (a) => el('code', {}, a.id) },
      { label: 'App key', cell: (a) => el('code', {}, a.app_key) },
      { label: 'Created', cell: (a) => when(a.created_at) },
      { label: 'State', cell: (a) => (a.disabled ? el('span', { class: 'badge bad' }, 'disabled') : el('span', { class: 'badge good' }, 'enabled')) },
      { label: 'Action', cell: (a) => el('button', {
        type: 'button', class: a.disabled ? undefined : 'danger', 'aria-label': `${a.disabled ? 'Enable' : 'Disable'} ${a.name}`, dataset: { app: a.id },
        onclick: async (event) => {
          event.target.disabled = true;
          await call('POST', `/v1/admin/apps/${encodeURIComponent(a.id)}/${a.disabled ? 'enable' : 'disable'}`);
          announce(`${a.name} is ${a.disabled ? 'enabled' : 'disabled'}.`);
          await load();
        },
      }, a.disabled ? 'Enable' : 'Disable') },
    ], apps, 'No apps yet.'));
  }
  const create = form({
    title: 'Create an app',
    submit: 'Create',
    children: [
      field({ label: 'Name', name: 'name', hint: 'At most 100 characters.' }),
      field({ label: 'Allowed origins', name: 'allowed_origins', type: 'textarea', hint: 'Optional, one a line: the web origins of its clients.' }),
    ],
    onsubmit: async (node) => {
      const { data } = await call('POST', '/v1/admin/apps', { body: {
        name: node.querySelector('[name="name"]').value, allowed_origins: lines(node.querySelector('[name="allowed_origins"]').value),
      } });
      node.reset();
      created.replaceChildren(el('div', { class: 'notice', tabindex: '-1' },
        el('p', {}, `Created ${data.app.name}. Hand its secret key to the app's admins over a secure channel: it is shown this once.`),
        el('dl', { class: 'facts' },
          el('dt', {}, 'App id'), el('dd', {}, el('code', {}, data.app.id)),
          el('dt', {}, 'App key'), el('dd', {}, el('code', { id: 'created-app-key' }, data.app_key)),
          el('dt', {}, 'Secret key'), el('dd', {}, el('code', { class: 'secret', id: 'created-secret-key' }, data.secret_key)))));
      created.firstChild.focus();
      await load();
    },
  });
  create.id = 'app-create';
  await load();
  return [el('h1', {}, 'Apps'), created, create, el('h2', {}, 'All apps'), list];
}

export async function healthPage() {
  const [health, ready, metrics] = await Promise.all([text('/healthz'), text('/readyz'), text('/metrics')]);
  const status = (r) => (r.status === 200 ? el('span', { class: 'badge good' }, 'ok') : el('span', { class: 'badge bad' }, `answered ${r.status}`));
  const interesting = metrics.body.split('\n').filter((l) => /^gatehouse_(outbox|db_|http_in_flight|apps|process|build)/.test(l)).slice(0, 60);
  return [
    el('h1', {}, 'Health'),
    el('section', { class: 'card', id: 'health-status' }, el('dl', { class: 'facts' },
      el('dt', {}, 'Process (/healthz)'), el('dd', {}, status(health)),
      el('dt', {}, 'Database (/readyz)'), el('dd', {}, status(ready)),
      el('dt', {}, 'Metrics (/metrics)'), el('dd', {}, status(metrics)))),
    el('h2', {}, 'Selected metrics'),
    el('pre', { tabindex: '0', 'aria-label': 'Selected metrics' }, interesting.join('\n') || 'None.'),
  ];
}
