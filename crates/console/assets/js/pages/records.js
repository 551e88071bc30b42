// Stored workspace records: skills, memory collections and their sources, and the three draft
// kinds. One generic page: a paged list, a create form, an editor that sends If-Match with the
// version it loaded (a 409 says so and offers a reload), and delete with a confirmation.
// Skills also show the Guard's stored verdict on their content (stale when it was made under
// other rules, or not scanned) with its findings, and a "Scan again" action.

import { get, post, patch, del, withQuery } from '../api.js';
import { h, fill, form, pageHead, notice, errorNotice, pagedTable, time, confirmButton, loading } from '../ui.js';
import { conflict } from './workspace.js';

const KIB256 = 256 * 1024;

// The name and description fields of skills, collections and drafts (fresh objects per form).
const nameAndDescription = () => [
  { name: 'name', label: 'Name', required: true, max: 100 },
  { name: 'description', label: 'Description', type: 'textarea', max: 1000, rows: 2 },
];

const KINDS = {
  skills: {
    title: 'Skills',
    one: 'skill',
    intro: 'SKILL.md texts, stored as written. They are never run. The Guard scans each one when it is saved; its verdict informs, it never blocks.',
    scan: true,
    fields: () => [
      ...nameAndDescription(),
      { name: 'content', label: 'Content (SKILL.md)', type: 'textarea', required: true, maxBytes: KIB256, rows: 12, trim: false },
      { name: 'tags', label: 'Tags', type: 'tags', help: 'Separated by commas.' },
    ],
    columns: [
      ['Guard', (r) => verdictBadge(r.guard)],
      ['Tags', (r) => (r.tags || []).map((t) => h('span', { class: 'tag' }, t))],
    ],
  },
  memory: {
    title: 'Memory',
    one: 'collection',
    intro: 'Collections of sources. Stored only: nothing is indexed or fetched.',
    fields: () => [
      ...nameAndDescription(),
    ],
    columns: [['Sources', (r) => h('a', { href: `/memory/${r.id}` }, 'Open sources')]],
  },
  sources: {
    title: 'Sources',
    one: 'source',
    intro: 'A URL source is stored as text; it is never fetched.',
    nameField: 'title',
    fields: () => [
      { name: 'title', label: 'Title', required: true, max: 200 },
      { name: 'kind', label: 'Kind', type: 'select', options: [['text', 'Text'], ['url', 'URL'], ['note', 'Note']] },
      { name: 'content', label: 'Content', type: 'textarea', required: true, maxBytes: KIB256, rows: 8, trim: false },
    ],
    columns: [['Kind', (r) => r.kind]],
  },
  drafts: {
    title: 'Drafts',
    one: 'draft',
    intro: 'Agent, workflow and app drafts. Stored only: they are not run.',
    fields: () => [
      ...nameAndDescription(),
      { name: 'definition', label: 'Definition (JSON object)', type: 'json', value: {}, rows: 10, validate: (v) => (new TextEncoder().encode(JSON.stringify(v)).length > KIB256 ? 'must be at most 256 KiB' : null) },
    ],
    columns: [],
  },
};

// The Guard's stored verdict as a short badge: PASS, WARN or FAIL, and "stale" when it was made
// under other rules than the Guard's now (or the skill was not scanned).
function verdictBadge(g) {
  if (!g) return '';
  const v = g.verdict || 'warn';
  return h('span', { class: `tag verdict-${v}`, 'data-verdict': v, title: g.stale ? 'Made under other rules, or not scanned: scan again' : `Rules ${g.rules_version}` },
    v.toUpperCase(), g.stale ? ' · stale' : '');
}

// The verdict with its findings (at most 20 are stored; the rest are counted).
function verdictPanel(g) {
  if (!g) return '';
  const items = (g.findings || []).map((f) => h('li', {},
    h('strong', {}, `${f.severity} `), h('code', {}, f.rule_id), ` ${f.title}`, f.line ? ` (line ${f.line})` : '', f.message ? h('div', { class: 'meta' }, f.message) : ''));
  const when = g.scanned_at ? ['Scanned ', time(g.scanned_at), ` under rules ${g.rules_version}`] : ['Not scanned'];
  return h('section', { class: 'panel', id: 'skill-guard', 'aria-label': 'Guard verdict' },
    h('div', { class: `verdict verdict-${g.verdict}`, 'data-verdict': g.verdict }, h('strong', {}, String(g.verdict).toUpperCase()), g.stale ? ' — stale: scan again to judge it by the current rules' : ''),
    h('p', { class: 'meta' }, ...when),
    items.length ? h('ul', { class: 'findings' }, items) : h('p', {}, 'No findings.'),
    g.findings_omitted ? h('p', { class: 'meta' }, `${g.findings_omitted} more finding(s) not stored.`) : '');
}

const DRAFT_KINDS = [['agents', 'Agents'], ['workflows', 'Workflows'], ['apps', 'Apps']];

export const skills = (ctx) => recordsPage(ctx, KINDS.skills, '/workspace/skills', 'Skills');
export const memory = (ctx) => recordsPage(ctx, KINDS.memory, '/workspace/memory', 'Memory');

export async function sources(ctx) {
  const id = ctx.params.id;
  const col = (await get(`/workspace/memory/${encodeURIComponent(id)}`)).data;
  return recordsPage(ctx, KINDS.sources, `/workspace/memory/${encodeURIComponent(id)}/sources`, `Sources of “${col.name}”`, h('p', {}, h('a', { href: '/memory' }, '← All collections')));
}

