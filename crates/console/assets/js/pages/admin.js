// Platform administration: tenants (create, rename, region, AI on/off, suspend, quotas), a tenant's AI
// keys, users (create, assign, suspend, promote), gateway diagnostics, and the Shadow view.
// Administration stays usable in a Shadow view (only workspace writes are read-only there), so
// these controls are not marked as workspace writes.

import { get, post, patch, del, withQuery } from '../api.js';
import { h, fill, form, pageHead, section, notice, errorNotice, pagedTable, table, time, actionButton, confirmButton, loading, copyButton } from '../ui.js';
import { limitField, limitsBody, limitsLine, TENANT_LIMITS } from '../limits.js';

const REGIONS = [['AIHK', 'AIHK'], ['AICA', 'AICA']];
const AI_ACCESS = { ready: 'ready', disabled: 'disabled', not_ready: 'not ready' };
const W = { write: false };

// Every tenant (for pickers and names), following the cursor.
async function allTenants() {
  const out = [];
  let cursor = null;
  do {
    const page = (await get(withQuery('/admin/tenants', { limit: 200, cursor }))).data;
    out.push(...page.data);
    cursor = page.next_cursor;
  } while (cursor && out.length < 5000);
  return out;
}

async function enterShadow(ctx, tenantId) {
  await post('/auth/ip-admin', { tenant_id: tenantId });
  await ctx.navigate('/');
}

export async function tenants(ctx) {
  const listBox = h('div');
  const status = h('div', { role: 'status' });
  const f = form({
    legend: 'New tenant',
    submitLabel: 'Create tenant',
    write: false,
    fields: [
      { name: 'name', label: 'Name', required: true, max: 100 },
      { name: 'region', label: 'Region', type: 'select', options: REGIONS },
      { name: 'ai_enabled', label: 'AI enabled', type: 'checkbox', value: true },
    ],
    onSubmit: async (v) => {
      const t = (await post('/admin/tenants', v)).data;
      f.reset();
      f.set({ ai_enabled: true });
      status.replaceChildren(notice('ok', `Created tenant “${t.name}”.`, h('a', { href: `/admin/tenants/${t.id}` }, 'Open it')));
      await reload();
    },
  });
  function reload() {
    const list = pagedTable(
      [
        ['Name', (t) => h('a', { href: `/admin/tenants/${t.id}` }, t.name)],
        ['Region', (t) => t.region],
        ['Status', (t) => h('span', { class: `tag status-${t.status}` }, t.status)],
        ['AI', (t) => (t.ai_enabled ? `on (${AI_ACCESS[t.ai_access] || t.ai_access})` : 'off')],
        ['Created', (t) => time(t.created_at)],
        ['', (t) => actionButton('Enter Shadow view', () => enterShadow(ctx, t.id), { ...W, ariaLabel: `Enter the Shadow view of ${t.name}` })],
      ],
      async (cursor) => (await get(withQuery('/admin/tenants', { limit: 50, cursor }))).data,
      { empty: 'No tenants yet.' },
    );
    fill(listBox, list);
    return list.ready;
  }
  fill(ctx.main, pageHead('Tenants'), status, f.el, h('h2', {}, 'All tenants'), listBox);
  await reload();
}

