// DOM helpers: elements, forms that validate before sending and put the server's error next to
// the field it names, tables, paged lists, notices and copy buttons. Text is always set as text
// (never innerHTML), so nothing the server or a user wrote can become markup.

import { plain } from './messages.js';

let counter = 0;
const uid = (name) => `f${++counter}-${name}`;

// h('button', {class: 'x', onclick: fn, disabled: true}, 'text', child, [more]) -> Element.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = !!v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// Replaces an element's content.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function when(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export function time(iso) {
  return iso ? h('time', { datetime: iso, title: iso }, when(iso)) : '—';
}

// A notice: kind is 'error' | 'warn' | 'ok' | 'info'. Errors are announced (role=alert).
export function notice(kind, text, ...actions) {
  return h('div', { class: `notice notice-${kind}`, role: kind === 'error' ? 'alert' : 'status' }, h('p', {}, text), actions.length ? h('p', { class: 'actions' }, actions) : null);
}

export function errorNotice(err, ...actions) {
  return notice('error', plain(err), ...actions);
}

export function loading(text = 'Loading…') {
  return h('p', { class: 'loading', role: 'status' }, text);
}

export function section(title, ...children) {
  return h('section', { class: 'card' }, h('h2', {}, title), children);
}

export function pageHead(title, ...extra) {
  return h('div', { class: 'page-head' }, h('h1', {}, title), extra);
}

// A button that runs an async action with a busy state; errors go to `onError` or an alert.
export function actionButton(label, action, opts = {}) {
  const b = h('button', { type: 'button', class: opts.class || '', 'data-write': opts.write === false ? null : '', 'aria-label': opts.ariaLabel });
  b.textContent = label;
  b.addEventListener('click', async () => {
    b.disabled = true;
    b.setAttribute('aria-busy', 'true');
    try {
      await action(b);
    } catch (e) {
      if (opts.onError) opts.onError(e);
      else b.after(errorNotice(e));
    } finally {
      b.disabled = false;
      b.removeAttribute('aria-busy');
    }
  });
  return b;
}

// A two-step button: the first click asks, the second does it (no browser dialog).
export function confirmButton(label, question, action, opts = {}) {
  const wrap = h('span', { class: 'confirm' });
  const start = h('button', { type: 'button', class: opts.class || 'danger', 'data-write': opts.write === false ? null : '', 'aria-label': opts.ariaLabel }, label);
  start.addEventListener('click', () => {
    const yes = actionButton(`Yes, ${label.toLowerCase()}`, action, { class: 'danger', onError: opts.onError, write: opts.write });
    const no = h('button', { type: 'button', onclick: () => fill(wrap, start) }, 'Cancel');
    fill(wrap, h('span', { class: 'question' }, question, ' '), yes, ' ', no);
    yes.focus();
  });
  wrap.append(start);
  return wrap;
}

// A button that copies text to the clipboard and says so.
export function copyButton(getText, label = 'Copy') {
  const b = h('button', { type: 'button', class: 'copy' }, label);
  b.addEventListener('click', async () => {
    const text = typeof getText === 'function' ? getText() : getText;
    try {
      await navigator.clipboard.writeText(text);
      b.textContent = 'Copied';
    } catch (_) {
      b.textContent = 'Select and copy it by hand';
    }
    setTimeout(() => {
      b.textContent = label;
    }, 2000);
  });
  return b;
}

export function codeBlock(text, label) {
  return h('div', { class: 'code' }, h('pre', { tabindex: '0', 'aria-label': label }, h('code', {}, text)), copyButton(text));
}

// A table: columns are [header, row => cell]; rows an array.
export function table(columns, rows, opts = {}) {
  const body = h('tbody', {}, rows.map((r) => h('tr', { 'data-id': r.id }, columns.map(([, cell]) => h('td', {}, cell(r))))));
  return h('div', { class: 'table-wrap' }, h('table', { class: opts.class || '' }, opts.caption ? h('caption', {}, opts.caption) : null, h('thead', {}, h('tr', {}, columns.map(([head]) => h('th', { scope: 'col' }, head)))), body));
}

