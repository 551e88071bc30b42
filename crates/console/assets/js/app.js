// The console's shell: who is signed in (GET /auth/me on every navigation, so a suspension or
// a Shadow view shows at once), the navigation, the banners, and the client-side router.

import { get, post, ApiError } from './api.js';
import { h, fill, notice, errorNotice, loading, actionButton, when } from './ui.js';
import { plain } from './messages.js';
import * as account from './pages/account.js';
import * as workspace from './pages/workspace.js';
import * as records from './pages/records.js';
import * as keys from './pages/keys.js';
import * as composer from './pages/composer.js';
import * as guard from './pages/guard.js';
import * as admin from './pages/admin.js';

// Who may open a page: 'public' (anyone), 'signed' (any signed-in account), 'member' (a member
// of an active tenant, or an admin in a Shadow view), 'admin' (a platform admin).
const ROUTES = [
  ['/', 'member', 'Overview', workspace.overview],
  ['/signin', 'public', 'Sign in', account.signin],
  ['/signup', 'public', 'Sign up', account.signup],
  ['/account', 'signed', 'Your account', account.accountPage],
  ['/skills', 'member', 'Skills', records.skills],
  ['/memory', 'member', 'Memory', records.memory],
  ['/memory/:id', 'member', 'Memory sources', records.sources],
  ['/drafts/:kind', 'member', 'Drafts', records.drafts],
  ['/settings', 'member', 'Workspace settings', workspace.settings],
  ['/keys', 'member', 'API keys', keys.page],
  ['/ai-access', 'member', 'AI access', workspace.aiAccess],
  ['/activity', 'member', 'Activity', workspace.activity],
  ['/usage', 'member', 'Usage', workspace.usage],
  ['/composer', 'member', 'Composer', composer.page],
  ['/guard', 'public', 'Guard', guard.page],
  ['/admin', 'admin', 'Tenants', admin.tenants],
  ['/admin/tenants/:id', 'admin', 'Tenant', admin.tenant],
  ['/admin/users', 'admin', 'Users', admin.users],
  ['/admin/diagnostics', 'admin', 'Gateway diagnostics', admin.diagnostics],
].map(([path, access, title, render]) => ({ path, access, title, render, re: new RegExp(`^${path.replace(/:(\w+)/g, '(?<$1>[^/]+)')}/?$`) }));

const state = { me: null, ws: null, after: '/', seq: 0, observer: null };

const $ = (id) => document.getElementById(id);

function match(pathname) {
  for (const r of ROUTES) {
    const m = r.re.exec(pathname);
    if (m) return { route: r, params: { ...(m.groups || {}) } };
  }
  return null;
}

export function navigate(path, opts = {}) {
  if (opts.replace) history.replaceState(null, '', path);
  else if (path !== location.pathname + location.search) history.pushState(null, '', path);
  return render();
}

async function loadMe() {
  try {
    state.me = (await get('/auth/me')).data;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) state.me = null;
    else throw e;
  }
  state.ws = null;
  const me = state.me;
  if (me && (me.shadow || (me.tenant && me.status === 'active' && me.tenant.status === 'active'))) {
    try {
      state.ws = (await get('/workspace')).data;
    } catch (_) {
      state.ws = null;
    }
  }
}

// Why a signed-in person cannot use the workspace, in plain words, or null.
export function refusal(me) {
  if (!me) return null;
  if (me.status === 'suspended') return { code: 'member_suspended' };
  if (me.shadow) return null;
  if (me.role === 'platform_admin' && !me.tenant) return { code: 'admin_without_tenant' };
  if (me.status === 'unassigned' || !me.tenant) return { code: 'member_unassigned' };
  if (me.tenant.status === 'suspended') return { code: 'tenant_suspended' };
  return null;
}

