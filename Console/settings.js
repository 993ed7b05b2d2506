// App settings (GET and PATCH /v1/admin/app): a form per section, each saving only its own fields
// as a merge patch; the server's field errors are shown beside the fields they name.
import { call } from './api.js';
import { el, field, form, announce, lines, table, when } from './ui.js';

const BUILT_IN_METHODS = [
  { value: 'password', label: 'Password' }, { value: 'email_code', label: 'Emailed code' },
  { value: 'apple', label: 'Sign in with Apple' }, { value: 'google', label: 'Google' },
];

/** A whole number as a number; anything else as typed, for the server to refuse in place. */
function integer(text) {
  const trimmed = text.trim();
  return /^-?\d+$/.test(trimmed) ? Number(trimmed) : trimmed;
}
export const WEBHOOK_TYPES = [
  'user.created', 'user.updated', 'user.upgraded', 'user.deleted', 'user.restored', 'user.banned', 'user.unbanned', 'user.email_changed',
  'user.password_changed', 'identity.linked', 'identity.unlinked', 'session.revoked', 'identity.apple_consent_revoked',
  'identity.apple_account_deleted', 'user.email_relay_changed', 'mfa.enrolled', 'mfa.removed', 'passkey.added', 'passkey.removed',
];

/** A webhook secret as Gatehouse takes it: `whsec_` and the base64 of 32 random bytes, made here. */
function newWebhookSecret() {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return `whsec_${btoa(String.fromCharCode(...bytes))}`;
}

const nullable = (text) => (text.trim() === '' ? null : text.trim());
const secretState = (value) => (value && value.set ? 'A value is stored (write-only: it is never shown).' : 'Not set.');

function value(node, name) { return node.querySelector(`[name="${name}"]`); }

/** Reads the chosen file as text in the browser (the key never leaves it but in the PATCH). */
function readFile(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error);
    reader.readAsText(file);
  });
}