export async function tenant(ctx) {
  const id = ctx.params.id;
  let t;
  try {
    t = (await get(`/admin/tenants/${encodeURIComponent(id)}`)).data;
  } catch (e) {
    if (e.status !== 404) throw e;
    fill(ctx.main, pageHead('Tenant'), errorNotice({ code: 'not_found' }), h('p', {}, h('a', { href: '/admin' }, '← All tenants')));
    return;
  }
  const status = h('div', { role: 'status', id: 'tenant-status' });
  const edit = form({
    legend: 'Settings',
    submitLabel: 'Save tenant',
    write: false,
    fields: [
      { name: 'name', label: 'Name', required: true, max: 100 },
      { name: 'region', label: 'Region', type: 'select', options: REGIONS, help: 'Runs go to this region\'s gateway with a key of this region.' },
      { name: 'ai_enabled', label: 'AI enabled', type: 'checkbox' },
    ],
    onSubmit: async (v) => {
      await patch(`/admin/tenants/${id}`, v);
      await ctx.refresh();
    },
  });
  edit.set(t);
  // Quotas: an empty field removes that limit. Keys' own limits stay at most these.
  const limitsSummary = h('p', { class: 'sub', id: 'tenant-limits' }, limitsLine(t.limits, TENANT_LIMITS));
  const quotas = form({
    legend: 'Quotas',
    submitLabel: 'Save quotas',
    write: false,
    fields: [
      limitField('requests_per_minute', { help: 'Runs per minute for the whole workspace. Empty for no limit.' }),
      limitField('tokens_per_minute', { help: 'Prompt and completion tokens per minute. Empty for no limit.' }),
      limitField('monthly_tokens', { help: 'Tokens per calendar month (UTC); runs are refused once it is used. Empty for no limit.' }),
      limitField('monthly_spend', { help: 'Money per calendar month (UTC) at the price table\'s prices, such as 25.00; runs are refused once it is spent. Empty for no limit.' }),
    ],
    onSubmit: async (v) => {
      const saved = (await patch(`/admin/tenants/${id}`, { limits: limitsBody(v, TENANT_LIMITS) })).data;
      quotas.set(saved.limits);
      fill(limitsSummary, limitsLine(saved.limits, TENANT_LIMITS));
      quotas.message(notice('ok', `Quotas saved: ${limitsLine(saved.limits, TENANT_LIMITS)}. They apply from the next run.`));
    },
  });
  quotas.el.id = 'tenant-quotas';
  quotas.set(t.limits);
  const suspend = t.status === 'active'
    ? confirmButton('Suspend tenant', `Suspend “${t.name}”? Its members lose access at once.`, async () => {
      await patch(`/admin/tenants/${id}`, { status: 'suspended' });
      await ctx.refresh();
    }, W)
    : actionButton('Reactivate tenant', async () => {
      await patch(`/admin/tenants/${id}`, { status: 'active' });
      await ctx.refresh();
    }, W);

  const keysBox = h('div');
  async function loadKeys() {
    fill(keysBox, loading());
    try {
      const keys = (await get(`/admin/tenants/${id}/ai-keys`)).data.data;
      fill(keysBox, keys.length ? table(
        [
          ['Label', (k) => k.label || '—'],
          ['Region', (k) => k.region],
          ['Key', (k) => h('code', {}, k.hint)],
          ['Chat', (k) => (k.chat_enabled ? 'enabled' : 'off')],
          ['Status', (k) => h('span', {}, h('span', { class: `tag status-${k.status}` }, k.status), k.status_reason ? ` — ${k.status_reason}` : '')],
          ['Checked', (k) => time(k.checked_at)],
          ['', (k) => confirmButton('Delete', `Delete the key “${k.label || k.hint}”?`, async () => {
            await del(`/admin/tenants/${id}/ai-keys/${k.id}`);
            await loadKeys();
          }, { ...W, ariaLabel: `Delete AI key ${k.label || k.hint}` })],
        ],
        keys,
        { caption: 'AI keys' },
      ) : h('p', {}, 'No AI keys yet: runs are not possible until a ready, chat-enabled key of the tenant\'s region exists.'));
    } catch (e) {
      fill(keysBox, errorNotice(e));
    }
  }
  const addKey = form({
    legend: 'Add an AI key',
    submitLabel: 'Add key',
    busyLabel: 'Checking the key…',
    write: false,
    fields: [
      { name: 'region', label: 'Region', type: 'select', options: REGIONS, value: t.region },
      { name: 'label', label: 'Label', max: 100 },
      { name: 'secret', label: 'Secret', type: 'password', required: true, autocomplete: 'off', help: 'Sealed at rest and never shown again. The region\'s gateway checks it now.' },
      { name: 'chat_enabled', label: 'Chat enabled', type: 'checkbox', value: true },
    ],
    onSubmit: async (v) => {
      const k = (await post(`/admin/tenants/${id}/ai-keys`, v)).data;
      addKey.reset();
      addKey.set({ region: t.region, chat_enabled: true });
      addKey.message(notice(k.status === 'ready' ? 'ok' : 'warn', `Added the key ${k.hint}: ${k.status}${k.status_reason ? ` — ${k.status_reason}` : ''}.`));
      await loadKeys();
    },
  });

  const membersBox = pagedTable(
    [
      ['Email', (u) => u.email],
      ['Name', (u) => u.name],
      ['Role', (u) => u.role],
      ['Status', (u) => u.status],
    ],
    async (cursor) => (await get(withQuery('/admin/users', { tenant_id: id, limit: 50, cursor }))).data,
    { empty: 'No members yet.' },
  );

  fill(ctx.main,
    h('p', {}, h('a', { href: '/admin' }, '← All tenants')),
    pageHead(t.name, h('p', { class: 'sub' }, `${t.region} · ${t.status} · AI ${t.ai_enabled ? `on (${AI_ACCESS[t.ai_access] || t.ai_access})` : 'off'}`)),
    status,
    section('Support', h('p', {}, 'The Shadow view shows this tenant\'s workspace read-only. Its members see that you are there, and entering and leaving are in their activity feed.'),
      actionButton('Enter Shadow view', () => enterShadow(ctx, id), { ...W, class: 'primary' })),
    section('Tenant', edit.el, h('p', {}, suspend)),
    section('Quotas', limitsSummary, quotas.el),
    section('AI keys', keysBox, addKey.el),
    section('Members', membersBox));
  await Promise.all([loadKeys(), membersBox.ready]);
}

