// Everyone's pages: sign in, sign up, and one's own account (name, password, sessions).

import { get, post, patch, del } from '../api.js';
import { h, fill, form, section, pageHead, notice, table, time, confirmButton, errorNotice } from '../ui.js';
import { plain } from '../messages.js';

const PASSWORD_BYTES = { minBytes: 12, maxBytes: 72 };

let signupState = null;
// Whether sign-up is open (`GET /auth/signup`), asked once per page load: it is configuration.
// When the server cannot say, the form is offered and the server's refusal is shown.
export function signupOpen() {
  signupState = signupState || get('/auth/signup', { credentials: 'omit' }).then((r) => r.data.open !== false, () => true);
  return signupState;
}

export async function signin(ctx) {
  if (ctx.me) return ctx.navigate('/', { replace: true });
  const f = form({
    submitLabel: 'Sign in',
    busyLabel: 'Signing in…',
    write: false,
    fields: [
      { name: 'email', label: 'Email', type: 'email', required: true, autocomplete: 'username' },
      { name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'current-password' },
    ],
    onSubmit: async (v) => {
      await post('/auth/signin', v);
      await ctx.navigate(ctx.after() || '/', { replace: true });
    },
  });
  const open = await signupOpen();
  fill(ctx.main, h('div', { class: 'narrow' }, pageHead('Sign in'), f.el, h('p', {}, open ? ['No account yet? ', h('a', { href: '/signup' }, 'Sign up'), '. '] : 'Accounts are made by an administrator. ', 'Only want to check a skill? The ', h('a', { href: '/guard' }, 'Guard'), ' needs no account.')));
  f.controls.email.input.focus();
}

export async function signup(ctx) {
  if (ctx.me) return ctx.navigate('/', { replace: true });
  if (!(await signupOpen())) {
    fill(ctx.main, h('div', { class: 'narrow', id: 'signup-closed' }, pageHead('Sign up'), notice('info', plain({ code: 'signup_disabled' })), h('p', {}, h('a', { href: '/signin' }, 'Sign in'), ' with an account you were given, or use the ', h('a', { href: '/guard' }, 'Guard'), ', which needs no account.')));
    return;
  }
  const f = form({
    submitLabel: 'Create account',
    busyLabel: 'Creating…',
    write: false,
    fields: [
      { name: 'name', label: 'Name', required: true, max: 100, autocomplete: 'name' },
      { name: 'email', label: 'Email', type: 'email', required: true, autocomplete: 'username' },
      { name: 'password', label: 'Password', type: 'password', required: true, autocomplete: 'new-password', help: '12 to 72 bytes.', ...PASSWORD_BYTES },
    ],
    onSubmit: async (v) => {
      await post('/auth/signup', v);
      await ctx.navigate('/', { replace: true });
    },
  });
  fill(ctx.main, h('div', { class: 'narrow' }, pageHead('Sign up'), h('p', {}, 'New accounts wait until an administrator adds them to a workspace.'), f.el, h('p', {}, 'Already have an account? ', h('a', { href: '/signin' }, 'Sign in'), '.')));
  f.controls.name.input.focus();
}

export async function accountPage(ctx) {
  const me = ctx.me;
  const profile = form({
    submitLabel: 'Save name',
    write: false,
    fields: [{ name: 'name', label: 'Name', required: true, max: 100, value: me.name, autocomplete: 'name' }],
    onSubmit: async (v) => {
      await patch('/auth/me', v);
      profile.message(notice('ok', 'Saved.'));
      ctx.refresh();
    },
  });
  const password = form({
    submitLabel: 'Change password',
    write: false,
    fields: [
      { name: 'current_password', label: 'Current password', type: 'password', required: true, autocomplete: 'current-password' },
      { name: 'new_password', label: 'New password', type: 'password', required: true, autocomplete: 'new-password', help: '12 to 72 bytes. Every other session is signed out.', ...PASSWORD_BYTES },
    ],
    onError: (e) => {
      if (e.code === 'invalid_credentials') {
        password.showError({ code: 'validation_failed', message: 'current_password: is not your current password' });
        return true;
      }
      return false;
    },
    onSubmit: async (v) => {
      await post('/auth/change-password', v);
      password.reset();
      password.message(notice('ok', 'Password changed. Your other sessions were signed out.'));
      await loadSessions();
    },
  });
  const sessionsBox = h('div');
  async function loadSessions() {
    fill(sessionsBox, h('p', { class: 'loading', role: 'status' }, 'Loading…'));
    try {
      const list = (await get('/auth/sessions')).data.data;
      fill(
        sessionsBox,
        table(
          [
            ['Signed in', (s) => time(s.created_at)],
            ['Last seen', (s) => time(s.last_seen_at)],
            ['Expires', (s) => time(s.expires_at)],
            ['Browser', (s) => s.user_agent || '—'],
            ['Address', (s) => s.ip || '—'],
            ['', (s) => (s.current ? h('span', { class: 'tag' }, 'this session') : confirmButton('Revoke', 'Sign this session out?', async () => {
              await del(`/auth/sessions?id=${encodeURIComponent(s.id)}`);
              await loadSessions();
            }, { ariaLabel: 'Revoke session', write: false }))],
          ],
          list,
          { caption: 'Your sessions' },
        ),
        list.length > 1 ? h('p', {}, confirmButton('Sign out all other sessions', 'Sign out every other session?', async () => {
          await del('/auth/sessions');
          await loadSessions();
        }, { write: false })) : null,
      );
    } catch (e) {
      fill(sessionsBox, errorNotice(e));
    }
  }
  const t = me.tenant;
  const facts = h('dl', { class: 'facts' },
    h('dt', {}, 'Email'), h('dd', {}, me.email),
    h('dt', {}, 'Role'), h('dd', {}, me.role === 'platform_admin' ? 'Platform administrator' : 'Member'),
    h('dt', {}, 'Status'), h('dd', { id: 'account-status' }, me.status),
    h('dt', {}, 'Workspace'), h('dd', {}, t ? `${t.name} (${t.region}${t.status === 'suspended' ? ', suspended' : ''})` : 'none'),
    h('dt', {}, 'Member since'), h('dd', {}, time(me.created_at)));
  fill(ctx.main, pageHead('Your account'), section('Profile', facts, profile.el), section('Password', password.el), section('Sessions', sessionsBox));
  await loadSessions();
}
