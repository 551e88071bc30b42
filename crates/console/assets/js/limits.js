// Quotas as the console shows and edits them: a tenant's requests and tokens per minute, its
// monthly token budget and monthly spend limit (admins), and a key's own per-minute limits
// (members), which may not exceed the tenant's. An empty field is "no limit" (null on the wire).
// Money is a decimal string on the wire (`"25.00"`), never a float: sums are done in BigInt
// nano-units (decision 0038).

// The largest limit the API accepts (10^12).
export const MAX_LIMIT = 1e12;

const WORDS = {
  requests_per_minute: ['Requests per minute', 'requests/min'],
  tokens_per_minute: ['Tokens per minute', 'tokens/min'],
  monthly_tokens: ['Monthly token budget', 'tokens/month'],
  monthly_spend: ['Monthly spend limit', 'a month'],
};

const MONEY = /^\d{1,10}(\.\d{1,9})?$/;

// A tenant's limits, in the order they are shown; a key has the first two.
export const TENANT_LIMITS = Object.keys(WORDS);

export function limitLabel(name) {
  return WORDS[name][0];
}

// A form field for one limit. `ceiling` (the tenant's limit, for a key) caps it.
export function limitField(name, opts = {}) {
  const [label] = WORDS[name];
  const ceiling = opts.ceiling ?? null;
  if (name === 'monthly_spend') {
    return {
      name,
      label,
      type: 'text',
      inputmode: 'decimal',
      placeholder: opts.placeholder ?? 'no limit',
      help: opts.help ?? 'An amount in the deployment\'s currency, such as 25.00. Empty for no limit.',
      validate: (v) => (v && !MONEY.test(v) ? 'must be an amount such as 25.00' : null),
    };
  }
  return {
    name,
    label,
    type: 'number',
    min: 1,
    maxValue: MAX_LIMIT,
    inputmode: 'numeric',
    placeholder: opts.placeholder ?? 'no limit',
    help: opts.help ?? (ceiling === null ? 'Empty for no limit.' : `At most the workspace's ${count(ceiling)}. Empty: only the workspace's limit applies.`),
    validate: (v) => (ceiling !== null && v > ceiling ? `must be at most the workspace's limit (${count(ceiling)})` : null),
  };
}

// "1,000 requests/min", or "no limit".
export function limitText(name, v) {
  if (v === null || v === undefined) return 'no limit';
  return name === 'monthly_spend' ? `${v} ${WORDS[name][1]}` : `${count(v)} ${WORDS[name][1]}`;
}

export function count(n) {
  return Number(n).toLocaleString('en');
}

// The `limits` object of a PATCH or create body: every named field, an empty one as null.
export function limitsBody(values, names) {
  return Object.fromEntries(names.map((n) => [n, values[n] === '' ? null : values[n] ?? null]));
}

// A short line for a set of limits: "60 requests/min · no token limit".
export function limitsLine(limits, names) {
  const set = names.filter((n) => limits && limits[n] !== null && limits[n] !== undefined);
  return set.length ? set.map((n) => limitText(n, limits[n])).join(' · ') : 'no limits';
}

// A decimal amount ("0.019") as BigInt nano-units; null when it is not one.
export function nanos(s) {
  const m = /^(\d+)(?:\.(\d{1,9}))?$/.exec(String(s ?? ''));
  return m ? BigInt(m[1]) * 1000000000n + BigInt((m[2] || '').padEnd(9, '0')) : null;
}

// BigInt nano-units as a decimal amount: at least two decimals ("0.10", "0.019").
export function moneyText(n) {
  const whole = n / 1000000000n;
  const frac = (n % 1000000000n).toString().padStart(9, '0').replace(/0+$/, '');
  return `${whole}.${frac.padEnd(2, '0')}`;
}