export async function settingsPage() {
  const { data: settings } = await call('GET', '/v1/admin/app');
  const page = el('div', {});
  const save = async (patch, what) => {
    const { data } = await call('PATCH', '/v1/admin/app', { body: patch });
    announce(`${what} saved.`);
    page.replaceChildren(...build(data));
  };
  page.append(...build(settings));
  return [el('h1', {}, 'Settings'), page];

  function build(s) {
    const methods = new Set(s.sign_in_methods ?? []);
    const general = form({
      title: 'General',
      children: [
        el('dl', { class: 'facts' }, el('dt', {}, 'App id'), el('dd', {}, el('code', {}, s.id)), el('dt', {}, 'App key'), el('dd', {}, el('code', {}, s.app_key))),
        field({ label: 'Name', name: 'name', value: s.name }),
        el('fieldset', {}, el('legend', {}, 'Sign-in methods'),
          BUILT_IN_METHODS.map((m) => field({ label: m.label, name: `method-${m.value}`, field: 'sign_in_methods', type: 'checkbox', value: methods.has(m.value) })),
          el('p', { class: 'hint' }, `Providers the app defines stay as they are: ${[...methods].filter((m) => !BUILT_IN_METHODS.some((b) => b.value === m)).join(', ') || 'none'}.`)),
        field({ label: 'Anyone may sign up', name: 'allow_signup', type: 'checkbox', value: s.allow_signup }),
        field({ label: 'Require a verified email', name: 'require_verified_email', type: 'checkbox', value: s.require_verified_email }),
        field({ label: 'Allow anonymous accounts', name: 'allow_anonymous', type: 'checkbox', value: s.allow_anonymous }),
        el('div', { class: 'grid2' },
          field({ label: 'Access token lifetime (seconds)', name: 'access_token_ttl_seconds', value: String(s.access_token_ttl_seconds), inputmode: 'numeric', hint: '60 to 86400.' }),
          field({ label: 'Refresh token lifetime (seconds)', name: 'refresh_token_ttl_seconds', value: String(s.refresh_token_ttl_seconds), inputmode: 'numeric', hint: '300 to 31622400.' }),
          field({ label: 'Minimum password length', name: 'password_min_length', value: String(s.password_min_length), inputmode: 'numeric', hint: '8 to 128.' })),
        field({ label: 'Allowed origins', name: 'allowed_origins', type: 'textarea', value: (s.allowed_origins ?? []).join('\n'), hint: 'One origin a line: https://shop.example.com (no path).' }),
      ],
      onsubmit: (node) => {
        const chosen = BUILT_IN_METHODS.filter((m) => value(node, `method-${m.value}`).checked).map((m) => m.value);
        const others = [...methods].filter((m) => !BUILT_IN_METHODS.some((b) => b.value === m));
        return save({
          name: value(node, 'name').value,
          sign_in_methods: [...chosen, ...others],
          allow_signup: value(node, 'allow_signup').checked,
          require_verified_email: value(node, 'require_verified_email').checked,
          allow_anonymous: value(node, 'allow_anonymous').checked,
          access_token_ttl_seconds: integer(value(node, 'access_token_ttl_seconds').value),
          refresh_token_ttl_seconds: integer(value(node, 'refresh_token_ttl_seconds').value),
          password_min_length: integer(value(node, 'password_min_length').value),
          allowed_origins: lines(value(node, 'allowed_origins').value),
        }, 'General settings');
      },
    });
    general.id = 'settings-general';

    const accounts = form({
      title: 'Accounts and sessions',
      children: [
        el('div', { class: 'grid2' },
          field({ label: 'Recent sign-in window (seconds)', name: 'recent_login_seconds', value: String(s.recent_login_seconds ?? ''), inputmode: 'numeric', hint: '1 to 86400: how recent a sign-in sensitive changes need.' }),
          field({ label: 'Session idle timeout (seconds)', name: 'refresh_token_idle_seconds', value: s.refresh_token_idle_seconds == null ? '' : String(s.refresh_token_idle_seconds), inputmode: 'numeric', hint: 'Empty: none; else 300 to 31622400.' }),
          field({ label: 'Deletion grace (days)', name: 'deletion_grace_days', value: String(s.deletion_grace_days ?? ''), inputmode: 'numeric', hint: '0 to 365: how long a user’s own deletion can be undone by signing in.' }),
          field({ label: 'Anonymous accounts live (days)', name: 'anonymous_ttl_days', value: String(s.anonymous_ttl_days ?? ''), inputmode: 'numeric', hint: '1 to 3650 since last seen.' })),
        field({ label: 'Same email from another provider', name: 'email_collision', type: 'select', value: s.email_collision, options: [
          { value: 'reject', label: 'Refuse (reject)' }, { value: 'separate', label: 'A separate account (separate)' },
        ] }),
        field({ label: 'Refresh token cookie', name: 'refresh_cookie', type: 'select', value: String(s.refresh_cookie), options: [
          { value: 'false', label: 'No cookie: in the body only' }, { value: 'true', label: 'In the body and a cookie' }, { value: 'only', label: 'In the cookie only' },
        ] }),
        field({ label: 'Require PKCE in the web flow', name: 'require_pkce', type: 'checkbox', value: s.require_pkce }),
        field({ label: 'Allow exports with password hashes', name: 'allow_hash_export', type: 'checkbox', value: s.allow_hash_export, hint: 'For a move only; turn it off after.' }),
      ],
      onsubmit: (node) => {
        const idle = value(node, 'refresh_token_idle_seconds').value.trim();
        const cookie = value(node, 'refresh_cookie').value;
        return save({
          recent_login_seconds: integer(value(node, 'recent_login_seconds').value),
          refresh_token_idle_seconds: idle === '' ? null : integer(idle),
          deletion_grace_days: integer(value(node, 'deletion_grace_days').value),
          anonymous_ttl_days: integer(value(node, 'anonymous_ttl_days').value),
          email_collision: value(node, 'email_collision').value,
          refresh_cookie: cookie === 'only' ? 'only' : cookie === 'true',
          require_pkce: value(node, 'require_pkce').checked,
          allow_hash_export: value(node, 'allow_hash_export').checked,
        }, 'Account settings');
      },
    });
    accounts.id = 'settings-accounts';

    const files = s.files ?? {};
    const PHOTO_TYPES = ['image/jpeg', 'image/png', 'image/webp', 'image/gif'];
    const filesForm = form({
      title: 'Files',
      children: [
        el('div', { class: 'grid2' },
          field({ label: 'Largest file (bytes)', name: 'files_max_bytes', field: 'files.max_bytes', value: String(files.max_bytes ?? ''), inputmode: 'numeric', hint: '1024 to 104857600.' }),
          field({ label: 'Files per user', name: 'files_max_files_per_user', field: 'files.max_files_per_user', value: String(files.max_files_per_user ?? ''), inputmode: 'numeric' }),
          field({ label: 'Bytes per user', name: 'files_max_bytes_per_user', field: 'files.max_bytes_per_user', value: String(files.max_bytes_per_user ?? ''), inputmode: 'numeric' })),
        el('fieldset', {}, el('legend', {}, 'Photo types'),
          PHOTO_TYPES.map((type) => field({ label: type, name: `photo_${type}`, field: 'files.photo_types', type: 'checkbox', value: (files.photo_types ?? []).includes(type) }))),
        el('fieldset', {}, el('legend', {}, 'Types a public file may have'),
          PHOTO_TYPES.map((type) => field({ label: type, name: `public_${type}`, field: 'files.public_types', type: 'checkbox', value: (files.public_types ?? []).includes(type) }))),
      ],
      onsubmit: (node) => save({ files: {
        max_bytes: integer(value(node, 'files_max_bytes').value),
        max_files_per_user: integer(value(node, 'files_max_files_per_user').value),
        max_bytes_per_user: integer(value(node, 'files_max_bytes_per_user').value),
        photo_types: PHOTO_TYPES.filter((type) => value(node, `photo_${type}`).checked),
        public_types: PHOTO_TYPES.filter((type) => value(node, `public_${type}`).checked),
      } }, 'File settings'),
    });
    filesForm.id = 'settings-files';

    const apple = s.apple ?? {};
    const appleForm = form({
      title: 'Sign in with Apple',
      children: [
        field({ label: 'Team ID', name: 'apple_team_id', field: 'apple.team_id', value: apple.team_id ?? '', hint: '10 uppercase letters or digits, from your Apple developer account.' }),
        field({ label: 'Key ID', name: 'apple_key_id', field: 'apple.key_id', value: apple.key_id ?? '', hint: 'The 10-character id of the Sign in with Apple key.' }),
        field({ label: 'Private key (.p8 file)', name: 'apple_private_key', field: 'apple.private_key', type: 'file', accept: '.p8,application/pkcs8,text/plain', hint: `${secretState(apple.private_key)} Choose the .p8 file to replace it; it is read here and sent to Gatehouse only.` }),
        apple.private_key?.set ? field({ label: 'Remove the stored key', name: 'apple_remove_key', field: 'apple.private_key', type: 'checkbox', value: false }) : null,
        field({ label: 'Services ID', name: 'apple_services_id', field: 'apple.services_id', value: apple.services_id ?? '', hint: 'The web flow’s client id (com.example.web).' }),
        field({ label: 'Client IDs', name: 'apple_client_ids', field: 'apple.client_ids', type: 'textarea', value: (apple.client_ids ?? []).join('\n'), hint: 'Bundle ids and the Services ID whose tokens are accepted, one a line.' }),
        field({ label: 'Redirect URIs', name: 'redirect_uris', type: 'textarea', value: (s.redirect_uris ?? []).join('\n'), hint: 'Where the web flow may return, one a line (https, or http on localhost).' }),
        field({ label: 'Require a nonce', name: 'apple_require_nonce', field: 'apple.require_nonce', type: 'checkbox', value: apple.require_nonce ?? true }),
      ],
      onsubmit: async (node) => {
        const patch = {
          team_id: nullable(value(node, 'apple_team_id').value),
          key_id: nullable(value(node, 'apple_key_id').value),
          services_id: nullable(value(node, 'apple_services_id').value),
          client_ids: lines(value(node, 'apple_client_ids').value),
          require_nonce: value(node, 'apple_require_nonce').checked,
        };
        const file = value(node, 'apple_private_key').files[0];
        if (file) patch.private_key = await readFile(file);
        else if (value(node, 'apple_remove_key')?.checked) patch.private_key = null;
        return save({ apple: patch, redirect_uris: lines(value(node, 'redirect_uris').value) }, 'Apple settings');
      },
    });
    appleForm.id = 'settings-apple';

    const googleForm = form({
      title: 'Google and Firebase',
      children: [
        field({ label: 'Google client IDs', name: 'google_client_ids', field: 'google.client_ids', type: 'textarea', value: (s.google?.client_ids ?? []).join('\n'), hint: 'The OAuth client ids (…apps.googleusercontent.com) whose ID tokens are accepted, one a line.' }),
        field({ label: 'Firebase project ID', name: 'firebase_project_id', field: 'firebase.project_id', value: s.firebase?.project_id ?? '', hint: 'Accept Firebase ID tokens of this project; empty: none.' }),
      ],
      onsubmit: (node) => save({
        google: { client_ids: lines(value(node, 'google_client_ids').value) },
        firebase: { project_id: nullable(value(node, 'firebase_project_id').value) },
      }, 'Google settings'),
    });
    googleForm.id = 'settings-google';

    const email = s.email ?? {};
    const emailForm = form({
      title: 'Email (SMTP)',
      children: [
        field({ label: 'SMTP server URL', name: 'smtp_url', field: 'email.smtp_url', value: email.smtp_url ?? '', hint: 'smtp://host:587 (STARTTLS) or smtps://host:465; empty: the platform’s mailer.' }),
        field({ label: 'SMTP user name', name: 'smtp_username', field: 'email.smtp_username', value: email.smtp_username ?? '' }),
        field({ label: 'SMTP password', name: 'smtp_password', field: 'email.smtp_password', type: 'password', autocomplete: 'new-password', hint: `${secretState(email.smtp_password)} Leave empty to keep it.` }),
        email.smtp_password?.set ? field({ label: 'Remove the stored password', name: 'smtp_remove_password', field: 'email.smtp_password', type: 'checkbox', value: false }) : null,
        field({ label: 'From', name: 'email_from', field: 'email.from', value: email.from ?? '', hint: 'Shop <no-reply@shop.example.com>; empty: no-reply@ and the server’s host.' }),
        field({ label: 'Language of the mail', name: 'email_locale', field: 'email.locale', value: email.locale ?? '', hint: 'en, ko, ja…; empty: the request’s language.' }),
      ],
      onsubmit: (node) => {
        const patch = {
          smtp_url: nullable(value(node, 'smtp_url').value),
          smtp_username: nullable(value(node, 'smtp_username').value),
          from: nullable(value(node, 'email_from').value),
          locale: nullable(value(node, 'email_locale').value),
        };
        const password = value(node, 'smtp_password').value;
        if (password) patch.smtp_password = password;
        else if (value(node, 'smtp_remove_password')?.checked) patch.smtp_password = null;
        return save({ email: patch }, 'Email settings');
      },
    });
    emailForm.id = 'settings-email';

    const mfa = s.mfa ?? {};
    const mfaForm = form({
      title: 'Second factors',
      children: [
        field({ label: 'Policy', name: 'mfa_policy', field: 'mfa.policy', type: 'select', value: mfa.policy ?? 'off', options: [
          { value: 'off', label: 'Off' }, { value: 'optional', label: 'Optional (users who enrolled answer a second step)' }, { value: 'required', label: 'Required for everyone' },
        ] }),
        field({ label: 'Authenticator apps (TOTP)', name: 'mfa_totp', field: 'mfa.methods', type: 'checkbox', value: (mfa.methods ?? []).includes('totp') }),
        field({ label: 'Passkeys', name: 'mfa_passkey', field: 'mfa.methods', type: 'checkbox', value: (mfa.methods ?? []).includes('passkey') }),
      ],
      onsubmit: (node) => save({ mfa: {
        policy: value(node, 'mfa_policy').value,
        methods: [['totp', 'mfa_totp'], ['passkey', 'mfa_passkey']].filter(([, n]) => value(node, n).checked).map(([m]) => m),
      } }, 'Second-factor settings'),
    });
    mfaForm.id = 'settings-mfa';

    const passkeys = s.passkeys ?? null;
    const passkeyForm = form({
      title: 'Passkeys',
      children: [
        field({ label: 'Relying party id', name: 'passkeys_rp_id', field: 'passkeys.rp_id', value: passkeys?.rp_id ?? '', hint: 'The domain passkeys are bound to (shop.example.com); empty turns passkeys off.' }),
        field({ label: 'Passkey origins', name: 'passkeys_origins', field: 'passkeys.origins', type: 'textarea', value: (passkeys?.origins ?? []).join('\n'), hint: 'The origins whose pages use passkeys, one a line.' }),
      ],
      onsubmit: (node) => {
        const rpID = nullable(value(node, 'passkeys_rp_id').value);
        return save({ passkeys: rpID === null ? null : { rp_id: rpID, origins: lines(value(node, 'passkeys_origins').value) } }, 'Passkey settings');
      },
    });
    passkeyForm.id = 'settings-passkeys';

    const limits = s.rate_limits ?? {};
    const limitFields = [
      ['auth_per_minute_per_ip', 'Sign-ins a minute per IP', '1 to 1000.'],
      ['web_flow_per_minute_per_ip', 'Web-flow requests a minute per IP', '1 to 1000.'],
      ['mail_per_hour', 'Mail an hour', 'Up to the server’s GATEHOUSE_MAX_MAIL_PER_HOUR.'],
      ['uploads_per_hour_per_user', 'Uploads an hour per user', 'Up to the server’s GATEHOUSE_MAX_UPLOADS_PER_HOUR_PER_USER.'],
    ];
    const limitsForm = form({
      title: 'Limits',
      children: el('div', { class: 'grid2' }, limitFields.map(([key, label, hint]) =>
        field({ label, name: `limit_${key}`, field: `rate_limits.${key}`, value: String(limits[key] ?? ''), inputmode: 'numeric', hint }))),
      onsubmit: (node) => save({ rate_limits: Object.fromEntries(limitFields.map(([key]) => [key, integer(value(node, `limit_${key}`).value)])) }, 'Limits'),
    });
    limitsForm.id = 'settings-limits';

    const advanced = form({
      title: 'Mail templates and providers (JSON)',
      children: [
        el('p', { class: 'hint' }, 'Edited as the API takes them: docs/email.md ("An app’s own templates") and docs/apps.md ("Providers the app defines"). A provider’s client secret reads {"set": true}; leave it so to keep it.'),
        field({ label: 'Mail templates (email.templates)', name: 'email_templates', field: 'email.templates', type: 'textarea', rows: 8, value: JSON.stringify(s.email?.templates ?? {}, null, 2) }),
        field({ label: 'Providers the app defines (oidc_providers)', name: 'oidc_providers', type: 'textarea', rows: 8, value: JSON.stringify(s.oidc_providers ?? [], null, 2) }),
      ],
      onsubmit: (node) => {
        const parsed = {};
        const problems = [];
        for (const [name, apiField] of [['email_templates', 'email.templates'], ['oidc_providers', 'oidc_providers']]) {
          try { parsed[name] = JSON.parse(value(node, name).value); } catch (error) { problems.push({ field: apiField, message: `Not JSON: ${error.message}` }); }
        }
        if (problems.length) throw { fields: problems };
        return save({ email: { templates: parsed.email_templates }, oidc_providers: parsed.oidc_providers }, 'Templates and providers');
      },
    });
    advanced.id = 'settings-advanced';

    return [general, accounts, appleForm, googleForm, emailForm, emailTestForm(email), mfaForm, passkeyForm, limitsForm, filesForm,
      webhooksForm(s.webhooks ?? []), ...webhookTestPart(s.webhooks ?? []), advanced];
  }

  /**
   * A test message through the app's own SMTP server as saved (POST /v1/admin/app/email/test):
   * the server's answer shown in place, the reason of a failure with it.
   */
  function emailTestForm(email) {
    const result = el('p', { id: 'email-test-result', role: 'status' });
    const node = form({
      title: 'Send a test message',
      submit: 'Send test',
      className: 'card test',
      children: [
        el('p', { class: 'hint' }, email.smtp_url
          ? 'Sends a short fixed message through the SMTP server saved above (save changes first). At most 10 a minute.'
          : 'The app has no SMTP server of its own: its mail goes through the platform’s. Save an SMTP server URL above to test it.'),
        field({ label: 'Send to', name: 'email_test_to', field: 'to', type: 'email', autocomplete: 'email', hint: 'Any address you can read, such as your own.' }),
        result,
      ],
      onsubmit: async (formNode) => {
        result.textContent = 'Sending…';
        result.className = '';
        try {
          await call('POST', '/v1/admin/app/email/test', { body: { to: value(formNode, 'email_test_to').value.trim() } });
          result.textContent = 'Sent: the SMTP server took the test message.';
          result.className = 'good';
        } catch (error) {
          result.textContent = error.code === 'email/test-failed'
            ? `Not sent (${error.problem?.reason ?? 'other'}): ${error.message}` : '';
          result.className = 'bad';
          if (error.code !== 'email/test-failed') throw error;
        }
      },
    });
    node.id = 'email-test';
    return node;
  }

  /** A test delivery (POST /v1/admin/app/webhooks/test) and the recent deliveries (GET /v1/admin/webhooks/deliveries). */
  function webhookTestPart(hooks) {
    const list = el('div', { id: 'webhook-deliveries' }, el('p', { class: 'hint' }, 'Loading…'));
    const load = async () => {
      try {
        const answer = await call('GET', '/v1/admin/webhooks/deliveries', { query: { limit: 20 } });
        list.replaceChildren(table('Recent deliveries, newest first', [
          { label: 'Created', cell: (d) => when(d.created_at) },
          { label: 'Event', cell: (d) => el('code', {}, d.event_type ?? '—') },
          { label: 'URL', cell: (d) => d.url ?? '—' },
          { label: 'State', cell: (d) => el('span', { class: `badge ${d.state === 'delivered' ? 'good' : d.state === 'dead' ? 'bad' : ''}` }, d.state) },
          { label: 'Attempts', cell: (d) => String(d.attempts) },
          { label: 'Last status', cell: (d) => (d.last_status == null ? '—' : String(d.last_status)) },
          { label: 'Last error', cell: (d) => d.last_error ?? '—' },
          { label: 'Next attempt', cell: (d) => when(d.next_attempt_at) },
          { label: 'Delivered', cell: (d) => when(d.delivered_at) },
        ], answer.data, 'No deliveries yet (delivered ones are kept 7 days).'));
      } catch (error) {
        list.replaceChildren(el('p', { class: 'alert', role: 'alert' }, error.message));
      }
    };
    const refresh = el('button', { type: 'button', class: 'quiet', id: 'webhook-deliveries-refresh', onclick: () => load() }, 'Refresh the deliveries');
    const node = form({
      title: 'Test deliveries',
      submit: 'Send test delivery',
      className: 'card test',
      children: [
        el('p', { class: 'hint' }, hooks.length
          ? 'Queues a signed webhook.test event to the chosen webhook (as saved), delivered like every event. At most 10 a minute.'
          : 'Add and save a webhook first.'),
        field({ label: 'Webhook', name: 'webhook_test_url', field: 'url', type: 'select', value: '',
          options: [{ value: '', label: 'Every webhook' }, ...hooks.map((h) => ({ value: h.url, label: h.url }))] }),
      ],
      onsubmit: async (formNode) => {
        const url = value(formNode, 'webhook_test_url').value;
        const { data } = await call('POST', '/v1/admin/app/webhooks/test', { body: url ? { url } : {} });
        announce(`Test delivery queued (${data.deliveries.length}).`);
        await load();
      },
    });
    node.id = 'webhook-test';
    load();
    return [node, el('section', { class: 'card', id: 'webhook-deliveries-part' }, el('h2', {}, 'Recent deliveries'), list,
      el('div', { class: 'actions' }, refresh))];
  }

  /** The webhooks: each hook's URL, events and secret (kept, or a new one made in the browser and shown once). */
  function webhooksForm(hooks) {
    const list = el('div', { id: 'webhook-list' });
    const secrets = el('div', { id: 'webhook-secrets' });
    const addRow = (hook) => {
      const index = list.children.length;
      const chosen = new Set(hook?.events ?? ['user.created', 'user.deleted']);
      const row = el('fieldset', { class: 'webhook', dataset: { existing: hook ? 'true' : 'false' } },
        el('legend', {}, hook ? `Webhook ${index + 1}` : `New webhook ${index + 1}`),
        field({ label: 'URL', name: `webhook_url_${index}`, field: `webhooks[${index}].url`, value: hook?.url ?? '', hint: 'An https URL that receives POSTs.' }),
        el('fieldset', {}, el('legend', {}, 'Events'),
          el('div', { class: 'grid2' }, WEBHOOK_TYPES.map((type) => field({ label: type, name: `webhook_${index}_${type}`, field: `webhooks[${index}].events`, type: 'checkbox', value: chosen.has(type) })))),
        hook ? field({ label: 'Make a new secret (the receiver must then use it)', name: `webhook_rotate_${index}`, field: `webhooks[${index}].secret`, type: 'checkbox', value: false })
          : el('p', { class: 'hint', dataset: { field: `webhooks[${index}].secret` } }, 'A secret is made for it when saved, and shown once.'),
        field({ label: 'Remove this webhook', name: `webhook_remove_${index}`, type: 'checkbox', value: false }));
      list.append(row);
      return row;
    };
    hooks.forEach(addRow);
    const add = el('button', { type: 'button', class: 'quiet', id: 'webhook-add', onclick: () => { addRow(null).querySelector('input').focus(); } }, 'Add a webhook');
    const node = form({
      title: 'Webhooks',
      children: [
        el('p', { class: 'hint' }, 'Gatehouse POSTs the chosen events to each URL, signed with its secret (docs/admin.md, "Webhooks"). Deliveries that were given up are under Outbox.'),
        secrets, list, el('div', { class: 'actions' }, add),
      ],
      onsubmit: async (formNode) => {
        const made = [];
        const patch = [];
        [...list.children].forEach((row, index) => {
          if (value(formNode, `webhook_remove_${index}`).checked) return;
          const url = value(formNode, `webhook_url_${index}`).value.trim();
          const events = WEBHOOK_TYPES.filter((type) => value(formNode, `webhook_${index}_${type}`).checked);
          let secret = { set: true };
          if (row.dataset.existing !== 'true' || value(formNode, `webhook_rotate_${index}`)?.checked) {
            secret = newWebhookSecret();
            made.push([url, secret]);
          }
          patch.push({ url, events, secret });
        });
        const { data } = await call('PATCH', '/v1/admin/app', { body: { webhooks: patch } });
        page.replaceChildren(...build(data));
        const shown = page.querySelector('#webhook-secrets');
        if (made.length) {
          shown.replaceChildren(el('div', { class: 'notice' }, el('p', {}, 'Give each receiver its secret now: it is shown this once.'),
            made.map(([url, secret]) => el('p', {}, `${url}: `, el('code', { class: 'secret' }, secret)))));
        }
        announce('Webhooks saved.');
      },
    });
    node.id = 'settings-webhooks';
    return node;
  }
}
