// DOM helpers: elements are built with textContent and attributes, never from HTML strings, so
// nothing the server returns can become markup or script.
let nextID = 0;

/** `el('button', {type: 'button', onclick}, 'Save')`. `class` and `for` are plain attributes. */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') node.addEventListener(name.slice(2), value);
    else if (name === 'dataset') Object.assign(node.dataset, value);
    else if (name === 'value') node.value = value;
    else if (name === 'checked') node.checked = Boolean(value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

// Each render's number (console.js, and a page drawn anew in place): an answer that arrives after
// a newer render began (another page, a sign-out, a newer redraw) is dropped.
let renders = 0;
export const nextRender = () => ++renders;
export const isCurrentRender = (number) => number === renders;

export const uid = (prefix) => `${prefix}-${++nextID}`;

/**
 * A labelled control with a hint and an error slot tied to it by aria-describedby.
 * `field` is the API's name for it (`apple.team_id`): the server's errors for that name land here.
 */
export function field({ label, name, field: apiField = name, type = 'text', value = '', hint, options, rows, accept, autocomplete = 'off', inputmode }) {
  const id = uid(name.replace(/[^a-z0-9]/gi, '-'));
  const errorID = `${id}-error`;
  const hintID = hint ? `${id}-hint` : null;
  const describedBy = [hintID, errorID].filter(Boolean).join(' ');
  let control;
  if (type === 'select') {
    control = el('select', { id, name, 'aria-describedby': describedBy, dataset: { field: apiField } },
      options.map((o) => el('option', { value: o.value, selected: o.value === value }, o.label)));
  } else if (type === 'textarea') {
    control = el('textarea', { id, name, rows: rows ?? 3, 'aria-describedby': describedBy, spellcheck: 'false', dataset: { field: apiField } });
    control.value = value;
  } else {
    control = el('input', { id, name, type, value: type === 'file' ? undefined : value, accept, autocomplete, inputmode, spellcheck: 'false', 'aria-describedby': describedBy, dataset: { field: apiField } });
  }
  if (type === 'checkbox') {
    control.checked = Boolean(value);
    return el('div', { class: 'check' }, control, el('label', { for: id }, label), hint ? el('p', { class: 'hint', id: hintID }, hint) : null,
      el('p', { class: 'error', id: errorID }));
  }
  return el('div', { class: 'field' }, el('label', { for: id }, label), control, hint ? el('p', { class: 'hint', id: hintID }, hint) : null,
    el('p', { class: 'error', id: errorID }));
}

/** Clears a form's field errors and its alert. */
export function clearErrors(form) {
  for (const control of form.querySelectorAll('[aria-invalid]')) control.removeAttribute('aria-invalid');
  for (const slot of form.querySelectorAll('.error')) slot.textContent = '';
  const alert = form.querySelector('.alert');
  if (alert) alert.textContent = '';
}

/**
 * Shows an APIError in `form`: each `errors[]` entry next to the control whose API name it
 * names (`allowed_origins[2]` lands on `allowed_origins`, `apple.private_key` on the key's
 * upload), the rest and the problem's detail in the form's alert. Focuses the first bad control.
 */
export function showErrors(form, error) {
  clearErrors(form);
  const alert = form.querySelector('.alert');
  const unplaced = [];
  let first = null;
  for (const { field: name, message } of error.fields ?? []) {
    const control = controlFor(form, String(name ?? ''));
    const slotID = control?.getAttribute('aria-describedby')?.split(' ').at(-1);
    if (!slotID) { unplaced.push(`${name}: ${message}`); continue; }
    control.setAttribute('aria-invalid', 'true');
    const slot = document.getElementById(slotID);
    slot.textContent = slot.textContent ? `${slot.textContent} ${message}` : message;
    first ??= control;
  }
  if (alert) {
    alert.textContent = [error.fields?.length ? 'Some fields are not valid.' : error.message, ...unplaced].join(' ');
    alert.setAttribute('role', 'alert');
  }
  (first ?? alert)?.focus?.();
}

function controlFor(form, name) {
  const controls = [...form.querySelectorAll('[data-field][aria-describedby]')];
  let candidate = name;
  while (candidate) {
    const found = controls.find((c) => c.dataset.field === candidate);
    if (found) return found;
    // `allowed_origins[2]` → `allowed_origins`; `apple.client_ids[0]` → `apple.client_ids` → `apple`.
    const shorter = candidate.replace(/\[\d+\]$/, '');
    candidate = shorter !== candidate ? shorter : candidate.includes('.') ? candidate.slice(0, candidate.lastIndexOf('.')) : '';
  }
  return null;
}

/** A form with an alert slot at its top and a submit button; `onsubmit(form)` is awaited, errors shown. */
export function form({ title, children, submit = 'Save', onsubmit, className = 'card' }) {
  const alert = el('div', { class: 'alert', tabindex: '-1' });
  const button = el('button', { type: 'submit' }, submit);
  const node = el('form', { class: className, novalidate: true }, title ? el('h2', {}, title) : null, alert, children, el('div', { class: 'actions' }, button));
  node.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearErrors(node);
    button.disabled = true;
    try {
      await onsubmit(node);
    } catch (error) {
      showErrors(node, error);
    } finally {
      button.disabled = false;
    }
  });
  return node;
}

/** A short message read out by screen readers. */
export function announce(message) {
  const status = document.getElementById('status');
  status.textContent = message;
  clearTimeout(announce.timer);
  announce.timer = setTimeout(() => { status.textContent = ''; }, 6000);
}

/** A table: `columns` are `{label, cell(row) → node|string}`. */
export function table(caption, columns, rows, empty = 'Nothing here.') {
  if (!rows.length) return el('p', { class: 'hint' }, empty);
  return el('table', {}, el('caption', { class: 'hint' }, caption),
    el('thead', {}, el('tr', {}, columns.map((c) => el('th', { scope: 'col' }, c.label)))),
    el('tbody', {}, rows.map((row) => el('tr', {}, columns.map((c) => el('td', {}, c.cell(row)))))));
}

export const lines = (text) => text.split('\n').map((l) => l.trim()).filter(Boolean);
export const when = (iso) => (iso ? new Date(iso).toLocaleString() : '—');
