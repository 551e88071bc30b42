//! The upstream key as a type that cannot be logged by accident, and [`sanitize_upstream`]:
//! the one function every upstream-derived string goes through before it may reach a client,
//! an error, a report or a log.
//!
//! # What the sanitiser removes
//!
//! 1. **The known key, in any form** (keys of at least [`MIN_FORM_KEY_BYTES`] bytes; shorter
//!    "keys" are only removed verbatim, from 4 bytes, so ordinary words survive):
//!    - verbatim and in any ASCII letter case;
//!    - split: pieces of the key separated by whitespace, newlines, quotes, `+`, commas,
//!      `;`, `:`, `|`, brackets or JSON escapes (`"sk-ab" + "cd"`, `"sk-ab","cd"`, `sk-ab\ncd`);
//!    - hex (either case, optionally separated like above);
//!    - base64, standard and URL-safe, padded or not, at each of the 3 byte alignments, so the
//!      key is found inside a longer base64 string (e.g. `base64("Bearer " + key)`); the
//!      whole surrounding base64 run is removed, so no edge character leaks bits of the key.
//! 2. **Anything token-like** (see `redact_tokens`): a run of `[A-Za-z0-9_\-+/=.*]` that
//!    starts with a common key prefix (`sk-`, `sk_`, `pk-`, `rk-`, `ghp_`, `github_pat_`,
//!    `glpat-`, `xoxb-`, `hf_`, `AKIA`, `AIza`, `eyJ`, ...), the credential after `Bearer` /
//!    `Basic`, and runs of at least 20 characters with a random-looking part (mixed letter case
//!    and digits, hex, or high entropy). Model names (`gpt-4o-mini-2024-07-18`,
//!    `meta-llama/Llama-3.1-70B-Instruct`), URLs and error identifiers
//!    (`context_length_exceeded`) are kept.
//! 3. Control characters and runs of whitespace become one space; the result is trimmed and
//!    truncated to a number of characters (after redaction, so truncation can never leave half
//!    a key behind).
//!
//! Every removal is replaced by `[redacted]`.

/// The replacement of every removed secret or token.
pub(crate) const REDACTED: &str = "[redacted]";

/// Keys at least this long are also searched in every encoded and split form.
pub const MIN_FORM_KEY_BYTES: usize = 8;

/// Inputs longer than this are cut (before sanitising) to this many bytes.
const MAX_INPUT_BYTES: usize = 64 * 1024;

/// An upstream (provider) key in clear text: the domain's [`SecretString`], whose `Debug` and
/// `Display` print `[redacted]`; only [`Secret::expose`] gives the value, and this crate uses
/// it solely to build the `Authorization` header and to redact upstream messages.
///
/// [`SecretString`]: gc_domain::secret::SecretString
pub use gc_domain::secret::SecretString as Secret;

/// Cleans one upstream-derived string: removes the known key in every form, then anything
/// token-like, folds control characters and whitespace runs into one space, trims, and
/// truncates to `max_chars` characters (appending `…` when cut). See the module docs.
///
/// Inputs over 64 KiB are cut first; a piece of the key left at the cut is removed too.
pub fn sanitize_upstream(text: &str, secret: Option<&Secret>, max_chars: usize) -> String {
    let (text, cut) = if text.len() > MAX_INPUT_BYTES {
        let mut end = MAX_INPUT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        (&text[..end], true)
    } else {
        (text, false)
    };
    let known = match secret {
        Some(s) => redact_key(text, s.expose(), cut),
        None => text.to_owned(),
    };
    let tokens = redact_tokens(&known);
    let mut out = collapse_whitespace(&tokens);
    if let Some((idx, _)) = out.char_indices().nth(max_chars) {
        out.truncate(idx);
        out.push('…');
    }
    out
}

/// True when `haystack` contains `key` in any ASCII letter case (the cheap check for content
/// passed through verbatim). Keys shorter than 4 bytes never match.
pub(crate) fn contains_key(haystack: &[u8], key: &str) -> bool {
    let key = key.as_bytes();
    key.len() >= 4 && find_ci(haystack, key, 0).is_some()
}