function refusalView(me, why) {
  if (why.code === 'admin_without_tenant')
    return notice('info', 'You are a platform administrator without a workspace of your own. To look at a tenant\'s workspace, open it under Tenants and enter its Shadow view.', h('a', { href: '/admin' }, 'Go to Tenants'));
  const text = plain(why);
  const extra = why.code === 'tenant_suspended' && me.tenant ? ` (tenant: ${me.tenant.name})` : '';
  return h('div', { class: 'refusal', id: 'refusal', 'data-code': why.code }, h('h1', {}, 'You cannot use the workspace right now'), notice('warn', text + extra), h('p', {}, 'You can still ', h('a', { href: '/account' }, 'see your account and sessions'), ', change your password, sign out, or use the ', h('a', { href: '/guard' }, 'Guard'), '.'));
}

// The entry whose path is the current page's, or the longest that contains it: on
// /admin/users that is "Users", not "Tenants" (/admin) as well.
function currentEntry(paths, current) {
  const within = (path) => current === path || (path !== '/' && current.startsWith(`${path}/`));
  return paths.filter(within).sort((a, b) => b.length - a.length)[0] ?? null;
}

function header(current) {
  const me = state.me;
  const nav = h('ul', { class: 'nav' });
  const entries = [];
  const add = (path, label) => entries.push([path, label]);
  const usable = me && !refusal(me);
  if (usable) {
    add('/', 'Overview');
    add('/composer', 'Composer');
    add('/skills', 'Skills');
    add('/memory', 'Memory');
    add('/drafts/agents', 'Drafts');
    add('/keys', 'API keys');
    add('/ai-access', 'AI access');
    add('/activity', 'Activity');
    add('/usage', 'Usage');
    add('/settings', 'Settings');
  }
  if (me && me.role === 'platform_admin') {
    add('/admin', 'Tenants');
    add('/admin/users', 'Users');
    add('/admin/diagnostics', 'Diagnostics');
  }
  add('/guard', 'Guard');
  const here = currentEntry(entries.map(([path]) => path), current);
  for (const [path, label] of entries) nav.append(h('li', {}, h('a', { href: path, 'aria-current': path === here ? 'page' : null }, label)));
  const who = h('div', { class: 'who' });
  if (me) {
    who.append(h('a', { href: '/account', class: 'me', 'aria-label': `Your account: ${me.email}` }, me.name || me.email), ' ', actionButton('Sign out', signout, { write: false, class: 'link' }));
  } else {
    who.append(h('a', { href: '/signin' }, 'Sign in'));
    // "Sign up" only when the server takes new accounts.
    account.signupOpen().then((open) => {
      if (open && who.isConnected && !who.querySelector('a[href="/signup"]')) who.append(' ', h('a', { href: '/signup' }, 'Sign up'));
    });
  }
  const toggle = h('button', { type: 'button', class: 'menu', 'aria-expanded': 'false', 'aria-controls': 'nav' }, 'Menu');
  const navEl = h('nav', { id: 'nav', 'aria-label': 'Main' }, nav);
  toggle.addEventListener('click', () => {
    const open = toggle.getAttribute('aria-expanded') !== 'true';
    toggle.setAttribute('aria-expanded', String(open));
    navEl.classList.toggle('open', open);
  });
  fill($('top'), h('div', { class: 'bar' }, h('a', { href: me ? '/' : '/guard', class: 'brand' }, 'gc'), toggle, navEl, who));
}

function banners() {
  const box = $('banners');
  box.replaceChildren();
  const me = state.me;
  if (me && me.shadow) {
    box.append(
      h('div', { class: 'banner banner-shadow', id: 'shadow-banner', role: 'status' },
        h('strong', {}, 'Shadow view: '), `you are looking at tenant “${me.shadow.tenant_name}” read-only, since ${when(me.shadow.since)}. Changes are disabled.`, ' ',
        actionButton('Leave Shadow view', async () => {
          await post('/auth/ip-admin', { tenant_id: null });
          await navigate('/admin');
        }, { write: false, class: 'light' })),
    );
  }
  const sv = state.ws && state.ws.support_view;
  if (sv && !(me && me.shadow)) {
    box.append(h('div', { class: 'banner banner-support', id: 'support-banner', role: 'status' }, h('strong', {}, 'Support view: '), `administrator ${sv.admin_email} is viewing this workspace (read-only) since ${when(sv.since)}.`));
  }
}