// A paged list: `load(cursor)` returns {data, next_cursor}; "Load more" follows the cursor.
export function pagedTable(columns, load, opts = {}) {
  const wrap = h('div', { class: 'paged' });
  const rowsBody = h('tbody');
  const more = h('button', { type: 'button', class: 'more', hidden: true }, 'Load more');
  const status = h('p', { class: 'loading', role: 'status' }, 'Loading…');
  let cursor = null;
  const tableEl = h('div', { class: 'table-wrap' }, h('table', {}, opts.caption ? h('caption', {}, opts.caption) : null, h('thead', {}, h('tr', {}, columns.map(([head]) => h('th', { scope: 'col' }, head)))), rowsBody));
  async function page() {
    more.disabled = true;
    status.hidden = false;
    status.textContent = 'Loading…';
    try {
      const res = await load(cursor);
      for (const r of res.data) rowsBody.append(h('tr', { 'data-id': r.id }, columns.map(([, cell]) => h('td', {}, cell(r)))));
      cursor = res.next_cursor;
      more.hidden = !cursor;
      status.hidden = rowsBody.children.length > 0;
      status.textContent = rowsBody.children.length ? '' : opts.empty || 'Nothing here yet.';
    } catch (e) {
      status.hidden = true;
      wrap.append(errorNotice(e));
    } finally {
      more.disabled = false;
    }
  }
  more.addEventListener('click', page);
  wrap.append(tableEl, status, more);
  wrap.ready = page();
  return wrap;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const bytes = (s) => new TextEncoder().encode(s).length;

// A form from field specs. Each field: {name, label, type, required, max, minBytes, maxBytes,
// options, value, help, autocomplete, placeholder, validate, min, maxValue}. Types: text, email, password,
// textarea, json, tags, select, checkbox, checkboxes, number, date.
// `onSubmit(values)` may throw an ApiError; `onError(err)` may handle it and return true.
export function form(spec) {
  const { fields, submitLabel = 'Save', onSubmit, onError, write = true, cancel } = spec;
  const el = h('form', { class: 'form', novalidate: true });
  const set = h('fieldset', { 'data-write': write ? '' : null });
  if (spec.legend) set.append(h('legend', {}, spec.legend));
  const errorBox = h('div', { class: 'form-error', role: 'alert', 'aria-live': 'assertive' });
  const controls = {};
  for (const f of fields) {
    const id = uid(f.name);
    const err = h('p', { class: 'field-error', id: `${id}-err`, hidden: true });
    const help = f.help ? h('p', { class: 'help', id: `${id}-help` }, f.help) : null;
    const describedBy = [help ? `${id}-help` : null, `${id}-err`].filter(Boolean).join(' ');
    let input;
    let row;
    if (f.type === 'checkboxes') {
      input = h('fieldset', { class: 'checks', id, 'aria-describedby': describedBy }, h('legend', {}, f.label, f.required ? h('span', { class: 'req', 'aria-hidden': 'true' }, ' *') : null), f.options.map(([v, l]) => h('label', { class: 'check' }, h('input', { type: 'checkbox', name: f.name, value: v }), ' ', l)));
      row = h('div', { class: 'field' }, input, help, err);
    } else if (f.type === 'checkbox') {
      input = h('input', { type: 'checkbox', id, name: f.name, 'aria-describedby': describedBy });
      row = h('div', { class: 'field field-check' }, h('label', { for: id }, input, ' ', f.label), help, err);
    } else {
      if (f.type === 'textarea' || f.type === 'json') input = h('textarea', { rows: f.rows || (f.type === 'json' ? 6 : 4), spellcheck: f.type === 'json' ? 'false' : null });
      else if (f.type === 'select') input = h('select', {}, f.options.map(([v, l]) => h('option', { value: v }, l)));
      else input = h('input', { type: { tags: 'text', json: 'text' }[f.type] || f.type || 'text', autocomplete: f.autocomplete || (f.type === 'password' ? 'off' : null), placeholder: f.placeholder, inputmode: f.inputmode, min: f.min, step: f.type === 'number' ? 1 : null });
      input.id = id;
      input.name = f.name;
      if (f.required) input.setAttribute('aria-required', 'true');
      input.setAttribute('aria-describedby', describedBy);
      row = h('div', { class: 'field' }, h('label', { for: id }, f.label, f.required ? h('span', { class: 'req', 'aria-hidden': 'true' }, ' *') : null), input, help, err);
    }
    controls[f.name] = { f, input, err, row };
    set.append(row);
  }
  const button = h('button', { type: 'submit', class: 'primary' }, submitLabel);
  set.append(h('div', { class: 'form-actions' }, button, cancel ? h('button', { type: 'button', onclick: cancel }, 'Cancel') : null));
  el.append(errorBox, set);

  function read(c) {
    const { f, input } = c;
    if (f.type === 'checkbox') return input.checked;
    if (f.type === 'checkboxes') return [...input.querySelectorAll('input:checked')].map((i) => i.value);
    const v = input.value;
    if (f.type === 'tags') return v.split(',').map((t) => t.trim()).filter(Boolean);
    if (f.type === 'number') return v.trim() === '' ? null : Number(v);
    if (f.type === 'json') return v.trim() === '' ? {} : JSON.parse(v);
    if (f.type === 'password') return v;
    return f.trim === false ? v : v.trim();
  }
  function write1(c, v) {
    const { f, input } = c;
    if (f.type === 'checkbox') input.checked = !!v;
    else if (f.type === 'checkboxes') input.querySelectorAll('input').forEach((i) => (i.checked = (v || []).includes(i.value)));
    else if (f.type === 'tags') input.value = (v || []).join(', ');
    else if (f.type === 'json') input.value = JSON.stringify(v ?? {}, null, 2);
    else input.value = v ?? '';
  }
  function fieldError(name, text) {
    const c = controls[name];
    if (!c) return false;
    c.err.textContent = text;
    c.err.hidden = !text;
    const target = c.f.type === 'checkboxes' ? c.input.querySelector('input') : c.input;
    if (text) target.setAttribute('aria-invalid', 'true');
    else target.removeAttribute('aria-invalid');
    return true;
  }
  function clear() {
    errorBox.replaceChildren();
    for (const name of Object.keys(controls)) fieldError(name, '');
  }
  function check(c) {
    const { f, input } = c;
    let v;
    if (f.type === 'json') {
      try {
        v = read(c);
      } catch (_) {
        return 'must be valid JSON';
      }
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return 'must be a JSON object';
    } else v = read(c);
    if (f.type === 'number' && input.validity && input.validity.badInput) return 'must be a whole number';
    const empty = v === '' || v === null || (Array.isArray(v) && v.length === 0) || v === false;
    if (f.required && empty) return f.type === 'checkboxes' ? 'need at least one choice' : 'is required';
    if (empty) return null;
    if (typeof v === 'string') {
      if (f.max && [...v].length > f.max) return `must be at most ${f.max} characters`;
      if (f.minBytes && bytes(v) < f.minBytes) return `must be at least ${f.minBytes} bytes`;
      if (f.maxBytes && bytes(v) > f.maxBytes) return `must be at most ${f.maxBytes >= 1024 ? `${f.maxBytes / 1024} KiB` : `${f.maxBytes} bytes`}`;
      if (f.type === 'email' && !EMAIL.test(v)) return 'must be an email address';
    }
    if (f.type === 'number' && (!Number.isInteger(v) || v < 0)) return 'must be a whole number';
    if (f.type === 'number' && f.min !== undefined && v < f.min) return `must be at least ${f.min}`;
    if (f.type === 'number' && f.maxValue !== undefined && v > f.maxValue) return `must be at most ${f.maxValue.toLocaleString('en')}`;
    return f.validate ? f.validate(v, input) : null;
  }
  el.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clear();
    let first = null;
    for (const c of Object.values(controls)) {
      const problem = check(c);
      if (problem) {
        fieldError(c.f.name, `${c.f.label} ${problem}.`);
        first = first || c;
      }
    }
    if (first) {
      (first.f.type === 'checkboxes' ? first.input.querySelector('input') : first.input).focus();
      return;
    }
    const values = {};
    for (const [name, c] of Object.entries(controls)) values[name] = read(c);
    button.disabled = true;
    button.setAttribute('aria-busy', 'true');
    const label = button.textContent;
    button.textContent = spec.busyLabel || 'Saving…';
    try {
      await onSubmit(values);
    } catch (e) {
      api.showError(e);
    } finally {
      button.disabled = false;
      button.removeAttribute('aria-busy');
      button.textContent = label;
    }
  });

  const api = {
    el,
    button,
    controls,
    values: () => Object.fromEntries(Object.entries(controls).map(([n, c]) => [n, read(c)])),
    set(values) {
      for (const [n, v] of Object.entries(values)) if (controls[n]) write1(controls[n], v);
    },
    reset() {
      el.reset();
      clear();
    },
    clear,
    // The server's error: next to the field its message names, else above the form.
    showError(e, ...actions) {
      if (onError && onError(e)) return;
      const m = /^([A-Za-z_][\w.[\]]*): (.+)$/.exec(e && e.message ? e.message : '');
      if (m && (e.code === 'validation_failed' || e.code === 'unknown_field')) {
        // The field as named (`name`), else its first or last part: `limits.tokens_per_minute`
        // belongs to a form's `tokens_per_minute` field.
        const parts = m[1].split(/[.[\]]+/).filter(Boolean);
        const name = [m[1], parts[0], parts[parts.length - 1]].find((n) => n && controls[n]);
        if (name && fieldError(name, `${controls[name].f.label}: ${m[2]}`)) {
          controls[name].input.focus();
          return;
        }
      }
      const field = FIELD_OF_CODE[e && e.code];
      if (field && controls[field]) {
        fieldError(field, plain(e));
        controls[field].input.focus();
        return;
      }
      errorBox.replaceChildren(errorNotice(e, ...actions));
    },
    message(node) {
      errorBox.replaceChildren(node);
    },
  };
  for (const f of fields) if (f.value !== undefined) write1(controls[f.name], f.value);
  return api;
}

// Codes that are about one field although the message does not start with its name.
const FIELD_OF_CODE = { email_taken: 'email', target_not_allowed: 'target', archive_not_accepted: 'target', repository_not_found: 'target' };
