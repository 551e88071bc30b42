// The Guard: a public page to scan pasted content or a public GitHub repository, with the
// verdict, the capability inventory, the findings (file, line, rule, excerpt) and a SARIF
// download.

import { BASE, errorOf } from '../api.js';
import { h, fill, form, pageHead, notice, errorNotice, table } from '../ui.js';

const VERDICT = {
  pass: '— nothing dangerous was found.',
  warn: '— some findings deserve a look.',
  fail: '— this contains dangerous content.',
};

// The capability inventory, in the order a person deciding whether to install reads it.
const CAPABILITIES = [
  ['executes', 'Executes'],
  ['reads', 'Reads sensitive data'],
  ['sends', 'Sends data'],
  ['downloads', 'Downloads'],
  ['persists', 'Persists'],
  ['supply_chain', 'Changes the supply chain'],
  ['obfuscation', 'Hides what it runs'],
];

const ROLE = {
  install: 'runs at install',
  runs: 'runs',
  carried: 'carried only',
};

// What the skill can do, from every file, and whether each file runs or is only carried.
function inventory(inv) {
  if (!inv) return null;
  const lists = CAPABILITIES.filter(([key]) => (inv[key] || []).length);
  if (!lists.length) return h('section', { id: 'guard-inventory' }, h('h2', {}, 'Capabilities'), h('p', { class: 'sub' }, 'Nothing that executes, reads sensitive data, sends, downloads, persists, changes the supply chain or hides what it runs was found.'));
  return h('section', { id: 'guard-inventory' },
    h('h2', {}, 'Capabilities'),
    h('p', { class: 'sub' }, 'What the skill can do, from every file. “Carried only” is in tests, documentation, CI or locale files that nothing runs.'),
    h('dl', { class: 'inventory' }, lists.flatMap(([key, label]) => [
      h('dt', {}, `${label} (${inv[key].length})`),
      h('dd', {}, h('ul', {}, inv[key].map((c) => h('li', { 'data-role': c.role },
        h('span', { class: `role role-${c.role}`, title: c.why }, ROLE[c.role] || c.role), ' ',
        c.what, ' — ', h('code', {}, `${c.path || '(pasted)'}:${c.line}`), ' ', h('code', { class: 'excerpt' }, c.detail))))),
    ])),
    inv.truncated ? h('p', { class: 'sub' }, 'Some items were left out (at most 40 per list).') : null);
}

