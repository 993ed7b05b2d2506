// The console's shell: sign-in, the section list and a router on the fragment (#/users/usr_…),
// which names a page and never a credential.
import { call, credential, forget, remember } from './api.js';
import { el, field, form, announce, nextRender, isCurrentRender } from './ui.js';
import { settingsPage } from './settings.js';
import { usersPage, userPage } from './users.js';
import { auditPage, outboxPage, keysPage } from './activity.js';
import { appsPage, healthPage } from './platform.js';

const sections = {
  tenant: [
    { path: 'settings', label: 'Settings', page: settingsPage },
    { path: 'users', label: 'Users', page: usersPage },
    { path: 'audit', label: 'Audit log', page: auditPage },
    { path: 'outbox', label: 'Outbox', page: outboxPage },
    { path: 'keys', label: 'Keys', page: keysPage },
  ],
  operator: [
    { path: 'apps', label: 'Apps', page: appsPage },
    { path: 'health', label: 'Health', page: healthPage },
    { path: 'outbox', label: 'Outbox', page: outboxPage },
  ],
};

const main = () => document.getElementById('main');

function signInPage() {
  const roleTenant = el('input', { type: 'radio', name: 'role', id: 'role-tenant', value: 'tenant', checked: true });
  const roleOperator = el('input', { type: 'radio', name: 'role', id: 'role-operator', value: 'operator' });
  const secret = field({
    label: 'Secret key or platform token', name: 'token', field: 'token', type: 'password', autocomplete: 'off',
    hint: "A tenant admin uses the app's secret key (sk_…); an operator the platform token (GATEHOUSE_ADMIN_TOKEN). It is kept in this tab only: do not let the browser save it.",
  });
  return [
    el('h1', {}, 'Sign in'),
    form({
      submit: 'Sign in',
      children: [
        el('fieldset', {}, el('legend', {}, 'I am'),
          el('div', { class: 'check' }, roleTenant, el('label', { for: 'role-tenant' }, "An app's admin")),
          el('div', { class: 'check' }, roleOperator, el('label', { for: 'role-operator' }, 'The platform operator'))),
        secret,
      ],
      async onsubmit(node) {
        const role = roleOperator.checked ? 'operator' : 'tenant';
        const token = node.querySelector('[name="token"]').value.trim();
        if (!token) throw { fields: [{ field: 'token', message: 'Enter the key.' }] };
        let label;
        try {
          if (role === 'tenant') {
            const { data } = await call('GET', '/v1/admin/app', { token });
            label = `${data.name} (${data.id})`;
          } else {
            await call('GET', '/v1/admin/apps', { token, query: { limit: 1 } });
            label = 'Platform operator';
          }
        } catch (error) {
          if (error.status === 401) throw { fields: [{ field: 'token', message: role === 'tenant' ? 'This is not a current secret key of an app.' : 'This is not the platform token.' }] };
          throw error;
        }
        remember({ role, token, label });
        announce(`Signed in as ${label}.`);
        const first = `#/${sections[role][0].path}`;
        // A new fragment renders through hashchange; the same one needs rendering here.
        if (location.hash === first) render();
        else location.hash = first;
      },
    }),
  ];
}

// Each render's number (ui.js): an answer that arrives after a newer render began (another page, a
// sign-out) is dropped, so nothing fetched with the previous key is drawn afterwards.
export async function render() {
  const mine = nextRender();
  const who = credential();
  const nav = document.getElementById('nav');
  const signOut = document.getElementById('sign-out');
  nav.replaceChildren();
  document.getElementById('who').textContent = who ? who.label : '';
  signOut.hidden = !who;
  const root = main();
  if (!who) {
    root.replaceChildren(...signInPage());
    document.title = 'Sign in · Gatehouse console';
    return;
  }
  const [path, ...rest] = location.hash.replace(/^#\/?/, '').split('/').map((part) => {
    try { return decodeURIComponent(part); } catch { return ''; }
  });
  const list = sections[who.role];
  const section = list.find((s) => s.path === path) ?? list[0];
  for (const s of list) nav.append(el('a', { href: `#/${s.path}`, 'aria-current': s === section ? 'page' : undefined }, s.label));
  // A user id is `usr_` and letters or digits: anything else is not looked up.
  const userID = section.path === 'users' && /^usr_[A-Za-z0-9]+$/.test(rest[0] ?? '') ? rest[0] : null;
  const page = userID ? () => userPage(userID) : section.page;
  root.replaceChildren(el('p', { class: 'hint' }, 'Loading…'));
  try {
    const content = await page();
    if (!isCurrentRender(mine)) return;
    root.replaceChildren(...[content].flat());
  } catch (error) {
    if (!isCurrentRender(mine)) return;
    root.replaceChildren(el('h1', {}, section.label), el('div', { class: 'alert', role: 'alert' }, error.message));
  }
  document.title = `${root.querySelector('h1')?.textContent ?? section.label} · Gatehouse console`;
  root.dataset.page = section.path + (userID ? '/detail' : '');
}

function start() {
  document.getElementById('sign-out').addEventListener('click', () => {
    forget();
    // The fragment stays: the next sign-in of the same kind lands on the same page.
    render();
    announce('Signed out.');
  });
  window.addEventListener('hashchange', async () => { await render(); main().focus(); });
  window.addEventListener('console:unauthorized', () => {
    forget();
    render();
    announce('The key was refused: sign in again.');
  });
  render();
}

start();