/// Replaces every occurrence of `key` (any ASCII letter case) in `data` by `[redacted]`.
pub(crate) fn redact_verbatim(data: &[u8], key: &str) -> Vec<u8> {
    let key = key.as_bytes();
    let mut out = Vec::with_capacity(data.len());
    let mut from = 0;
    if key.len() >= 4 {
        while let Some(pos) = find_ci(data, key, from) {
            out.extend_from_slice(&data[from..pos]);
            out.extend_from_slice(REDACTED.as_bytes());
            from = pos + key.len();
        }
    }
    out.extend_from_slice(&data[from..]);
    out
}

fn find_ci(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    // This runs on every upstream body and streamed chunk: candidates are found by the first
    // byte in either case with memchr's vector search, then compared whole.
    let last = haystack.len() - needle.len();
    let (lower, upper) = (
        needle[0].to_ascii_lowercase(),
        needle[0].to_ascii_uppercase(),
    );
    let mut at = from;
    while at <= last {
        let i = at + memchr::memchr2(lower, upper, &haystack[at..=last])?;
        if haystack[i..i + needle.len()].eq_ignore_ascii_case(needle) {
            return Some(i);
        }
        at = i + 1;
    }
    None
}

// ---------------------------------------------------------------------------------------------
// The known key.

/// How a needle is searched.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Alphabet {
    /// The key itself or its hex: separators skipped, ASCII case folded.
    Folded,
    /// A base64 core: separators (not `+`, `/`, `=`) skipped, case kept.
    Base64,
}

/// Characters that may split the key (or its hex) into pieces: those that may split a base64
/// string, and `+` (string concatenation).
fn is_key_separator(b: u8) -> bool {
    b == b'+' || is_base64_separator(b)
}

/// Characters that may split a base64 string (never one of its own characters).
fn is_base64_separator(b: u8) -> bool {
    !b.is_ascii()
        || b.is_ascii_whitespace()
        || b.is_ascii_control()
        || matches!(
            b,
            b'"' | b'\''
                | b'`'
                | b','
                | b';'
                | b':'
                | b'|'
                | b'['
                | b']'
                | b'('
                | b')'
                | b'{'
                | b'}'
        )
}

fn is_base64_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_')
}

/// `text` without separators (and JSON escapes such as `\n`, `\"`), each kept byte with its
/// position in `text`. Folded alphabets are lower-cased.
fn normalize(text: &[u8], alphabet: Alphabet) -> (Vec<u8>, Vec<usize>) {
    let mut bytes = Vec::with_capacity(text.len());
    let mut pos = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        if b == b'\\' {
            match text.get(i + 1) {
                // `\/` is JSON's escaped `/`: keep the `/`.
                Some(b'/') => {
                    i += 1;
                    continue;
                }
                Some(b'n' | b'r' | b't' | b'"' | b'\'' | b'\\') => {
                    i += 2;
                    continue;
                }
                _ => {}
            }
        }
        let skip = match alphabet {
            Alphabet::Folded => is_key_separator(b),
            Alphabet::Base64 => is_base64_separator(b),
        };
        if !skip {
            bytes.push(match alphabet {
                Alphabet::Folded => b.to_ascii_lowercase(),
                Alphabet::Base64 => b,
            });
            pos.push(i);
        }
        i += 1;
    }
    (bytes, pos)
}

/// The needle as it appears in normalized text.
fn normalize_needle(needle: &[u8], alphabet: Alphabet) -> Vec<u8> {
    normalize(needle, alphabet).0
}