async function signout() {
  try {
    await post('/auth/signout');
  } finally {
    state.me = null;
    await navigate('/signin');
  }
}

// In the Shadow view every write control is disabled as soon as it appears.
function lockWrites(main) {
  if (state.observer) state.observer.disconnect();
  state.observer = null;
  if (!(state.me && state.me.shadow)) return;
  const lock = (root) => {
    const els = root.matches && root.matches('[data-write]') ? [root] : [];
    if (root.querySelectorAll) els.push(...root.querySelectorAll('[data-write]'));
    for (const el of els) {
      if (el.dataset.locked) continue;
      el.dataset.locked = '1';
      el.disabled = true;
      el.title = 'Read-only in the Shadow view';
    }
  };
  lock(main);
  state.observer = new MutationObserver((records) => {
    for (const r of records) for (const n of r.addedNodes) if (n.nodeType === 1) lock(n);
  });
  state.observer.observe(main, { childList: true, subtree: true });
}

async function render() {
  const seq = ++state.seq;
  const main = $('main');
  const path = location.pathname;
  const found = match(path);
  try {
    await loadMe();
  } catch (e) {
    if (seq !== state.seq) return;
    fill(main, errorNotice(e, h('button', { type: 'button', onclick: () => render() }, 'Retry')));
    return;
  }
  if (seq !== state.seq) return;
  const me = state.me;
  header(path);
  banners();
  lockWrites(main);
  if (!found) {
    document.title = 'Not found · gc console';
    fill(main, h('h1', {}, 'Page not found'), h('p', {}, 'There is no console page at this address. ', h('a', { href: me ? '/' : '/signin' }, 'Go to the start page'), '.'));
    return;
  }
  const { route, params } = found;
  document.title = `${route.title} · gc console`;
  if (route.access !== 'public' && !me) {
    state.after = path === '/signin' ? '/' : path;
    return navigate('/signin', { replace: true });
  }
  if (route.access === 'admin' && me.role !== 'platform_admin') {
    fill(main, h('h1', {}, route.title), errorNotice({ code: 'admin_required' }));
    return;
  }
  if (route.access === 'admin' && me.status === 'suspended') {
    fill(main, refusalView(me, { code: 'member_suspended' }));
    return;
  }
  if (route.access === 'member') {
    const why = refusal(me);
    if (why) {
      if (why.code === 'admin_without_tenant' && path === '/') return navigate('/admin', { replace: true });
      fill(main, refusalView(me, why));
      return;
    }
  }
  fill(main, loading());
  const ctx = {
    main,
    me,
    ws: state.ws,
    params,
    query: new URLSearchParams(location.search),
    readOnly: !!(me && me.shadow),
    navigate,
    after: () => state.after,
    refresh: () => render(),
    current: () => seq === state.seq,
  };
  try {
    await route.render(ctx);
  } catch (e) {
    if (seq !== state.seq) return;
    fill(main, h('h1', {}, route.title), errorNotice(e, h('button', { type: 'button', onclick: () => render() }, 'Retry')));
  }
}

document.addEventListener('click', (ev) => {
  if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  const a = ev.target.closest && ev.target.closest('a[href]');
  if (!a || a.target || a.hasAttribute('download')) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith('/api/') || url.pathname.startsWith('/assets/')) return;
  ev.preventDefault();
  document.getElementById('nav')?.classList.remove('open');
  navigate(url.pathname + url.search).then(() => document.getElementById('main').focus({ preventScroll: false }));
});

window.addEventListener('popstate', () => render());
render();