// The signed-in admin's API tokens for scripts (`/admin/tokens`, decision 0036): make one (the
// token is shown once, in the page only), list them with their last use, revoke one.
function tokensSection() {
  const secretBox = h('div', { 'aria-live': 'polite' });
  const status = h('div', { role: 'status' });
  const listBox = h('div');
  const f = form({
    legend: 'New admin token',
    submitLabel: 'Create token',
    write: false,
    fields: [
      { name: 'name', label: 'Token name', required: true, max: 100, help: 'What the token is for, e.g. "provisioning".' },
      { name: 'scope', label: 'Scope', type: 'select', options: [['admin', 'admin (full administration)'], ['admin:read', 'admin:read (GET only)']] },
      { name: 'expires', label: 'Expires on (optional)', type: 'date', help: 'The token stops working at the end of this day (UTC).', validate: (v) => (v && new Date(`${v}T23:59:59Z`) <= new Date() ? 'must be in the future' : null) },
    ],
    onSubmit: async (v) => {
      const body = { name: v.name, scope: v.scope };
      if (v.expires) body.expires_at = `${v.expires}T23:59:59Z`;
      const t = (await post('/admin/tokens', body)).data;
      f.reset();
      const out = h('output', { class: 'secret', id: 'new-admin-token', 'aria-label': 'The new admin token' }, t.token);
      const done = h('button', { type: 'button', onclick: () => secretBox.replaceChildren(notice('info', `Token “${t.name}” is ready. It is no longer shown.`)) }, 'I have stored it');
      fill(secretBox, h('div', { class: 'notice notice-ok', role: 'status' },
        h('p', {}, h('strong', {}, `Token “${t.name}” created. `), 'Copy it now: this is the only time it is shown. Send it as “Authorization: Bearer …” on /api/v1/admin/**.'),
        h('p', { class: 'secret-row' }, out, ' ', copyButton(() => out.textContent, 'Copy token')),
        h('p', {}, done)));
      done.focus();
      await reload();
    },
  });
  function reload() {
    const list = pagedTable(
      [
        ['Name', (t) => h('strong', {}, t.name)],
        ['Scope', (t) => h('span', { class: 'tag' }, t.scope)],
        ['Created', (t) => time(t.created_at)],
        ['Last used', (t) => time(t.last_used_at)],
        ['Expires', (t) => time(t.expires_at)],
        ['', (t) => confirmButton('Revoke', `Revoke “${t.name}”? Scripts using it stop working at once.`, async () => {
          await del(`/admin/tokens/${t.id}`);
          status.replaceChildren(notice('ok', `Revoked “${t.name}”.`));
          await reload();
        }, { ...W, ariaLabel: `Revoke admin token ${t.name}`, onError: (e) => status.replaceChildren(errorNotice(e)) })],
      ],
      async (cursor) => (await get(withQuery('/admin/tokens', { limit: 50, cursor }))).data,
      { empty: 'No admin tokens yet.', caption: 'Your admin tokens' },
    );
    fill(listBox, list);
    return list.ready;
  }
  const el = section('Admin tokens',
    h('p', {}, 'Tokens let scripts administer without a browser. A token acts as you: suspending or demoting you stops all of them. Last use is updated at most once a minute.'),
    status, secretBox, f.el, listBox);
  el.id = 'admin-tokens';
  return { el, ready: reload() };
}