export async function drafts(ctx) {
  const kind = ctx.params.kind;
  const tabs = h('nav', { class: 'tabs', 'aria-label': 'Draft kinds' }, DRAFT_KINDS.map(([k, label]) => h('a', { href: `/drafts/${k}`, 'aria-current': k === kind ? 'page' : null }, label)));
  const known = DRAFT_KINDS.find(([k]) => k === kind);
  if (!known) {
    fill(ctx.main, pageHead('Drafts'), tabs, notice('warn', 'There is no such draft kind: choose agents, workflows or apps.'));
    return;
  }
  const spec = { ...KINDS.drafts, one: `${known[1].toLowerCase().replace(/s$/, '')} draft` };
  return recordsPage(ctx, spec, `/workspace/drafts/${kind}`, `${known[1].replace(/s$/, '')} drafts`, tabs);
}

async function recordsPage(ctx, spec, base, title, ...before) {
  const nameOf = (r) => r[spec.nameField || 'name'];
  const panel = h('div', { class: 'panel', id: 'editor-panel' });
  const status = h('div', { role: 'status', 'aria-live': 'polite', id: 'page-status' });
  const listBox = h('div');
  const newButton = h('button', { type: 'button', class: 'primary', 'data-write': '', id: 'new-record' }, `New ${spec.one}`);

  function closePanel() {
    panel.replaceChildren();
    newButton.hidden = false;
  }

  function reloadList() {
    const list = pagedTable(
      [
        ['Name', (r) => h('strong', {}, nameOf(r))],
        ...spec.columns,
        ['Version', (r) => String(r.version)],
        ['Updated', (r) => time(r.updated_at)],
        ['', (r) => h('span', { class: 'row-actions' },
          h('button', { type: 'button', 'aria-label': `Edit ${nameOf(r)}`, class: 'edit', onclick: () => edit(r.id) }, ctx.readOnly ? 'View' : 'Edit'), ' ',
          spec.scan ? h('button', { type: 'button', 'data-write': '', class: 'scan', 'aria-label': `Scan ${nameOf(r)} again`, onclick: (ev) => scanAgain(r, ev.currentTarget) }, 'Scan again') : '', spec.scan ? ' ' : '',
          confirmButton('Delete', `Delete “${nameOf(r)}”?`, async () => {
            try {
              await del(`${base}/${r.id}`);
            } catch (e) {
              if (e.status !== 404) throw e;
            }
            status.replaceChildren(notice('ok', `Deleted “${nameOf(r)}”.`));
            closePanel();
            reloadList();
          }, { ariaLabel: `Delete ${nameOf(r)}`, onError: (e) => status.replaceChildren(errorNotice(e)) }))],
      ],
      async (cursor) => (await get(withQuery(base, { limit: 50, cursor }))).data,
      { empty: `No ${spec.one}s yet.` },
    );
    fill(listBox, list);
    return list.ready;
  }

  async function scanAgain(r, button) {
    button.disabled = true;
    status.replaceChildren(notice('info', `Scanning “${nameOf(r)}”…`));
    try {
      const s = (await post(`${base}/${r.id}/scan`, {})).data;
      status.replaceChildren(notice(s.guard.verdict === 'pass' ? 'ok' : 'warn', `Scanned “${nameOf(s)}”: ${String(s.guard.verdict).toUpperCase()}${s.guard.stale ? ' (not scanned: try again)' : ''}.`));
      await reloadList();
    } catch (e) {
      status.replaceChildren(errorNotice(e));
      button.disabled = false;
    }
  }

  function create() {
    newButton.hidden = true;
    status.replaceChildren();
    const f = form({
      legend: `New ${spec.one}`,
      submitLabel: 'Create',
      busyLabel: 'Creating…',
      fields: spec.fields(),
      cancel: closePanel,
      onSubmit: async (v) => {
        const r = (await post(base, v)).data;
        closePanel();
        status.replaceChildren(notice('ok', `Created “${nameOf(r)}”.`));
        await reloadList();
      },
    });
    fill(panel, f.el);
    f.el.querySelector('input, textarea, select').focus();
  }

  async function edit(id) {
    newButton.hidden = true;
    status.replaceChildren();
    fill(panel, loading());
    let rec;
    try {
      rec = (await get(`${base}/${id}`)).data;
    } catch (e) {
      fill(panel, errorNotice(e));
      return;
    }
    let version = rec.version;
    const f = form({
      legend: `Edit ${spec.one} “${nameOf(rec)}” (version ${rec.version})`,
      submitLabel: 'Save',
      fields: spec.fields(),
      cancel: closePanel,
      onError: (e) => conflict(e, f, () => edit(id)),
      onSubmit: async (v) => {
        const r = (await patch(`${base}/${id}`, v, { ifMatch: version })).data;
        version = r.version;
        closePanel();
        status.replaceChildren(notice('ok', `Saved “${nameOf(r)}” (version ${r.version}).`));
        await reloadList();
      },
    });
    f.set(rec);
    f.el.id = 'editor';
    f.el.dataset.version = String(rec.version);
    fill(panel, f.el, h('p', { class: 'meta' }, `Created ${new Date(rec.created_at).toLocaleString()} · last changed `, time(rec.updated_at)), spec.scan ? verdictPanel(rec.guard) : '');
    f.el.querySelector('input, textarea, select').focus();
  }

  newButton.addEventListener('click', create);
  fill(ctx.main, before, pageHead(title, newButton), h('p', { class: 'sub' }, spec.intro), status, panel, listBox);
  await reloadList();
}
