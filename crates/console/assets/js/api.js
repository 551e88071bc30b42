// The console's only door to the server: fetch on /api/v1 with the session cookie.
//
// The cookie is HttpOnly and the browser sends it ('same-origin'); the browser also sends the
// Origin header the API checks on writes. No token, key or secret is ever stored by the console
// (no localStorage, no sessionStorage, nothing in URLs).

export const BASE = '/api/v1';

// A refusal or failure, with the API's stable code.
export class ApiError extends Error {
  constructor(status, code, message, extra = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfter = extra.retryAfter ?? null;
    this.requestId = extra.requestId ?? null;
  }
}

// Calls the API. Returns {status, data, etag, headers}; throws ApiError for status >= 400 and
// for network failures (code 'network_error'). `credentials: 'omit'` makes an anonymous call.
export async function api(method, path, opts = {}) {
  const headers = { Accept: 'application/json' };
  const init = { method, headers, credentials: opts.credentials ?? 'same-origin', cache: 'no-store' };
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(opts.body);
  }
  if (opts.ifMatch !== undefined && opts.ifMatch !== null) headers['If-Match'] = `"${opts.ifMatch}"`;
  if (opts.signal) init.signal = opts.signal;
  let res;
  try {
    res = await fetch(BASE + path, init);
  } catch (e) {
    if (e && e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network_error', 'The server could not be reached. Check your connection and try again.');
  }
  if (opts.raw && res.ok) return res;
  if (res.status >= 400) throw await errorOf(res);
  const type = res.headers.get('content-type') || '';
  const data = res.status === 204 ? null : type.includes('json') ? await res.json() : await res.text();
  return { status: res.status, data, etag: unquote(res.headers.get('etag')), headers: res.headers };
}

// The ApiError a failed response stands for.
export async function errorOf(res) {
  let body = null;
  try {
    body = await res.json();
  } catch (_) {
    body = null;
  }
  const err = (body && body.error) || {};
  const retry = Number.parseInt(res.headers.get('retry-after') || '', 10);
  return new ApiError(res.status, err.code || `http_${res.status}`, err.message || `The server answered ${res.status}.`, {
    retryAfter: Number.isFinite(retry) ? retry : null,
    requestId: err.request_id || res.headers.get('x-request-id'),
  });
}

function unquote(etag) {
  if (!etag) return null;
  const m = /^"?(\d+)"?$/.exec(etag.replace(/^W\//, ''));
  return m ? Number(m[1]) : null;
}

export const get = (path, opts) => api('GET', path, opts);
export const post = (path, body, opts = {}) => api('POST', path, { ...opts, body });
export const patch = (path, body, opts = {}) => api('PATCH', path, { ...opts, body });
export const del = (path, opts) => api('DELETE', path, opts);

// Adds query parameters, skipping empty ones.
export function withQuery(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}
