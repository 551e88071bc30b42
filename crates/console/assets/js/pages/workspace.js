// Members' workspace pages: overview, settings, AI access and its guide, activity, usage.

import { get, patch, withQuery } from '../api.js';
import { h, fill, form, section, pageHead, notice, errorNotice, pagedTable, time, codeBlock, table, loading } from '../ui.js';
import { count, limitLabel, limitText, moneyText, nanos, TENANT_LIMITS } from '../limits.js';

const AI_WORDS = {
  ready: 'Ready: Composer runs and /run calls with a key will work.',
  disabled: 'Disabled: AI is switched off for this workspace.',
  not_ready: 'Not ready: no working AI key for this region yet.',
};

export async function overview(ctx) {
  const ws = (await get('/workspace')).data;
  const c = ws.counts;
  const card = (href, label, n) => h('li', {}, h('a', { href, class: 'stat' }, h('span', { class: 'n' }, String(n)), h('span', {}, label)));
  fill(
    ctx.main,
    pageHead(ws.tenant.name, h('p', { class: 'sub' }, `Region ${ws.tenant.region} · signed in as ${ws.member.email}`)),
    h('ul', { class: 'stats', 'aria-label': 'Your workspace' },
      card('/skills', 'Skills', c.skills),
      card('/memory', 'Memory collections', c.memory_collections),
      card('/drafts/agents', 'Agent drafts', c.drafts.agents),
      card('/drafts/workflows', 'Workflow drafts', c.drafts.workflows),
      card('/drafts/apps', 'App drafts', c.drafts.apps),
      card('/keys', 'API keys', c.api_keys)),
    section('AI access', h('p', { id: 'ai-status', 'data-status': ws.ai_access.status }, AI_WORDS[ws.ai_access.status] || ws.ai_access.status), h('p', {}, h('a', { href: '/composer' }, 'Open the Composer'), ' · ', h('a', { href: '/ai-access' }, 'How to call it with a key'))),
    ws.preview && ws.preview.length ? section('Preview areas', h('p', {}, 'These are stored, never run or indexed: ', ws.preview.join(', '), '.')) : null,
  );
}

export async function settings(ctx) {
  const res = await get('/workspace/settings');
  let version = res.data.version;
  const f = form({
    submitLabel: 'Save settings',
    fields: [
      { name: 'display_name', label: 'Display name', max: 100 },
      { name: 'description', label: 'Description', type: 'textarea', max: 1000 },
      { name: 'default_model', label: 'Default model', max: 100, help: '"auto" uses the region\'s default model.' },
      { name: 'timezone', label: 'Time zone', required: true, help: 'An IANA name such as Europe/Zurich or Asia/Hong_Kong.', validate: (v) => (/^[A-Za-z_]+(\/[A-Za-z0-9_+-]+)*$/.test(v) ? null : 'must be an IANA name such as Asia/Hong_Kong') },
    ],
    onError: (e) => conflict(e, f, () => ctx.refresh()),
    onSubmit: async (v) => {
      const r = await patch('/workspace/settings', v, { ifMatch: version });
      version = r.data.version;
      f.message(notice('ok', 'Saved.'));
    },
  });
  f.set(res.data);
  fill(ctx.main, pageHead('Workspace settings'), f.el);
}

// Shows a version conflict with a reload offer; true when it was one.
export function conflict(e, f, reload) {
  if (e.code !== 'version_conflict') return false;
  f.message(notice('warn', 'Someone else changed this since you opened it, so your change was not saved. Reload to see their version, then make your change again.', h('button', { type: 'button', class: 'primary', id: 'reload-conflict', onclick: reload }, 'Reload')));
  return true;
}

export async function aiAccess(ctx) {
  const [a, g] = await Promise.all([get('/workspace/ai-access'), get('/workspace/ai-access/guide')]);
  const s = a.data;
  fill(
    ctx.main,
    pageHead('AI access'),
    section('Status',
      h('dl', { class: 'facts' },
        h('dt', {}, 'Status'), h('dd', { id: 'ai-status', 'data-status': s.status }, AI_WORDS[s.status] || s.status),
        h('dt', {}, 'Region'), h('dd', {}, s.region || '—'),
        h('dt', {}, 'Usable keys'), h('dd', {}, String(s.chat_enabled_keys ?? 0)),
        s.reason ? [h('dt', {}, 'Why'), h('dd', {}, s.reason)] : null)),
    section('Calling it from code',
      h('ol', {}, g.data.steps.map((step) => h('li', {}, step))),
      h('h3', {}, 'curl'), codeBlock(g.data.example.curl, 'curl example'),
      h('h3', {}, 'Python'), codeBlock(g.data.example.python, 'Python example'),
      h('p', {}, 'Make a key with the "run" scope on the ', h('a', { href: '/keys' }, 'API keys'), ' page.')),
  );
}