const B64_STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64_URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Base64 of `data` (standard or URL-safe alphabet, padded).
pub(crate) fn base64_encode(data: &[u8], url_safe: bool) -> String {
    let table = if url_safe { B64_URL } else { B64_STD };
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(char::from(table[((n >> (18 - 6 * k)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Lower-case hex of `data`.
pub(crate) fn hex_encode(data: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(data.len() * 2);
    for b in data {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 15)]));
    }
    out
}

/// The base64 characters that encode only bits of `key` when the key starts at byte
/// `offset` (0, 1 or 2) of a 3-byte group: independent of whatever surrounds the key.
fn base64_core(key: &[u8], offset: usize, url_safe: bool) -> String {
    let mut data = vec![0u8; offset];
    data.extend_from_slice(key);
    let encoded = base64_encode(&data, url_safe);
    let first = (8 * offset).div_ceil(6);
    let end = (8 * (offset + key.len())) / 6;
    encoded.get(first..end).unwrap_or("").to_owned()
}

/// Removes `key` from `text` in every form (module docs). `cut`: the text was cut, so a
/// beginning of a form at its very end is removed too.
fn redact_key(text: &str, key: &str, cut: bool) -> String {
    let key = key.as_bytes();
    if key.len() < 4 {
        return text.to_owned();
    }
    let bytes = text.as_bytes();
    // No form is shorter than the key without its separators (hex is twice the key, a base64
    // core at least the key's length, the key searched whole is the key): a text shorter than
    // that, and not cut, holds none. Model names end here, before the forms are built (issue
    // 14: building them was 5 % of a run).
    if !cut && bytes.len() < normalize_needle(key, Alphabet::Folded).len() {
        return text.to_owned();
    }
    // Byte ranges of `text` to replace.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    if key.len() < MIN_FORM_KEY_BYTES {
        let mut from = 0;
        while let Some(pos) = find_bytes(bytes, key, from) {
            spans.push((pos, pos + key.len()));
            from = pos + key.len();
        }
    } else {
        let folded = normalize(bytes, Alphabet::Folded);
        let mut needles = vec![
            normalize_needle(key, Alphabet::Folded),
            normalize_needle(hex_encode(key).as_bytes(), Alphabet::Folded),
        ];
        // A key made mostly of separators cannot be searched split.
        if needles[0].len() < MIN_FORM_KEY_BYTES {
            needles.remove(0);
            let mut from = 0;
            while let Some(pos) = find_ci(bytes, key, from) {
                spans.push((pos, pos + key.len()));
                from = pos + key.len();
            }
        }
        for needle in &needles {
            find_spans(&folded, needle, cut, false, bytes, &mut spans);
        }
        let raw = normalize(bytes, Alphabet::Base64);
        for url_safe in [false, true] {
            for offset in 0..3 {
                let core = base64_core(key, offset, url_safe);
                if core.len() >= MIN_FORM_KEY_BYTES {
                    find_spans(&raw, core.as_bytes(), cut, true, bytes, &mut spans);
                }
            }
        }
    }
    replace_spans(bytes, spans)
}

fn find_bytes(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    (from..=haystack.len() - needle.len()).find(|&i| &haystack[i..i + needle.len()] == needle)
}

/// Adds the spans (in `original` bytes) of every occurrence of `needle` in the normalized
/// text; with `cut`, also a beginning of the needle (3 bytes or more) at the very end.
/// `expand` widens each span over adjacent base64 characters.
fn find_spans(
    normalized: &(Vec<u8>, Vec<usize>),
    needle: &[u8],
    cut: bool,
    expand: bool,
    original: &[u8],
    spans: &mut Vec<(usize, usize)>,
) {
    let (hay, pos) = normalized;
    if needle.is_empty() {
        return;
    }
    let mut add = |start: usize, end: usize| {
        let (mut a, mut b) = (pos[start], pos[end - 1] + 1);
        if expand {
            while a > 0 && is_base64_char(original[a - 1]) {
                a -= 1;
            }
            while b < original.len() && is_base64_char(original[b]) {
                b += 1;
            }
        }
        spans.push((a, b));
    };
    let mut from = 0;
    while let Some(i) = find_bytes(hay, needle, from) {
        add(i, i + needle.len());
        from = i + 1;
    }
    if cut {
        let longest = needle.len().saturating_sub(1).min(hay.len());
        if let Some(k) = (3..=longest)
            .rev()
            .find(|&k| hay[hay.len() - k..] == needle[..k])
        {
            add(hay.len() - k, hay.len());
        }
    }
}

/// `text` with the spans (possibly overlapping or touching) replaced by one `[redacted]` each
/// group.
fn replace_spans(text: &[u8], mut spans: Vec<(usize, usize)>) -> String {
    if spans.is_empty() {
        return String::from_utf8_lossy(text).into_owned();
    }
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (a, b) in spans {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    let mut out = Vec::with_capacity(text.len());
    let mut at = 0;
    for (a, b) in merged {
        out.extend_from_slice(&text[at..a]);
        out.extend_from_slice(REDACTED.as_bytes());
        at = b;
    }
    out.extend_from_slice(&text[at..]);
    String::from_utf8_lossy(&out).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Generic tokens.

/// Characters of a token run.
fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '/' | '=' | '.' | '*')
}

/// Prefixes that mark a credential whatever follows (ASCII case-insensitive).
const KEY_PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "pk-",
    "pk_",
    "rk-",
    "rk_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxs-",
    "xapp-",
    "hf_",
];