export async function users(ctx) {
  const all = await allTenants();
  const names = Object.fromEntries(all.map((t) => [t.id, t.name]));
  const tenantOptions = [['', '— none (unassigned) —'], ...all.map((t) => [t.id, `${t.name} (${t.region})`])];
  const filter = ctx.query.get('tenant_id') || '';
  const status = h('div', { role: 'status', id: 'users-status' });
  const listBox = h('div');
  const f = form({
    legend: 'New user',
    submitLabel: 'Create user',
    write: false,
    fields: [
      { name: 'email', label: 'Email', type: 'email', required: true, autocomplete: 'off' },
      { name: 'name', label: 'Name', required: true, max: 100 },
      { name: 'password', label: 'Initial password', type: 'password', required: true, minBytes: 12, maxBytes: 72, autocomplete: 'new-password', help: '12 to 72 bytes. Tell the person to change it.' },
      { name: 'role', label: 'Role', type: 'select', options: [['member', 'Member'], ['platform_admin', 'Platform administrator']] },
      { name: 'tenant_id', label: 'Tenant', type: 'select', options: tenantOptions },
    ],
    onSubmit: async (v) => {
      const body = { ...v, tenant_id: v.tenant_id || null };
      const u = (await post('/admin/users', body)).data;
      f.reset();
      status.replaceChildren(notice('ok', `Created ${u.email}.`));
      await reload();
    },
  });
  const act = async (fn) => {
    try {
      await fn();
      await reload();
    } catch (e) {
      status.replaceChildren(errorNotice(e));
    }
  };
  function assign(u) {
    const sel = h('select', { 'aria-label': `Tenant of ${u.email}` }, tenantOptions.map(([v, l]) => h('option', { value: v, selected: (u.tenant_id || '') === v }, l)));
    const go = actionButton('Assign', () => act(() => patch(`/admin/users/${u.id}/tenant`, { tenant_id: sel.value || null })), { ...W, ariaLabel: `Assign ${u.email}` });
    return h('span', { class: 'inline' }, sel, ' ', go);
  }
  function reload() {
    const list = pagedTable(
      [
        ['Email', (u) => u.email],
        ['Name', (u) => u.name],
        ['Role', (u) => (u.role === 'platform_admin' ? 'admin' : 'member')],
        ['Status', (u) => h('span', { class: `tag status-${u.status}` }, u.status)],
        ['Tenant', (u) => assign(u)],
        ['', (u) => h('span', { class: 'row-actions' },
          u.status === 'suspended'
            ? actionButton('Reactivate', () => act(() => patch(`/admin/users/${u.id}`, { status: 'active' })), { ...W, ariaLabel: `Reactivate ${u.email}` })
            : confirmButton('Suspend', `Suspend ${u.email}?`, () => act(() => patch(`/admin/users/${u.id}`, { status: 'suspended' })), { ...W, ariaLabel: `Suspend ${u.email}` }),
          ' ',
          u.role === 'platform_admin'
            ? confirmButton('Demote', `Make ${u.email} a member?`, () => act(() => patch(`/admin/users/${u.id}`, { role: 'member' })), { ...W, class: '', ariaLabel: `Demote ${u.email}` })
            : confirmButton('Promote', `Make ${u.email} a platform administrator?`, () => act(() => patch(`/admin/users/${u.id}`, { role: 'platform_admin' })), { ...W, class: '', ariaLabel: `Promote ${u.email}` }))],
      ],
      async (cursor) => (await get(withQuery('/admin/users', { tenant_id: filter, limit: 50, cursor }))).data,
      { empty: 'No users.', caption: filter ? `Members of ${names[filter] || filter}` : 'All users' },
    );
    fill(listBox, list);
    return list.ready;
  }
  const filterSel = h('select', { id: 'tenant-filter' }, [['', 'All users'], ...all.map((t) => [t.id, t.name])].map(([v, l]) => h('option', { value: v, selected: v === filter }, l)));
  filterSel.addEventListener('change', () => ctx.navigate(filterSel.value ? `/admin/users?tenant_id=${encodeURIComponent(filterSel.value)}` : '/admin/users'));
  const tokens = tokensSection();
  fill(ctx.main, pageHead('Users'), status, f.el, h('h2', {}, 'Users'), h('p', { class: 'inline' }, h('label', { for: 'tenant-filter' }, 'Show '), filterSel), listBox, tokens.el);
  await Promise.all([reload(), tokens.ready]);
}

