// Workspace API keys: create (scopes by checkbox; the secret is shown once, in the page only,
// with a copy button), list, revoke, and each key's own limits: per minute, and a monthly
// spend limit in money (each at most the workspace's; the API refuses more, and the console
// checks first with the limits it knows).

import { get, post, patch, del, withQuery } from '../api.js';
import { h, fill, form, pageHead, notice, errorNotice, pagedTable, time, confirmButton, copyButton } from '../ui.js';
import { limitField, limitsBody, limitsLine, nanos } from '../limits.js';

const KEY_LIMITS = ['requests_per_minute', 'tokens_per_minute', 'monthly_spend'];

const SCOPES = [
  ['workspace:read', 'workspace:read — read workspace data'],
  ['workspace:write', 'workspace:write — create, change and delete records'],
  ['guard:scan', 'guard:scan — Guard scans recorded in the feed'],
  ['run', 'run — AI runs (/run)'],
];

export async function page(ctx) {
  // The workspace's limits as of this page load; the API checks again on every write.
  const tenantLimits = (ctx.ws && ctx.ws.tenant && ctx.ws.tenant.limits) || {};
  const ceiling = (n) => tenantLimits[n] ?? null;
  const keyLimitFields = () => KEY_LIMITS.map((n) => {
    const field = limitField(n, { ceiling: ceiling(n), placeholder: ceiling(n) === null ? 'none of its own' : 'the workspace\'s' });
    if (n !== 'monthly_spend') return field;
    // Money: compared in BigInt nano-units, never as floats.
    const cap = ceiling(n);
    const own = field.validate;
    return {
      ...field,
      help: cap === null ? 'An amount in the deployment\'s currency, such as 25.00, spent by this key per calendar month (UTC). Empty for none of its own.' : `At most the workspace's ${cap} a month. Empty: only the workspace's limit applies.`,
      validate: (v) => own(v) || (v && cap !== null && nanos(v) > nanos(cap) ? `must be at most the workspace's limit (${cap})` : null),
    };
  });
  const secretBox = h('div', { id: 'new-key' });
  const editBox = h('div', { id: 'key-limits-panel' });
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
      ...keyLimitFields(),
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
      if (KEY_LIMITS.some((n) => v[n] !== null)) body.limits = limitsBody(v, KEY_LIMITS);
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

  // Edits one key's own limits in a panel above the list.
  function editLimits(k) {
    const f2 = form({
      legend: `Limits of “${k.name}”`,
      submitLabel: 'Save limits',
      fields: keyLimitFields(),
      cancel: () => editBox.replaceChildren(),
      onSubmit: async (v) => {
        const saved = (await patch(`/workspace/api-keys/${k.id}`, { limits: limitsBody(v, KEY_LIMITS) })).data;
        editBox.replaceChildren();
        status.replaceChildren(notice('ok', `Limits of “${saved.name}” saved: ${limitsLine(saved.limits, KEY_LIMITS)}.`));
        await reload();
      },
    });
    f2.el.id = 'key-limits';
    f2.set(k.limits || {});
    fill(editBox, f2.el);
    status.replaceChildren();
    f2.controls.requests_per_minute.input.focus();
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
        ['Own limits', (k) => h('span', { class: 'limits' }, limitsLine(k.limits, KEY_LIMITS))],
        ['', (k) => (k.revoked_at ? h('span', { class: 'tag muted' }, 'revoked') : h('span', { class: 'row-actions' }, h('button', { type: 'button', 'data-write': '', 'aria-label': `Edit the limits of ${k.name}`, onclick: () => editLimits(k) }, 'Limits'), ' ', confirmButton('Revoke', `Revoke “${k.name}”? Scripts using it stop working at once.`, async () => {
          await del(`/workspace/api-keys/${k.id}`);
          status.replaceChildren(notice('ok', `Revoked “${k.name}”.`));
          await reload();
        }, { ariaLabel: `Revoke ${k.name}`, onError: (e) => status.replaceChildren(errorNotice(e)) })))],
      ],
      async (cursor) => (await get(withQuery('/workspace/api-keys', { limit: 50, cursor }))).data,
      { empty: 'No keys yet.' },
    );
    fill(listBox, list);
    return list.ready;
  }

  fill(ctx.main, pageHead('API keys'), h('p', { class: 'sub' }, 'Keys let scripts use the workspace and AI runs without a session. A key can do only what its scopes allow, and only while you may.'), h('p', { class: 'sub', id: 'workspace-limits' }, `Workspace limits: ${limitsLine(tenantLimits, KEY_LIMITS)}. A key may have lower limits of its own.`), secretBox, f.el, status, editBox, listBox);
  await reload();
}
