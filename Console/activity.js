// The audit log (GET /v1/admin/events), the outbox's dead items with retry (GET /v1/admin/outbox,
// POST …/retry) and the app's keys (POST /v1/admin/app/secret-keys, …/signing-keys/rotate).
import { call, credential, remember } from './api.js';
import { el, field, form, announce, table, when } from './ui.js';

export async function auditPage() {
  const results = el('div', { id: 'audit-results' });
  let filters = {};
  let cursor = null;
  const more = el('button', { type: 'button', class: 'quiet', hidden: true, onclick: () => load(false) }, 'Older events');
  async function load(fresh) {
    if (fresh) cursor = null;
    const page = await call('GET', '/v1/admin/events', { query: { ...filters, limit: 50, cursor } });
    const rows = table('Events, newest first', [
      { label: 'When', cell: (e) => when(e.created_at) },
      { label: 'Type', cell: (e) => el('code', {}, e.type) },
      { label: 'User', cell: (e) => (e.user_id ? el('a', { href: `#/users/${encodeURIComponent(e.user_id)}` }, e.user_id) : '—') },
      { label: 'IP', cell: (e) => e.ip ?? '—' },
      { label: 'Details', cell: (e) => el('code', {}, JSON.stringify(e.data ?? {})) },
    ], page.data, 'No events.');
    if (fresh) results.replaceChildren(rows);
    else if (page.data.length) results.querySelector('tbody')?.append(...rows.querySelectorAll('tbody tr'));
    cursor = page.next_cursor;
    more.hidden = !cursor;
  }
  const filter = form({
    submit: 'Filter',
    children: el('div', { class: 'grid2' },
      field({ label: 'Event type', name: 'type', hint: 'Such as user.signed_in; empty: all.' }),
      field({ label: 'User id', name: 'user_id', hint: 'usr_…; empty: every user.' })),
    onsubmit: async (node) => {
      filters = { type: node.querySelector('[name="type"]').value.trim(), user_id: node.querySelector('[name="user_id"]').value.trim() };
      await load(true);
    },
  });
  filter.id = 'audit-filter';
  await load(true);
  return [el('h1', {}, 'Audit log'), filter, results, el('div', { class: 'actions' }, more)];
}

export async function outboxPage() {
  const results = el('div', { id: 'outbox-results' });
  const alert = el('div', { class: 'alert', role: 'alert', tabindex: '-1' });
  async function load() {
    const page = await call('GET', '/v1/admin/outbox', { query: { state: 'dead', limit: 100 } });
    results.replaceChildren(table('Dead items, newest first', [
      { label: 'Kind', cell: (i) => i.kind },
      ...(credential()?.role === 'operator' ? [{ label: 'App', cell: (i) => el('code', {}, i.app_id) }] : []),
      { label: 'State', cell: (i) => i.state },
      { label: 'Destination', cell: (i) => i.destination ?? '—' },
      { label: 'Why', cell: (i) => i.last_error ?? '—' },
      { label: 'Died', cell: (i) => when(i.dead_at) },
      { label: 'Action', cell: (i) => (i.retryable
        ? el('button', { type: 'button', 'aria-label': `Retry ${i.kind} item ${i.id}`, dataset: { item: i.id }, onclick: async (event) => {
          event.target.disabled = true;
          alert.textContent = '';
          try {
            await call('POST', `/v1/admin/outbox/${encodeURIComponent(i.id)}/retry`);
            announce('Queued again.');
            await load();
          } catch (error) {
            alert.textContent = error.message;
            alert.focus();
            event.target.disabled = false;
          }
        } }, 'Retry')
        : el('span', { class: 'hint' }, i.state === 'dead' ? 'payload erased' : 'queued')) },
    ], page.data, 'No dead items: everything was delivered or is still being tried.'));
  }
  await load();
  return [el('h1', {}, 'Outbox: dead items'),
    el('p', { class: 'hint' }, 'Mail, webhook deliveries and Apple revocations that were given up. Fix the cause, then queue them again.'),
    alert, results];
}

export async function keysPage() {
  const output = el('div', { id: 'keys-output' });
  const secretForm = form({
    title: 'Secret key',
    submit: 'Make a new secret key',
    children: [
      el('p', { class: 'hint' }, 'The key you signed in with keeps working for 24 hours unless the others are revoked now.'),
      field({ label: 'Revoke every other secret key now', name: 'revoke_others', type: 'checkbox', value: false }),
    ],
    onsubmit: async (node) => {
      const revoke = node.querySelector('[name="revoke_others"]').checked;
      const before = credential();
      const { data } = await call('POST', '/v1/admin/app/secret-keys', { query: { revoke_others: revoke ? 'true' : undefined } });
      // Kept only if this tab is still signed in as it was (not after a sign-out meanwhile).
      const now = credential();
      if (before && now && now.token === before.token) remember({ ...now, token: data.secret_key });
      output.replaceChildren(el('div', { class: 'notice' }, el('p', {}, 'The new secret key, shown this once (this console now uses it):'),
        el('p', { class: 'secret' }, data.secret_key)));
      announce('A new secret key was made.');
    },
  });
  const signingForm = form({
    title: 'Signing key',
    submit: 'Rotate the signing key',
    children: [
      el('p', { class: 'hint' }, 'New access tokens are signed with a new key; the previous one stays published so tokens already issued still verify.'),
      field({ label: 'Withdraw the previous key now (tokens it signed stop verifying)', name: 'revoke_previous', type: 'checkbox', value: false }),
    ],
    onsubmit: async (node) => {
      const revoke = node.querySelector('[name="revoke_previous"]').checked;
      const { data } = await call('POST', '/v1/admin/app/signing-keys/rotate', { query: { revoke_previous: revoke ? 'true' : undefined } });
      output.replaceChildren(el('p', { class: 'notice' }, `New signing key: ${data.kid}`));
      announce('The signing key was rotated.');
    },
  });
  return [el('h1', {}, 'Keys'), output, secretForm, signingForm];
}
