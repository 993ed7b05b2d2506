// Users: search, and one user's detail with their identities, factors and recent events (sign-ins,
// sessions); ban and lift, sign out everywhere, delete (GET/POST/DELETE /v1/admin/users…).
import { call, download } from './api.js';
import { el, field, form, announce, table, when, nextRender, isCurrentRender } from './ui.js';

const name = (u) => [u.first_name, u.last_name].filter(Boolean).join(' ') || u.display_name || '—';
const banBadge = (u) => (u.ban ? el('span', { class: 'badge bad' }, u.ban.suspended_until ? `suspended until ${when(u.ban.suspended_until)}` : 'banned') : el('span', { class: 'badge good' }, 'active'));

export async function usersPage() {
  const results = el('div', { id: 'user-results' });
  let cursor = null;
  let query = '';
  const more = el('button', { type: 'button', class: 'quiet', hidden: true, onclick: () => load(false) }, 'More users');
  async function load(fresh) {
    if (fresh) cursor = null;
    const page = await call('GET', '/v1/admin/users', { query: { query, limit: 25, cursor } });
    const rows = table('Users, newest first', [
      { label: 'Email', cell: (u) => el('a', { href: `#/users/${encodeURIComponent(u.id)}` }, u.email ?? '(no email)') },
      { label: 'Name', cell: name },
      { label: 'Status', cell: banBadge },
      { label: 'Created', cell: (u) => when(u.created_at) },
    ], page.data, 'No user matches.');
    if (fresh) results.replaceChildren(rows);
    else if (page.data.length) results.querySelector('tbody')?.append(...rows.querySelectorAll('tbody tr'));
    cursor = page.next_cursor;
    more.hidden = !cursor;
  }
  const search = form({
    submit: 'Search',
    children: [field({ label: 'Search users', name: 'query', type: 'search', hint: 'An exact user id, or part of an email, a name or a display name.' })],
    onsubmit: async (node) => {
      query = node.querySelector('[name="query"]').value.trim();
      await load(true);
      const shown = results.querySelectorAll('tbody tr').length;
      announce(`${shown} ${shown === 1 ? 'user' : 'users'} shown.`);
    },
  });
  search.id = 'user-search';
  await load(true);
  return [el('h1', {}, 'Users'), search, results, el('div', { class: 'actions' }, more), importForm(() => load(true)), exportSection()];
}

/** POST /v1/admin/users/import: an NDJSON file chosen here, read in the browser, sent as it is. */
function importForm(reload) {
  const report = el('div', { id: 'import-report' });
  const node = form({
    title: 'Import users',
    submit: 'Import',
    children: [
      el('p', { class: 'hint' }, 'One JSON object a line, at most 10,000 lines (docs/admin.md, "Importing users"). Existing users are skipped, never overwritten.'),
      field({ label: 'NDJSON file', name: 'import_file', field: 'import', type: 'file', accept: '.ndjson,.jsonl,application/x-ndjson,text/plain' }),
      report,
    ],
    onsubmit: async (formNode) => {
      const file = formNode.querySelector('[name="import_file"]').files[0];
      if (!file) throw { fields: [{ field: 'import', message: 'Choose a file.' }] };
      const { data } = await call('POST', '/v1/admin/users/import', { raw: { body: await file.text(), type: 'application/x-ndjson' } });
      report.replaceChildren(el('p', { class: 'notice' }, `Imported ${data.imported}, skipped ${data.skipped}, failed ${data.failed}.`),
        table('Lines that failed', [
          { label: 'Line', cell: (e) => String(e.line) }, { label: 'Code', cell: (e) => el('code', {}, e.code) }, { label: 'Problem', cell: (e) => e.message },
        ], data.errors ?? [], ''));
      announce(`Imported ${data.imported} users.`);
      await reload();
    },
  });
  node.id = 'user-import';
  return node;
}

/** GET /v1/admin/users/export, saved as a file (recorded as users.exported). */
function exportSection() {
  const alert = el('div', { class: 'alert', role: 'alert', tabindex: '-1' });
  return el('section', { class: 'card', id: 'user-export' }, el('h2', {}, 'Export users'),
    el('p', { class: 'hint' }, 'Every user as NDJSON, one import line each, without password hashes.'), alert,
    el('div', { class: 'actions' }, el('button', { type: 'button', onclick: async (event) => {
      event.target.disabled = true;
      alert.textContent = '';
      try {
        const blob = await download('/v1/admin/users/export');
        const link = el('a', { href: URL.createObjectURL(blob), download: 'users.ndjson' }, 'users.ndjson');
        link.click();
        setTimeout(() => URL.revokeObjectURL(link.href), 10000);
        announce('The export is saved as users.ndjson.');
      } catch (error) {
        alert.textContent = error.message;
        alert.focus();
      } finally {
        event.target.disabled = false;
      }
    } }, 'Download users.ndjson')));
}