const REPO = /^https:\/\/github\.com\/[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+(\.git)?\/?$/;

export async function page(ctx) {
  // Members of an active workspace scan with their session (the scan is recorded in their
  // feed); everyone else scans anonymously.
  const signedScan = !!(ctx.me && ctx.me.status === 'active' && ctx.me.tenant && ctx.me.tenant.status === 'active' && !ctx.me.shadow);
  const out = h('div', { id: 'guard-result', 'aria-live': 'polite' });
  let last = null;

  async function scan(body, format, signal) {
    const res = await fetch(`${BASE}/guard/scan${format ? `?format=${format}` : ''}`, {
      method: 'POST',
      credentials: signedScan ? 'same-origin' : 'omit',
      cache: 'no-store',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify(body),
      signal,
    });
    if (!res.ok) throw await errorOf(res);
    return format === 'sarif' ? res.blob() : res.json();
  }

  const mode = h('fieldset', { class: 'checks' }, h('legend', {}, 'What to scan'),
    h('label', { class: 'check' }, h('input', { type: 'radio', name: 'kind', value: 'content', checked: true }), ' Pasted content'), ' ',
    h('label', { class: 'check' }, h('input', { type: 'radio', name: 'kind', value: 'repo' }), ' A public GitHub repository'));

  const f = form({
    submitLabel: 'Scan',
    busyLabel: 'Scanning…',
    write: false,
    fields: [
      { name: 'target', label: 'Content to scan', type: 'textarea', required: true, rows: 10, trim: false, maxBytes: 1024 * 1024 - 1024, help: 'Paste a SKILL.md or any agent instructions. Nothing is run.',
        validate: (v) => (kind() === 'repo' && !REPO.test(v.trim()) ? 'must be https://github.com/OWNER/REPO' : null) },
    ],
    onSubmit: async (v) => {
      const body = { target: kind() === 'repo' ? v.target.trim() : v.target, mode: 'skill' };
      // The time so far, and a way out: a repository scan may take up to the server's limit.
      const what = kind() === 'repo' ? 'Fetching and scanning the repository…' : 'Scanning…';
      const started = Date.now();
      const elapsed = h('span', { id: 'guard-elapsed' }, '0 s');
      const controller = new AbortController();
      const cancel = h('button', { type: 'button', id: 'guard-cancel', class: 'link' }, 'Cancel');
      cancel.addEventListener('click', () => controller.abort());
      const tick = setInterval(() => { elapsed.textContent = `${Math.floor((Date.now() - started) / 1000)} s`; }, 1000);
      fill(out, h('p', { class: 'loading', role: 'status', id: 'guard-progress' }, what, ' ', elapsed, ' ', cancel));
      try {
        const result = await scan(body, undefined, controller.signal);
        last = body;
        show(result);
      } catch (e) {
        if (e && e.name === 'AbortError') {
          fill(out, notice('warn', 'Scan cancelled.'));
          return;
        }
        fill(out);
        throw e;
      } finally {
        clearInterval(tick);
      }
    },
  });
  const kind = () => mode.querySelector('input:checked').value;
  const repoInput = h('input', { type: 'url', placeholder: 'https://github.com/OWNER/REPO' });
  // One field, two shapes: a textarea for content, a single line for an address.
  mode.addEventListener('change', () => {
    const c = f.controls.target;
    const label = c.row.querySelector('label');
    const help = c.row.querySelector('.help');
    const isRepo = kind() === 'repo';
    const next = isRepo ? repoInput : c.textarea || c.input;
    if (!c.textarea) c.textarea = c.input;
    if (next !== c.input) {
      next.id = c.input.id;
      next.name = c.input.name;
      next.setAttribute('aria-describedby', c.input.getAttribute('aria-describedby'));
      next.setAttribute('aria-required', 'true');
      c.input.replaceWith(next);
      c.input = next;
    }
    label.firstChild.textContent = isRepo ? 'Repository address' : 'Content to scan';
    help.textContent = isRepo ? 'Only https://github.com/OWNER/REPO of a public repository; its default branch is scanned.' : 'Paste a SKILL.md or any agent instructions. Nothing is run.';
  });

  function show(r) {
    const sarif = h('button', { type: 'button', id: 'sarif' }, 'Download SARIF');
    sarif.addEventListener('click', async () => {
      sarif.disabled = true;
      try {
        const blob = await scan(last, 'sarif');
        const url = URL.createObjectURL(blob);
        const a = h('a', { href: url, download: 'gc-guard.sarif.json', hidden: true });
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10000);
      } catch (e) {
        sarif.after(errorNotice(e));
      } finally {
        sarif.disabled = false;
      }
    });
    const s = r.stats || {};
    // What the scan could not read whole comes first and stands apart: such a verdict is never
    // a pass, and a person deciding whether to install the skill should know what to check.
    const gaps = r.findings.filter((x) => x.rule_id === 'scan.incomplete');
    const incomplete = gaps.length
      ? h('div', { class: 'notice notice-warn', id: 'guard-incomplete', role: 'status' },
        h('p', {}, h('strong', {}, 'Not everything was examined.'), ' Review these by hand; a scan that could not read everything is never a pass.'),
        h('ul', {}, gaps.map((x) => h('li', {}, x.message))))
      : null;
    const where = r.target && r.target.kind === 'repository' ? `${r.target.owner}/${r.target.repo}${r.target.ref ? ` @ ${r.target.ref}` : ''}` : 'pasted content';
    fill(out,
      h('div', { class: `verdict verdict-${r.verdict}`, id: 'verdict', 'data-verdict': r.verdict, role: 'status' }, h('strong', {}, r.verdict.toUpperCase()), ' ', VERDICT[r.verdict] || ''),
      incomplete,
      inventory(r.inventory),
      h('p', { class: 'sub' }, `Scanned ${where}: ${s.files_scanned ?? 0} file(s), ${s.bytes_scanned ?? 0} bytes, ${s.files_skipped ?? 0} skipped, in ${s.duration_ms ?? 0} ms.`, s.findings_truncated ? ` ${s.findings_truncated} more findings were left out.` : ''),
      r.findings.length
        ? table(
          [
            ['Severity', (x) => h('span', { class: `sev sev-${x.severity}` }, x.severity)],
            ['File', (x) => x.path || '(pasted)'],
            ['Line', (x) => h('span', { class: 'line' }, String(x.line))],
            ['Rule', (x) => h('span', {}, h('code', {}, x.rule_id), h('br'), x.title)],
            ['Why', (x) => x.message],
            ['Excerpt', (x) => h('code', { class: 'excerpt' }, x.excerpt)],
          ],
          r.findings,
          { caption: `${r.findings.length} finding(s)`, class: 'findings' },
        )
        : notice('ok', 'No findings.'),
      h('p', {}, sarif));
  }

  fill(ctx.main, pageHead('Guard'), h('p', { class: 'sub' }, 'Check an agent skill before you install it: paste its content, or give the address of a public GitHub repository. No account needed.'), mode, f.el, out);
}