/// Prefixes that mark a credential when the run is at least 16 characters (case-sensitive).
const CASED_PREFIXES: &[&str] = &["AKIA", "ASIA", "AIza", "eyJ"];

/// Words after which the next run is a credential (unless it is a plain word: "bearer token").
const AUTH_SCHEMES: &[&str] = &["bearer", "basic"];

/// Replaces token-like runs (module docs) by `[redacted]`.
pub(crate) fn redact_tokens(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // The previous run was an auth scheme (`Bearer`), followed only by spaces so far.
    let mut after_scheme = false;
    while !rest.is_empty() {
        let start = rest.find(is_token_char).unwrap_or(rest.len());
        let gap = &rest[..start];
        if !gap.is_empty() {
            if !gap.chars().all(|c| c == ' ' || c == '\t') {
                after_scheme = false;
            }
            out.push_str(gap);
        }
        rest = &rest[start..];
        if rest.is_empty() {
            break;
        }
        let end = rest.find(|c| !is_token_char(c)).unwrap_or(rest.len());
        let run = &rest[..end];
        rest = &rest[end..];
        if (after_scheme && !is_word(run)) || is_token_run(run) {
            out.push_str(REDACTED);
            after_scheme = false;
        } else {
            out.push_str(run);
            after_scheme = AUTH_SCHEMES.iter().any(|s| run.eq_ignore_ascii_case(s));
        }
    }
    out
}

/// A plain word: letters only, upper case at most first.
fn is_word(run: &str) -> bool {
    let mut chars = run.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && chars.all(|c| c.is_ascii_lowercase())
}

/// True for a run (of token characters) that looks like a credential.
fn is_token_run(run: &str) -> bool {
    let lower_prefix = |p: &str| {
        run.len() > p.len() + 1
            && run
                .get(..p.len())
                .is_some_and(|h| h.eq_ignore_ascii_case(p))
    };
    if KEY_PREFIXES.iter().any(|p| lower_prefix(p)) {
        return true;
    }
    if run.len() >= 16 && CASED_PREFIXES.iter().any(|p| run.starts_with(p)) {
        return true;
    }
    // `token=...`, `key=...`, `secret=...` assignments.
    if let Some((name, value)) = run.split_once('=') {
        let name = name.to_ascii_lowercase();
        if value.len() >= 8
            && [
                "token",
                "key",
                "api_key",
                "apikey",
                "secret",
                "password",
                "access_token",
            ]
            .contains(&name.as_str())
        {
            return true;
        }
    }
    let alnum = run.bytes().filter(u8::is_ascii_alphanumeric).count();
    if alnum < 16 || run.len() < 20 {
        // A lone segment of 16 to 19 characters is judged as a segment below only when the
        // run is long enough; short runs are words, numbers, versions.
        return false;
    }
    if run.split(['-', '_', '.', '*']).any(is_random_segment) {
        return true;
    }
    // The whole run: frequent switches between lower case, upper case and digits.
    let stats = Stats::of(run);
    stats.classes() == 3 && stats.transitions * 2 >= stats.alnum
}