export async function userPage(id) {
  const { data: user } = await call('GET', `/v1/admin/users/${encodeURIComponent(id)}`);
  const { data: events } = await call('GET', '/v1/admin/events', { query: { user_id: user.id, limit: 20 } });
  const { data: sessions } = await call('GET', `/v1/admin/users/${encodeURIComponent(user.id)}/sessions`, { query: { limit: 50 } });
  // The page is drawn anew before the change is announced: what is announced is on screen. A
  // redraw is a render: its answer is dropped when another began after it (a newer redraw,
  // another page, a sign-out), as the shell drops a page's (console.js).
  const refresh = async (message) => {
    const mine = nextRender();
    const content = await userPage(id);
    if (!isCurrentRender(mine)) return;
    document.getElementById('main').replaceChildren(...content);
    announce(message);
  };

  const facts = el('dl', { class: 'facts' },
    el('dt', {}, 'Id'), el('dd', {}, el('code', {}, user.id)),
    el('dt', {}, 'Email'), el('dd', {}, user.email ?? '—', user.email_verified ? ' (verified)' : user.email ? ' (not verified)' : ''),
    el('dt', {}, 'Name'), el('dd', {}, name(user)),
    el('dt', {}, 'Status'), el('dd', { id: 'user-status' }, banBadge(user), user.ban ? ` ${user.ban.sanction_code}${user.ban.reason ? `: ${user.ban.reason}` : ''}` : ''),
    el('dt', {}, 'Created'), el('dd', {}, when(user.created_at)),
    el('dt', {}, 'Last sign-in'), el('dd', {}, when(user.last_sign_in_at)),
    user.pending_deletion ? [el('dt', {}, 'Deletion'), el('dd', {}, `requested, erased at ${when(user.pending_deletion.purge_at)}`)] : null);

  const banForm = user.ban
    ? el('section', { class: 'card', id: 'user-ban' }, el('h2', {}, 'Ban'), el('p', {}, 'Sign-ins are refused while the ban holds.'),
      el('div', { class: 'actions' }, el('button', { type: 'button', id: 'lift-ban', onclick: async (event) => {
        event.target.disabled = true;
        await call('DELETE', `/v1/admin/users/${encodeURIComponent(user.id)}/ban`);
        await refresh('The ban is lifted.');
      } }, 'Lift the ban')))
    : form({
      title: 'Ban',
      submit: 'Ban this user',
      children: [
        el('p', { class: 'hint' }, 'Every session ends at once and sign-ins are refused until the ban is lifted or its end passes.'),
        field({ label: 'Sanction code', name: 'sanction_code', hint: 'Shown to the app (1–64 characters), such as spam.' }),
        field({ label: 'Reason', name: 'reason', type: 'textarea', hint: 'For admins only.' }),
        field({ label: 'Suspended until', name: 'suspended_until', hint: 'An RFC 3339 time such as 2027-01-31T12:00:00Z; empty: until lifted.' }),
      ],
      onsubmit: async (node) => {
        const get = (n) => node.querySelector(`[name="${n}"]`).value.trim();
        await call('POST', `/v1/admin/users/${encodeURIComponent(user.id)}/ban`, { body: {
          sanction_code: get('sanction_code'), ...(get('reason') ? { reason: get('reason') } : {}), suspended_until: get('suspended_until') || null,
        } });
        await refresh('The user is banned.');
      },
    });
  if (!user.ban) banForm.id = 'user-ban';

  const confirmDelete = el('div', { class: 'actions', hidden: true },
    el('p', { id: 'delete-warning' }, 'The account is erased now, with its sessions and Apple tokens. This cannot be undone.'),
    el('button', { type: 'button', class: 'danger', id: 'delete-confirm', 'aria-describedby': 'delete-warning', onclick: async (event) => {
      event.target.disabled = true;
      await call('DELETE', `/v1/admin/users/${encodeURIComponent(user.id)}`);
      announce('The user is deleted.');
      location.hash = '#/users';
    } }, 'Delete permanently'),
    el('button', { type: 'button', class: 'quiet', onclick: () => { confirmDelete.hidden = true; } }, 'Cancel'));

  const actions = el('section', { class: 'card', id: 'user-actions' }, el('h2', {}, 'Sessions and account'),
    el('div', { class: 'actions' },
      el('button', { type: 'button', id: 'sign-out-everywhere', onclick: async (event) => {
        event.target.disabled = true;
        await call('DELETE', `/v1/admin/users/${encodeURIComponent(user.id)}/sessions`);
        await refresh('Every session of the user has ended.');
      } }, 'Sign out everywhere'),
      el('button', { type: 'button', class: 'danger', id: 'delete-user', onclick: () => { confirmDelete.hidden = false; confirmDelete.querySelector('#delete-confirm').focus(); } }, 'Delete the account…')),
    confirmDelete);

  const json = (value) => JSON.stringify(value ?? {}, null, 2);
  const customData = form({
    title: 'Custom data',
    children: [
      el('p', { class: 'hint' }, 'app_metadata is the app’s (the user cannot change it); user_metadata the user’s own (docs/admin.md, "Custom data").'),
      field({ label: 'Display name', name: 'display_name', value: user.display_name ?? '' }),
      field({ label: 'app_metadata (JSON)', name: 'app_metadata', type: 'textarea', rows: 4, value: json(user.app_metadata) }),
      field({ label: 'user_metadata (JSON)', name: 'user_metadata', type: 'textarea', rows: 4, value: json(user.user_metadata) }),
    ],
    onsubmit: async (node) => {
      const body = { display_name: node.querySelector('[name="display_name"]').value.trim() || null };
      const problems = [];
      for (const name of ['app_metadata', 'user_metadata']) {
        try { body[name] = JSON.parse(node.querySelector(`[name="${name}"]`).value); } catch (error) { problems.push({ field: name, message: `Not JSON: ${error.message}` }); }
      }
      if (problems.length) throw { fields: problems };
      await call('PATCH', `/v1/admin/users/${encodeURIComponent(user.id)}`, { body });
      await refresh('The custom data is saved.');
    },
  });
  customData.id = 'user-custom-data';

  return [
    el('p', {}, el('a', { href: '#/users' }, '← All users')),
    el('h1', {}, user.email ?? user.id),
    el('section', { class: 'card' }, facts),
    el('h2', {}, 'Identities'),
    (user.identities ?? []).length
      ? el('ul', { id: 'user-identities' }, user.identities.map((provider) => el('li', {}, provider)))
      : el('p', { class: 'hint' }, 'No way to sign in yet (an anonymous or imported account).'),
    el('h2', {}, 'Second factors'),
    table('Second factors', [
      { label: 'Type', cell: (f) => f.type }, { label: 'Name', cell: (f) => f.name ?? '—' }, { label: 'Last used', cell: (f) => when(f.last_used_at) },
      { label: 'Action', cell: (f) => el('button', { type: 'button', class: 'quiet', 'aria-label': `Remove the ${f.type} factor ${f.name ?? f.id}`, onclick: async (event) => {
        event.target.disabled = true;
        await call('DELETE', `/v1/admin/users/${encodeURIComponent(user.id)}/factors/${encodeURIComponent(f.id)}`);
        await refresh('The factor is removed.');
      } }, 'Remove') },
    ], user.factors ?? [], 'No second factor.'),
    actions,
    banForm,
    customData,
    el('h2', {}, 'Sessions'),
    table('The user’s signed-in devices', [
      { label: 'Signed in', cell: (s) => when(s.created_at) }, { label: 'Last used', cell: (s) => when(s.last_used_at) },
      { label: 'With', cell: (s) => el('code', {}, s.method) }, { label: 'IP', cell: (s) => s.ip ?? '—' },
      { label: 'Device', cell: (s) => s.user_agent ?? '—' },
    ], sessions, 'No open session.'),
    el('h2', {}, 'Recent events'),
    table('The user’s recent events, newest first', [
      { label: 'When', cell: (e) => when(e.created_at) }, { label: 'Type', cell: (e) => el('code', {}, e.type) },
      { label: 'Session', cell: (e) => e.session_id ?? '—' }, { label: 'IP', cell: (e) => e.ip ?? '—' },
    ], events, 'No events.'),
  ];
}
