// The admin API, as the console calls it: same origin, the credential as a bearer token, never
// in a URL. The credential lives in sessionStorage only (gone when the tab closes).
const STORAGE_KEY = 'gatehouse-console:credential';

/** `{role: 'tenant' | 'operator', token, label}` or null. */
export function credential() {
  try {
    const value = JSON.parse(sessionStorage.getItem(STORAGE_KEY) ?? 'null');
    return value && typeof value.token === 'string' && (value.role === 'tenant' || value.role === 'operator') ? value : null;
  } catch {
    return null;
  }
}

export function remember(value) { sessionStorage.setItem(STORAGE_KEY, JSON.stringify(value)); }
export function forget() { sessionStorage.removeItem(STORAGE_KEY); }

/** A problem+json answer: `code`, `detail` and the field errors (`errors[{field, message}]`). */
export class APIError extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `The server answered ${status}.`);
    this.status = status;
    this.code = problem?.code ?? null;
    this.fields = Array.isArray(problem?.errors) ? problem.errors : [];
    this.requestID = problem?.request_id ?? null;
    /** The whole problem (its extensions, such as a failed test message's `reason`). */
    this.problem = problem ?? null;
  }
}

/**
 * Calls the admin API. `query` becomes the query string (never a credential), `body` is sent as
 * JSON. Resolves to the parsed answer (null for 204); rejects with an APIError.
 */
export async function call(method, path, { query, body, raw, token } = {}) {
  const bearer = token ?? credential()?.token;
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== '') url.searchParams.set(name, value);
  }
  const headers = { Accept: 'application/json' };
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (raw) headers['Content-Type'] = raw.type;
  let response;
  try {
    response = await fetch(url, {
      method, headers, body: raw ? raw.body : body === undefined ? undefined : JSON.stringify(body), cache: 'no-store', credentials: 'omit', redirect: 'error',
    });
  } catch {
    throw new APIError(0, { detail: 'The server could not be reached.' });
  }
  if (response.status === 204) return null;
  const text = await response.text();
  let parsed = null;
  if (text && (response.headers.get('Content-Type') ?? '').includes('json')) {
    try { parsed = JSON.parse(text); } catch { parsed = null; }
  }
  if (!response.ok) {
    if (response.status === 401 && credential()) window.dispatchEvent(new CustomEvent('console:unauthorized'));
    throw new APIError(response.status, parsed);
  }
  return parsed ?? text;
}

/** A GET whose answer is kept as a Blob (an export), or an APIError. */
export async function download(path, { query } = {}) {
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query ?? {})) url.searchParams.set(name, value);
  const response = await fetch(url, { headers: { Authorization: `Bearer ${credential()?.token}` }, cache: 'no-store', credentials: 'omit' });
  if (!response.ok) {
    let problem = null;
    try { problem = await response.json(); } catch { problem = null; }
    throw new APIError(response.status, problem);
  }
  return response.blob();
}

/** A plain-text GET (health, metrics). */
export async function text(path, { token } = {}) {
  const bearer = token ?? credential()?.token;
  const response = await fetch(new URL(path, location.origin), {
    headers: bearer ? { Authorization: `Bearer ${bearer}` } : {}, cache: 'no-store', credentials: 'omit',
  });
  return { status: response.status, body: await response.text() };
}
