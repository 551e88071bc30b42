// The Composer: a chat with the workspace's AI gateway through POST /api/v1/run with
// stream: true. The event stream is read with fetch and a ReadableStream reader, so tokens show
// as they arrive; Stop aborts the request; the conversation stays on this page only.

import { BASE, errorOf } from '../api.js';
import { h, fill, pageHead, notice } from '../ui.js';
import { plain } from '../messages.js';

// Status lines for runs the AI provider failed: not a refusal by gc.
const UPSTREAM_FAILED = {
  upstream_error: 'The AI provider failed; nothing was answered.',
  upstream_timeout: 'The AI provider did not answer in time.',
  upstream_rejected: 'The AI provider rejected the request.',
  upstream_rate_limited: 'The AI provider is throttling requests.',
};

export async function page(ctx) {
  const messages = [];
  const log = h('ol', { class: 'conversation', id: 'conversation', 'aria-label': 'Conversation' });
  const statusLine = h('p', { class: 'composer-status', id: 'composer-status', role: 'status', 'aria-live': 'polite' }, 'Ready.');
  const prompt = h('textarea', { id: 'prompt', rows: 3, 'aria-describedby': 'prompt-help', placeholder: 'Ask something…' });
  const model = h('input', { id: 'model', value: 'auto', autocomplete: 'off', spellcheck: 'false' });
  const send = h('button', { type: 'submit', class: 'primary', id: 'send', 'data-write': '' }, 'Send');
  const stop = h('button', { type: 'button', id: 'stop', disabled: true }, 'Stop');
  const clear = h('button', { type: 'button', id: 'clear' }, 'New conversation');
  const promptError = h('p', { class: 'field-error', id: 'prompt-err', hidden: true });
  let controller = null;

  const bubble = (role, text) => {
    const body = h('div', { class: 'text' }, text);
    const li = h('li', { class: `msg msg-${role}` }, h('span', { class: 'who' }, role === 'user' ? 'You' : 'Assistant'), body);
    log.append(li);
    li.scrollIntoView({ block: 'end' });
    return { li, body };
  };

  function busy(on) {
    send.disabled = on || ctx.readOnly;
    stop.disabled = !on;
    prompt.readOnly = on;
  }

  async function run(ev) {
    ev.preventDefault();
    promptError.hidden = true;
    prompt.removeAttribute('aria-invalid');
    const text = prompt.value.trim();
    if (!text) {
      promptError.textContent = 'Write a message first.';
      promptError.hidden = false;
      prompt.setAttribute('aria-invalid', 'true');
      prompt.focus();
      return;
    }
    messages.push({ role: 'user', content: text });
    bubble('user', text);
    prompt.value = '';
    const answer = bubble('assistant', '');
    answer.li.setAttribute('aria-busy', 'true');
    answer.li.dataset.state = 'streaming';
    controller = new AbortController();
    busy(true);
    statusLine.textContent = 'Waiting for the gateway…';
    let got = '';
    let finished = false;
    const fail = (err) => {
      answer.li.classList.add('msg-error');
      answer.li.dataset.state = 'error';
      answer.li.dataset.code = err.code || '';
      answer.body.append(got ? '\n' : '', notice('error', plain(err)));
    };
    try {
      const res = await fetch(`${BASE}/run`, {
        method: 'POST',
        credentials: 'same-origin',
        cache: 'no-store',
        headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream' },
        body: JSON.stringify({ model: model.value.trim() || 'auto', messages, stream: true }),
        signal: controller.signal,
      });
      if (!res.ok) {
        const err = await errorOf(res);
        messages.pop();
        prompt.value = text;
        fail(err);
        // gc refused the run (before any upstream call), or the AI provider failed it: say which.
        statusLine.textContent = UPSTREAM_FAILED[err.code] || 'The run was refused.';
        return;
      }
      statusLine.textContent = 'Answering…';
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buf = '';
      const onEvent = (raw) => {
        let name = 'message';
        const data = [];
        for (const line of raw.split('\n')) {
          if (line.startsWith('event:')) name = line.slice(6).trim();
          else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
        }
        if (!data.length) return;
        const payload = data.join('\n');
        if (payload === '[DONE]') {
          finished = true;
          return;
        }
        let obj;
        try {
          obj = JSON.parse(payload);
        } catch (_) {
          return;
        }
        if (obj.error || name === 'error') {
          fail(obj.error || { code: 'upstream_error' });
          return;
        }
        const piece = obj.choices && obj.choices[0] && obj.choices[0].delta && obj.choices[0].delta.content;
        if (piece) {
          got += piece;
          answer.body.textContent = got;
          answer.li.dataset.pieces = String(Number(answer.li.dataset.pieces || 0) + 1);
        }
        if (obj.usage) answer.li.title = `${obj.usage.total_tokens} tokens`;
      };
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true }).replace(/\r\n/g, '\n');
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          onEvent(buf.slice(0, i));
          buf = buf.slice(i + 2);
        }
      }
      if (buf.trim()) onEvent(buf);
      if (answer.li.dataset.state === 'streaming') answer.li.dataset.state = finished ? 'done' : 'cut';
      statusLine.textContent = finished ? 'Done.' : 'The answer ended early.';
    } catch (e) {
      if (e && e.name === 'AbortError') {
        answer.li.dataset.state = 'stopped';
        answer.body.append(h('span', { class: 'stopped' }, got ? ' [stopped]' : '[stopped before any text arrived]'));
        statusLine.textContent = 'Stopped.';
      } else {
        fail({ code: 'network_error' });
        statusLine.textContent = 'The connection failed.';
      }
    } finally {
      answer.li.removeAttribute('aria-busy');
      if (got) messages.push({ role: 'assistant', content: got });
      controller = null;
      busy(false);
      if (!ctx.readOnly) prompt.focus();
    }
  }

  stop.addEventListener('click', () => controller && controller.abort());
  clear.addEventListener('click', () => {
    if (controller) controller.abort();
    messages.length = 0;
    log.replaceChildren();
    statusLine.textContent = 'Ready.';
    prompt.focus();
  });
  prompt.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      if (!send.disabled) formEl.requestSubmit();
    }
  });
  const formEl = h('form', { class: 'composer', novalidate: true, onsubmit: run },
    h('div', { class: 'field' }, h('label', { for: 'prompt' }, 'Message'), prompt, h('p', { class: 'help', id: 'prompt-help' }, 'Enter sends; Shift+Enter starts a new line.'), promptError),
    h('div', { class: 'composer-row' }, h('label', { for: 'model' }, 'Model'), model, send, stop, clear));
  const ai = ctx.ws && ctx.ws.ai_access ? ctx.ws.ai_access.status : null;
  fill(ctx.main, pageHead('Composer'),
    ai && ai !== 'ready' ? notice('warn', plain({ code: ai === 'disabled' ? 'ai_access_disabled' : 'ai_access_not_ready' })) : null,
    h('p', { class: 'sub' }, 'Runs go through your workspace region\'s gateway. The conversation is kept on this page only.'),
    log, statusLine, formEl);
  if (!ctx.readOnly) prompt.focus();
}