/// Letter-case and digit counts of a string.
struct Stats {
    lower: usize,
    upper: usize,
    digits: usize,
    alnum: usize,
    /// Changes of class (lower / upper / digit) between consecutive alphanumeric characters.
    transitions: usize,
    hex_only: bool,
}

impl Stats {
    fn of(s: &str) -> Self {
        let mut st = Stats {
            lower: 0,
            upper: 0,
            digits: 0,
            alnum: 0,
            transitions: 0,
            hex_only: true,
        };
        let mut prev = None;
        for b in s.bytes() {
            let class = if b.is_ascii_lowercase() {
                st.lower += 1;
                0
            } else if b.is_ascii_uppercase() {
                st.upper += 1;
                1
            } else if b.is_ascii_digit() {
                st.digits += 1;
                2
            } else {
                continue;
            };
            st.alnum += 1;
            st.hex_only &= b.is_ascii_hexdigit();
            if prev.is_some_and(|p| p != class) {
                st.transitions += 1;
            }
            prev = Some(class);
        }
        st
    }

    fn classes(&self) -> usize {
        usize::from(self.lower > 0) + usize::from(self.upper > 0) + usize::from(self.digits > 0)
    }
}

/// True for a segment (no `-`, `_`, `.`) that looks random: 16+ alphanumerics mixing
/// classes, hex, or high entropy.
fn is_random_segment(segment: &str) -> bool {
    let st = Stats::of(segment);
    let n = st.alnum;
    if n < 16 {
        return false;
    }
    let letters = st.lower + st.upper;
    // Hex (hashes, hex-encoded secrets).
    if st.hex_only && st.digits >= 2 && letters >= 2 {
        return true;
    }
    // All three classes (base62 / base64 material).
    if st.classes() == 3 && st.digits >= 2 && st.upper * 8 >= n {
        return true;
    }
    // Random-case letters (camel case has far fewer upper-case letters).
    if st.upper * 4 >= n && st.lower * 4 >= n {
        return true;
    }
    // Letters and many digits.
    if letters >= 3 && st.digits >= 3 && st.digits * 6 >= n {
        return true;
    }
    n >= 24 && entropy(segment) >= 4.0
}

/// Shannon entropy of the bytes of `s`, in bits per byte.
fn entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[usize::from(b)] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|c| {
            let p = f64::from(*c) / n;
            -p * p.log2()
        })
        .sum()
}