function detailText(d) {
  if (d === null || d === undefined) return '';
  if (typeof d !== 'object') return String(d);
  return Object.entries(d).filter(([, v]) => v !== null && v !== undefined && v !== '').map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`).join(' · ');
}

export async function activity(ctx) {
  const list = pagedTable(
    [
      ['When', (a) => time(a.at)],
      ['Who', (a) => `${a.actor.label}${a.actor.kind === 'member' ? '' : ` (${a.actor.kind})`}`],
      ['What', (a) => h('code', {}, a.action)],
      ['Details', (a) => detailText(a.detail)],
    ],
    async (cursor) => (await get(withQuery('/workspace/activity', { limit: 25, cursor }))).data,
    { caption: 'Newest first', empty: 'No activity yet.' },
  );
  fill(ctx.main, pageHead('Activity'), list);
  await list.ready;
}

// Usage: requests, errors and tokens by day, model or key for a range of days, and the
// workspace's quotas with this month's tokens against the monthly budget.
export async function usage(ctx) {
  const now = new Date();
  const first = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString().slice(0, 10);
  const today = now.toISOString().slice(0, 10);
  const limits = (ctx.ws && ctx.ws.tenant && ctx.ws.tenant.limits) || {};
  const out = h('div', { id: 'usage-result' });
  const month = h('div', { id: 'usage-month' }, loading());
  const f = form({
    submitLabel: 'Show',
    write: false,
    busyLabel: 'Loading…',
    fields: [
      { name: 'from', label: 'From', type: 'date', value: first, required: true },
      { name: 'to', label: 'To', type: 'date', value: today, required: true, validate: (v) => (v < f.values().from ? 'must not be before From' : null) },
      { name: 'group_by', label: 'Group by', type: 'select', options: [['day', 'Day'], ['model', 'Model'], ['key', 'API key']] },
    ],
    onSubmit: async (v) => show(v),
  });
  // Every page of a query (a range is at most 400 days, so a few pages at most).
  async function all(params) {
    const rows = [];
    let cursor = null;
    do {
      const page = (await get(withQuery('/workspace/usage', { ...params, limit: 200, cursor }))).data;
      rows.push(...page.data);
      cursor = page.next_cursor;
    } while (cursor && rows.length < 5000);
    return rows;
  }
  // Key names for the "API key" grouping (the list is session-only; a key reading usage gets ids).
  async function keyNames() {
    try {
      const keys = (await get(withQuery('/workspace/api-keys', { limit: 200 }))).data.data;
      return Object.fromEntries(keys.map((k) => [k.id, `${k.name} (${k.hint})`]));
    } catch (_) {
      return {};
    }
  }
  async function show(v) {
    fill(out, loading());
    try {
      const [rows, names] = await Promise.all([all(v), v.group_by === 'key' ? keyNames() : {}]);
      const label = { day: ['Day', (r) => r.day], model: ['Model', (r) => r.model], key: ['Key', (r) => (r.key_id ? names[r.key_id] || r.key_id : 'session (Composer)')] }[v.group_by];
      fill(out, table([label, ['Requests', (r) => count(r.requests)], ['Errors', (r) => count(r.errors)], ['Prompt tokens', (r) => count(r.prompt_tokens)], ['Completion tokens', (r) => count(r.completion_tokens)], ['Total tokens', (r) => count(r.total_tokens)], ['Cost', (r) => `${r.cost} ${r.currency}`]], rows, { caption: `${v.from} to ${v.to}` }), rows.length ? null : h('p', {}, 'No runs in this period.'));
    } catch (e) {
      fill(out, errorNotice(e));
    }
  }
  async function thisMonth() {
    try {
      const rows = await all({ group_by: 'day' });
      const used = rows.reduce((n, r) => n + r.total_tokens, 0);
      const budget = limits.monthly_tokens;
      // Spend summed exactly, in nano-units (decision 0038).
      const spent = rows.reduce((n, r) => n + (nanos(r.cost) ?? 0n), 0n);
      const currency = rows.length ? rows[0].currency : '';
      const cap = nanos(limits.monthly_spend);
      fill(month, h('p', {}, budget === null || budget === undefined
        ? `${count(used)} tokens used this month (no monthly budget).`
        : `${count(used)} of ${count(budget)} tokens used this month (${Math.min(100, Math.floor((used * 100) / budget))}%).`),
      h('p', { id: 'usage-spend' }, cap === null
        ? `${moneyText(spent)} ${currency} spent this month (no spend limit).`.replace('  ', ' ')
        : `${moneyText(spent)} of ${limits.monthly_spend} ${currency} spent this month.`.replace('  ', ' ')));
    } catch (e) {
      fill(month, errorNotice(e));
    }
  }
  fill(ctx.main, pageHead('Usage'),
    section('Quotas',
      h('dl', { class: 'facts', id: 'usage-limits' },
        TENANT_LIMITS.map((n) => [h('dt', {}, limitLabel(n)), h('dd', { 'data-limit': n }, limitText(n, limits[n]))])),
      month,
      h('p', { class: 'help' }, 'Set by a platform administrator. Over a per-minute limit a run is refused for a moment; once the monthly budget is used, until the next month. Keys can have lower limits of their own on the ', h('a', { href: '/keys' }, 'API keys'), ' page.')),
    h('h2', {}, 'Runs'), f.el, out);
  await Promise.all([show(f.values()), thisMonth()]);
}