// What a gateway's answer to the keyless reachability check means.
function gatewayStatus(code) {
  const meaning = {
    200: 'the gateway answered',
    401: 'the gateway answered and asks for a key (expected: this check sends none)',
    403: 'the gateway answered but refuses access without a key',
    404: 'the gateway has no /models here: check that the URL ends in /v1',
    429: 'the gateway is throttling requests',
  }[code] || (code >= 500 ? 'the gateway itself failed' : code >= 400 ? 'the gateway refused the check' : 'the gateway answered');
  return `${code}: ${meaning}`;
}

// A key's status reason, with what an upstream status in it means.
function keyReason(reason) {
  if (!reason) return '—';
  const m = /status (\d{3})/.exec(reason);
  if (!m) return reason;
  const code = Number(m[1]);
  const meaning = {
    401: 'the upstream rejected the key',
    403: 'the upstream accepted the key but refused it this access',
    404: 'the upstream has no /models here: check the region URL',
    429: 'the upstream is throttling this key',
  }[code] || (code >= 500 ? 'the upstream failed; the key may be fine' : null);
  return meaning ? `${reason} — ${code}: ${meaning}` : reason;
}

export async function diagnostics(ctx) {
  const all = await allTenants();
  const names = Object.fromEntries(all.map((t) => [t.id, t.name]));
  const out = h('div', { id: 'diagnostics' });
  const f = form({
    submitLabel: 'Run diagnostics',
    busyLabel: 'Checking gateways and keys…',
    write: false,
    fields: [
      { name: 'region', label: 'Region', type: 'select', options: [['', 'All regions'], ...REGIONS] },
      { name: 'tenant_id', label: 'Tenant', type: 'select', options: [['', 'All tenants'], ...all.map((t) => [t.id, t.name])] },
    ],
    onSubmit: async (v) => {
      const body = {};
      if (v.region) body.region = v.region;
      if (v.tenant_id) body.tenant_id = v.tenant_id;
      const d = (await post('/admin/ai-gateways/diagnostics', body)).data;
      fill(out,
        h('h2', {}, 'Gateways'),
        table([
          ['Region', (g) => g.region],
          ['Configured', (g) => (g.configured ? 'yes' : 'no')],
          ['Reachable', (g) => (g.reachable ? 'yes' : 'no')],
          ['Status', (g) => (g.status_code === null || g.status_code === undefined ? '—' : gatewayStatus(g.status_code))],
          ['Latency', (g) => (g.latency_ms === null || g.latency_ms === undefined ? '—' : `${g.latency_ms} ms`)],
          ['Error', (g) => g.error || '—'],
        ], d.gateways),
        h('h2', {}, 'Keys'),
        d.keys.length ? table([
          ['Tenant', (k) => h('a', { href: `/admin/tenants/${k.tenant_id}` }, names[k.tenant_id] || k.tenant_id)],
          ['Region', (k) => k.region],
          ['Status', (k) => h('span', { class: `tag status-${k.status}` }, k.status)],
          ['Reason', (k) => keyReason(k.status_reason)],
        ], d.keys) : h('p', {}, 'No keys to check.'));
    },
  });
  fill(ctx.main, pageHead('Gateway diagnostics'), h('p', { class: 'sub' }, 'Checks that each region\'s gateway answers, and re-checks tenant AI keys (their status is updated).'), f.el, out);
}
