// Workspace API keys: create (scopes by checkbox; the secret is shown once, in the page only,
// with a copy button), list, revoke.

import { get, post, del, withQuery } from '../api.js';
import { h, fill, form, pageHead, notice, errorNotice, pagedTable, time, confirmButton, copyButton } from '../ui.js';

const SCOPES = [
  ['workspace:read', 'workspace:read — read workspace data'],
  ['workspace:write', 'workspace:write — create, change and delete records'],
  ['guard:scan', 'guard:scan — Guard scans recorded in the feed'],
  ['run', 'run — AI runs (/run)'],
];

export async function page(ctx) {
  const secretBox = h('div', { id: 'new-key' });
  const listBox = h('div');
  const status = h('div', { role: 'status' });

  const f = form({
    legend: 'New key',
    submitLabel: 'Create key',
    busyLabel: 'Creating…',
    fields: [
      { name: 'name', label: 'Name', required: true, max: 100, help: 'What the key is for, e.g. "ci".' },
      { name: 'scopes', label: 'Scopes', type: 'checkboxes', required: true, options: SCOPES },
      { name: 'expires', label: 'Expires on (optional)', type: 'date', help: 'The key stops working at the end of this day (UTC).', validate: (v) => (v && new Date(`${v}T23:59:59Z`) <= new Date() ? 'must be in the future' : null) },
    ],
    onError: (e) => {
      if (e.code === 'validation_failed' && /^expires_at:/.test(e.message)) {
        f.showError({ code: 'validation_failed', message: e.message.replace(/^expires_at:/, 'expires:') });
        return true;
      }
      return false;
    },
    onSubmit: async (v) => {
      const body = { name: v.name, scopes: v.scopes };
      if (v.expires) body.expires_at = `${v.expires}T23:59:59Z`;
      const k = (await post('/workspace/api-keys', body)).data;
      f.reset();
      showSecret(k);
      await reload();
    },
  });

  // The secret lives only in this DOM node until the person dismisses it or leaves the page.
  function showSecret(k) {
    const out = h('output', { class: 'secret', id: 'new-key-secret', 'aria-label': 'The new key' }, k.key);
    const done = h('button', { type: 'button', onclick: () => secretBox.replaceChildren(notice('info', `Key “${k.name}” is ready. Its secret is no longer shown.`)) }, 'I have stored it');
    fill(secretBox, h('div', { class: 'notice notice-ok', role: 'status' },
      h('p', {}, h('strong', {}, `Key “${k.name}” created. `), 'Copy it now: this is the only time it is shown. Only a hash is stored.'),
      h('p', { class: 'secret-row' }, out, ' ', copyButton(() => out.textContent, 'Copy key')),
      h('p', {}, done)));
    done.focus();
  }

  function reload() {
    const list = pagedTable(
      [
        ['Name', (k) => h('strong', {}, k.name)],
        ['Key', (k) => h('code', {}, k.hint)],
        ['Scopes', (k) => k.scopes.map((s) => h('span', { class: 'tag' }, s))],
        ['Created', (k) => time(k.created_at)],
        ['Last used', (k) => time(k.last_used_at)],
        ['Expires', (k) => time(k.expires_at)],
        ['', (k) => (k.revoked_at ? h('span', { class: 'tag muted' }, 'revoked') : confirmButton('Revoke', `Revoke “${k.name}”? Scripts using it stop working at once.`, async () => {
          await del(`/workspace/api-keys/${k.id}`);
          status.replaceChildren(notice('ok', `Revoked “${k.name}”.`));
          await reload();
        }, { ariaLabel: `Revoke ${k.name}`, onError: (e) => status.replaceChildren(errorNotice(e)) }))],
      ],
      async (cursor) => (await get(withQuery('/workspace/api-keys', { limit: 50, cursor }))).data,
      { empty: 'No keys yet.' },
    );
    fill(listBox, list);
    return list.ready;
  }

  fill(ctx.main, pageHead('API keys'), h('p', { class: 'sub' }, 'Keys let scripts use the workspace and AI runs without a session. A key can do only what its scopes allow, and only while you may.'), secretBox, f.el, status, listBox);
  await reload();
}