/// Control characters and whitespace runs become one space; trimmed.
fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            space = true;
        } else {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-test-0123456789abcdef";

    fn clean(text: &str) -> String {
        sanitize_upstream(text, Some(&Secret::new(KEY)), 10_000)
    }

    /// The key, in every form this module promises to remove, is absent from `text`.
    fn assert_no_key(text: &str, key: &str) {
        let lower = text.to_ascii_lowercase();
        assert!(
            !lower.contains(&key.to_ascii_lowercase()),
            "verbatim: {text}"
        );
        assert!(!lower.contains(&hex_encode(key.as_bytes())), "hex: {text}");
        let squeezed: String = lower
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        assert!(
            !squeezed.contains(&key.to_ascii_lowercase()),
            "split: {text}"
        );
        for url in [false, true] {
            for offset in 0..3 {
                let core = base64_core(key.as_bytes(), offset, url);
                assert!(!text.contains(&core), "base64 {offset} {url}: {text}");
            }
        }
    }

    #[test]
    fn debug_and_display_are_redacted() {
        let s = Secret::new("sk-very-secret-value");
        assert_eq!(format!("{s:?}"), "SecretString([redacted])");
        assert_eq!(format!("{s}"), "[redacted]");
        assert_eq!(s.expose(), "sk-very-secret-value");
    }

    #[test]
    fn encoders_match_the_standard() {
        // Reference values from Python's base64 and bytes.hex().
        assert_eq!(
            base64_encode(b"sk-test-0123456789abcdef!", false),
            "c2stdGVzdC0wMTIzNDU2Nzg5YWJjZGVmIQ=="
        );
        assert_eq!(
            base64_encode(b"ask-test-0123456789abcdef", true),
            "YXNrLXRlc3QtMDEyMzQ1Njc4OWFiY2RlZg=="
        );
        assert_eq!(base64_encode(b"\xfb\xff\xbf", false), "+/+/");
        assert_eq!(base64_encode(b"\xfb\xff\xbf", true), "-_-_");
        assert_eq!(base64_encode(b"", false), "");
        assert_eq!(hex_encode(b"sk-\x00\xff"), "736b2d00ff");
    }

    #[test]
    fn the_key_verbatim_and_in_any_case_is_removed() {
        assert_eq!(
            clean(&format!("bad key {KEY} given")),
            "bad key [redacted] given"
        );
        assert_eq!(
            clean(&format!("bad key {} given", KEY.to_uppercase())),
            "bad key [redacted] given"
        );
        assert_eq!(
            clean("bad key Sk-TeSt-0123456789AbCdEf!"),
            "bad key [redacted]!"
        );
        assert_eq!(clean(&format!("{KEY}{KEY}")), "[redacted]");
        assert_eq!(clean(&format!("x{KEY}y")), "x[redacted]y");
    }

    #[test]
    fn the_key_split_into_pieces_is_removed() {
        for text in [
            "key: sk-test-012 3456789abcdef end",
            "key: \"sk-test-01\" + \"23456789abcdef\" end",
            "key: \"sk-test-01\",\"23456789\",\"abcdef\" end",
            "key: sk-test-0123\n456789\r\nabcdef end",
            "key: sk-test-0123\\n456789abcdef end",
            "key: 'SK-TEST-0123' + '456789ABCDEF' end",
            "key: [\"sk-\", \"test-\", \"0123456789\", \"abc\", \"def\"] end",
            "key: s k - t e s t - 0 1 2 3 4 5 6 7 8 9 a b c d e f end",
        ] {
            let out = clean(text);
            assert!(out.starts_with("key: "), "{text:?} -> {out:?}");
            assert!(out.contains("[redacted]"), "{text:?} -> {out:?}");
            assert!(
                out.len() <= "key: [\"[redacted]\"] end".len(),
                "{text:?} -> {out:?}"
            );
            assert!(out.ends_with(" end"), "{text:?} -> {out:?}");
            assert_no_key(&out, KEY);
        }
    }

    #[test]
    fn a_text_as_short_as_the_key_without_separators_is_still_searched() {
        // `+` separates pieces of the key: the key without it is one byte shorter than the
        // key, and a text of exactly that length is the key, split.
        let key = "sk-test+0123456789abcdef";
        let joined = key.replace('+', "");
        assert_eq!(redact_key(&joined, key, false), "[redacted]");
        assert_eq!(
            sanitize_upstream(&joined, Some(&Secret::new(key)), 100),
            "[redacted]"
        );
        // One byte shorter cannot hold it (the token rules still apply to it after).
        let shorter = &joined[..joined.len() - 1];
        assert_eq!(redact_key(shorter, key, false), shorter);
        // A cut one is still searched for the key's beginning at its end.
        assert_eq!(redact_key(&joined[..10], key, true), "[redacted]");
    }

    #[test]
    fn the_key_in_hex_is_removed() {
        let hex = hex_encode(KEY.as_bytes());
        for text in [
            format!("h={hex};"),
            format!("h={}", hex.to_uppercase()),
            format!("h=00{hex}ff"),
            format!("h={} {}", &hex[..20], &hex[20..]),
        ] {
            let out = clean(&text);
            assert_no_key(&out, KEY);
            assert!(out.starts_with("h="), "{out}");
        }
    }

    #[test]
    fn the_key_in_base64_is_removed_at_every_alignment() {
        for prefix in ["", "a", "ab", "Bearer ", "{\"api_key\":\""] {
            for suffix in ["", "!", "?>", "\"}"] {
                let data = format!("{prefix}{KEY}{suffix}");
                for url in [false, true] {
                    let padded = base64_encode(data.as_bytes(), url);
                    let unpadded = padded.trim_end_matches('=').to_owned();
                    let mid = padded.len() / 2;
                    let wrapped = format!("{}\n{}", &padded[..mid], &padded[mid..]);
                    for encoded in [padded, unpadded, wrapped] {
                        let out = clean(&format!("blob <{encoded}> end"));
                        assert_eq!(out, "blob <[redacted]> end", "{data:?} {url} {encoded:?}");
                    }
                }
            }
        }
        // Without a separator-free neighbour: the base64 run goes entirely.
        let b64 = base64_encode(format!("xx{KEY}").as_bytes(), false);
        assert_eq!(clean(&format!("a {b64} b")), "a [redacted] b");
    }

    #[test]
    fn base64_with_plus_and_slash_is_found() {
        // This key's base64 contains `+` and `/` (standard) or `-` and `_` (URL-safe).
        let key = "k~~~??>>>~~~??>>>abc";
        let s = Secret::new(key);
        for offset in ["", "a", "ab"] {
            for url in [false, true] {
                let enc = base64_encode(format!("{offset}{key}").as_bytes(), url);
                assert!(
                    enc.contains(if url { '-' } else { '+' })
                        || enc.contains(if url { '_' } else { '/' })
                );
                let out = sanitize_upstream(&format!("x {enc} y"), Some(&s), 1000);
                assert_eq!(out, "x [redacted] y", "{enc}");
            }
        }
    }

    #[test]
    fn a_cut_input_does_not_keep_the_start_of_the_key() {
        // No key prefix: only the cut handling can catch it.
        let key = "Zq8test0123456789abcdef";
        let mut text = " ".repeat(MAX_INPUT_BYTES - 9);
        text.push_str(key);
        let out = sanitize_upstream(&text, Some(&Secret::new(key)), 1000);
        assert_eq!(out, "[redacted]");
        // Split across the cut, with a separator.
        let mut text = "x".repeat(MAX_INPUT_BYTES - 12);
        text.push_str(" Zq8t est0123456789abcdef");
        let out = sanitize_upstream(&text, Some(&Secret::new(key)), 100_000);
        assert!(out.ends_with(" [redacted]"), "{}", &out[out.len() - 20..]);
    }

    #[test]
    fn short_keys_are_only_removed_verbatim() {
        let s = Secret::new("abcde");
        assert_eq!(
            sanitize_upstream("x abcde ABCDE y", Some(&s), 100),
            "x [redacted] ABCDE y"
        );
        let tiny = Secret::new("ab");
        assert_eq!(sanitize_upstream("about", Some(&tiny), 100), "about");
    }

    #[test]
    fn tokens_are_removed_without_the_key() {
        for (input, expected) in [
            (
                "Incorrect API key provided: sk-proj-********************abcd.",
                "Incorrect API key provided: [redacted]",
            ),
            ("key sk-abcdef", "key [redacted]"),
            (
                "Authorization: Bearer abc.def.ghi",
                "Authorization: Bearer [redacted]",
            ),
            (
                "header Basic dXNlcjpwYXNzd29yZA==",
                "header Basic [redacted]",
            ),
            (
                "token ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345 leaked",
                "token [redacted] leaked",
            ),
            (
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
                "jwt [redacted]",
            ),
            ("aws AKIAIOSFODNN7EXAMPLE", "aws [redacted]"),
            (
                "random aB3dE6gH9jK2mN5pQ8sT1vW4 here",
                "random [redacted] here",
            ),
            (
                "letters QwErTyUiOpAsDfGhJkLzXc here",
                "letters [redacted] here",
            ),
            (
                "hex 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",
                "hex [redacted]",
            ),
            ("b64 c2stdGVzdC0wMTIzNDU2Nzg5YWJjZGVm", "b64 [redacted]"),
            ("digits abc123def456ghi789jkl0 x", "digits [redacted] x"),
            ("entropy qwkdjfhzmxncbvpalsoeirut x", "entropy [redacted] x"),
            ("query ?token=abcdefgh12", "query ?[redacted]"),
            (
                "request id req_8f3a9c2e7b1d4f6a0e5c",
                "request id [redacted]",
            ),
        ] {
            assert_eq!(sanitize_upstream(input, None, 1000), expected, "{input}");
        }
    }

    #[test]
    fn ordinary_text_is_kept() {
        for text in [
            "The model `gpt-4o-mini-2024-07-18` does not exist or you do not have access to it.",
            "model meta-llama/Llama-3.1-70B-Instruct and Qwen2.5-VL-72B-Instruct",
            "See https://platform.openai.com/docs/guides/error-codes/api-errors for details.",
            "context_length_exceeded: maximum context length is 128000 tokens",
            "ContextLengthExceededError InsufficientQuotaErrorHere",
            "internationalization pneumonoultramicroscopicsilicovolcanoconiosis",
            "Rate limit reached for gpt-4 in organization on tokens per min (TPM): Limit 10000, Used 9000.",
            "id 123e4567-e89b-12d3-a456-426614174000 at 2024-07-18T10:11:12Z",
            "invalid_request_error insufficient_quota rate_limit_exceeded",
            "risk-free task-id desk_lamp sk- alone",
            "path /v1/chat/completions version 1.2.3",
        ] {
            assert_eq!(sanitize_upstream(text, None, 1000), text, "{text}");
        }
    }

    #[test]
    fn whitespace_is_folded_and_text_truncated_after_redaction() {
        assert_eq!(sanitize_upstream("  a\n\tb\u{0}c  ", None, 100), "a b c");
        let s = Secret::new("sk-abcdefgh");
        let text = "bad key sk-abcdefgh given";
        assert_eq!(
            sanitize_upstream(text, Some(&s), 100),
            "bad key [redacted] given"
        );
        let t = sanitize_upstream(text, Some(&s), 12);
        assert!(!t.contains("sk-abc"), "{t}");
        assert_eq!(sanitize_upstream("héllo wörld", None, 4), "héll…");
    }

    #[test]
    fn verbatim_helpers() {
        assert!(contains_key(b"..SK-TEST-0123456789ABCDEF..", KEY));
        assert!(!contains_key(b"sk-test-0123456789abcde", KEY));
        assert!(!contains_key(b"abc", "ab"));
        assert_eq!(
            redact_verbatim(format!("a{KEY}b{}c", KEY.to_uppercase()).as_bytes(), KEY),
            b"a[redacted]b[redacted]c".to_vec()
        );
        assert_eq!(redact_verbatim(b"plain", KEY), b"plain".to_vec());
    }

    #[test]
    fn the_case_blind_search_finds_every_place_and_nothing_else() {
        // At the very start and the very end, in either case of the first letter.
        assert_eq!(find_ci(b"Abcd", b"abcd", 0), Some(0));
        assert_eq!(find_ci(b"xxABCD", b"abcd", 0), Some(2));
        assert_eq!(find_ci(b"xxabc", b"abcd", 0), None);
        // A first byte that is no letter; candidates that fail before the real one.
        assert_eq!(find_ci(b"-a--ab-abc-abcd", b"-abcd", 0), Some(10));
        assert_eq!(find_ci(b"aaab", b"aab", 0), Some(1));
        // From an offset, and past the last place the needle fits.
        assert_eq!(find_ci(b"abcd abcd", b"ABCD", 1), Some(5));
        assert_eq!(find_ci(b"abcd abcd", b"abcd", 6), None);
        assert_eq!(find_ci(b"abcd", b"abcd", 9), None);
        assert_eq!(find_ci(b"ab", b"abcd", 0), None);
        assert_eq!(find_ci(b"abcd", b"", 0), None);
        // Every occurrence, overlapping candidates included, against the plain definition.
        let hay = b"sK-a sk-ab SK-AB sk-aB sk-a";
        let naive: Vec<usize> = (0..=hay.len() - 5)
            .filter(|&i| hay[i..i + 5].eq_ignore_ascii_case(b"sk-ab"))
            .collect();
        let mut found = Vec::new();
        let mut from = 0;
        while let Some(i) = find_ci(hay, b"sk-ab", from) {
            found.push(i);
            from = i + 1;
        }
        assert_eq!(found, naive);
        assert_eq!(found, vec![5, 11, 17]);
    }
}
