// Plain words for the API's error codes. The API decides; this only explains.
// Every code of the domain's table (gc_domain::ErrorCode) has its words here, and this file
// names no code the API does not have but the console's own `network_error`: checked by
// tests/tests/console_messages.rs.

const PLAIN = {
  bad_request: 'The server could not understand this request. Reload the page and try again.',
  invalid_json: 'The server could not read what was sent. Reload the page and try again.',
  invalid_body: 'The server could not read what was sent. Reload the page and try again.',
  invalid_query: 'The server could not understand the options of this request.',
  invalid_cursor: 'This list moved on since it was loaded. Reload it from the first page.',
  invalid_if_match: 'The version sent with this change is not valid. Reload and try again.',
  unauthenticated: 'You are signed out. Sign in to continue.',
  invalid_credentials: 'That email and password do not match an account.',
  invalid_api_key: 'That API key is not valid any more.',
  forbidden: 'You are not allowed to do this.',
  member_unassigned:
    'Your account is not part of a workspace yet. An administrator has to add you to a tenant before you can use workspace data or AI runs.',
  member_suspended: 'Your account is suspended. Ask an administrator to reactivate it.',
  tenant_suspended: "Your organisation's workspace is suspended. Ask an administrator to reactivate the tenant.",
  insufficient_scope: 'This key does not have the scope this needs.',
  shadow_read_only: 'The Shadow support view is read-only: nothing can be changed from it.',
  origin_mismatch:
    "The server refused the request because it came from another address than the service's own. Open the console at the service's public address.",
  admin_required: 'Only platform administrators can do this.',
  session_required: 'This needs a signed-in session.',
  signup_disabled: 'Sign-up is closed on this service. Ask an administrator for an account.',
  ai_access_disabled: 'AI is switched off for your workspace. An administrator can turn it on for your tenant.',
  ai_access_not_ready:
    "AI access is not ready: your workspace has no working AI key for its region yet (or the region's gateway is not configured). An administrator can add one.",
  model_not_allowed: 'That model is not allowed for your workspace. Pick one from the list (or "auto"), or ask an administrator.',
  not_found: 'It is not there any more (or never was).',
  method_not_allowed: 'That action is not allowed here.',
  not_acceptable: 'The server cannot answer in the form the console asked for. Reload the page.',
  request_timeout: 'The request took too long to reach the server. Check your connection and try again.',
  email_taken: 'An account with this email already exists.',
  version_conflict: 'Someone changed this since you opened it.',
  payload_too_large: 'That is too large to send (the limit is 1 MiB).',
  unsupported_media_type: 'The server did not accept the format of what was sent. Reload the page and try again.',
  validation_failed: 'Some of what was entered is not valid.',
  unknown_field: 'The request named a field this kind of item does not have.',
  unsupported_mode: 'That kind of scan is not supported: the Guard scans skills.',
  invalid_target:
    'That cannot be scanned: paste the content, or give the address of a public GitHub repository (https://github.com/OWNER/REPO).',
  too_many_attempts: 'Too many failed attempts for this account.',
  rate_limited: 'Too many requests.',
  budget_exhausted: "Your workspace has used this month's AI budget.",
  upstream_rate_limited: 'The AI provider is throttling requests.',
  headers_too_large:
    "The request's headers were too large. Signing out and in again (or clearing this site's cookies) usually fixes it.",
  internal_error: 'Something went wrong on the server. Try again; if it keeps happening, tell an administrator.',
  upstream_rejected: 'The AI provider refused this request.',
  upstream_error: 'The AI provider failed to answer. Try again in a moment.',
  upstream_timeout: 'The AI provider took too long to answer.',
  service_unavailable: 'The service is busy.',
  busy: 'The service is busy.',
  scanner_busy: 'The scanner is busy.',
  target_not_allowed:
    'Only pasted content or the exact address of a public GitHub repository (https://github.com/OWNER/REPO) can be scanned.',
  archive_not_accepted: 'ZIP archives are not accepted: paste the text, or give the repository address.',
  repository_not_found: 'That repository does not exist or is not public.',
  redirect_not_followed: 'The code host answered with a redirect, which is never followed.',
  repository_too_large: 'That repository is over the scan limits.',
  provider_not_allowed: 'A run cannot choose its provider: it always goes through your workspace gateway.',
  network_error: 'The server could not be reached. Check your connection and try again.',
};

// Codes whose server message names the field or parameter at fault: shown as the server
// wrote it (the words above only when it sent none).
const OWN_WORDS = ['validation_failed', 'unknown_field', 'invalid_query'];

// Codes that pass with time: "try again shortly" when the server gave no wait.
const WAIT_CODES = ['rate_limited', 'too_many_attempts', 'upstream_rate_limited', 'busy', 'scanner_busy', 'service_unavailable'];

// A sentence for an ApiError (or any error), with the wait time when the server gave one.
export function plain(err) {
  if (!err) return '';
  let text = (OWN_WORDS.includes(err.code) && err.message) || PLAIN[err.code] || err.message || 'Something went wrong.';
  if (err.retryAfter) text += ` Try again in ${waitWords(err.retryAfter)}.`;
  else if (WAIT_CODES.includes(err.code)) text += ' Try again shortly.';
  return text;
}

function waitWords(secs) {
  if (secs < 90) return `${secs} second${secs === 1 ? '' : 's'}`;
  const m = Math.ceil(secs / 60);
  return `${m} minute${m === 1 ? '' : 's'}`;
}

// Codes that mean "this member cannot use the workspace at all".
export const ACCESS_CODES = ['member_unassigned', 'member_suspended', 'tenant_suspended'];
