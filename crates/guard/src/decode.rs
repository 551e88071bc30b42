//! Decode and rescan: long base64, hex, `\xNN`, percent-encoded and (when the file talks about
//! it) ROT13 or reversed runs are decoded and the result is scanned again with every rule.
//!
//! Bounds: at most [`MAX_CANDIDATES`] runs per text, [`MAX_DECODED`] bytes per run and
//! [`MAX_DEPTH`] levels of nesting (base64 inside hex inside base64 ...). A decoded run is
//! reported when it holds a command payload, when the rescan finds something of medium or
//! higher, or when it starts with an executable or archive magic number.

use crate::checks::{make_visible, truncate_chars};
use crate::model::Severity;
use crate::scanner::{Hit, Scanner};
use base64::Engine;

/// Decoded runs inspected per text, at most.
const MAX_CANDIDATES: usize = 64;
/// Bytes of one decoded run, at most.
const MAX_DECODED: usize = 64 * 1024;
/// Nesting depth of decode-and-rescan.
pub(crate) const MAX_DEPTH: u8 = 2;
/// A base64 run must be at least this long (shorter ones are identifiers and hashes).
const MIN_BASE64: usize = 32;
/// A plain hex run must be at least this long.
const MIN_HEX: usize = 32;

use crate::scanner::{
    AUX_BASE64 as GATE_BASE64, AUX_REVERSE as GATE_REVERSE, AUX_ROT13 as GATE_ROT13,
};

/// Words that allow shorter base64 runs.
pub(crate) const GATE_BASE64_WORDS: &[&[&str]] = &[&["base64", "b64", "atob"]];
/// Words that turn on ROT13 decoding of string literals.
pub(crate) const GATE_ROT13_WORDS: &[&[&str]] =
    &[&["rot13", "rot_13", "rot-13", "maketrans", "caesar"]];
/// Words that turn on reversing string literals.
pub(crate) const GATE_REVERSE_WORDS: &[&[&str]] = &[&[
    "[::-1]",
    ".reverse()",
    "| rev",
    "|rev",
    "strreverse",
    "reverse(",
]];

/// Words that make a decoded string a command or code payload.
const PAYLOAD_WORDS: &[&str] = &[
    "curl ",
    "wget ",
    "/bin/sh",
    "/bin/bash",
    "bash -",
    "sh -c",
    "| sh",
    "|sh",
    "| bash",
    "|bash",
    "import os",
    "os.system",
    "subprocess",
    "exec(",
    "eval(",
    "powershell",
    "/dev/tcp",
    "nc -e",
    "chmod +x",
    "invoke-expression",
    "iex(",
    "child_process",
    "rm -rf",
    "socket.",
    "__import__",
    "downloadstring",
];

pub(crate) fn looks_like_payload(decoded: &str) -> bool {
    let lower = decoded.to_ascii_lowercase();
    PAYLOAD_WORDS.iter().any(|w| lower.contains(w))
}

pub(crate) fn mostly_printable(bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return false;
    }
    let printable = bytes
        .iter()
        .filter(|&&b| b == b'\n' || b == b'\r' || b == b'\t' || (0x20..0x7f).contains(&b))
        .count();
    printable * 10 >= bytes.len() * 9
}

/// The kind of executable or archive that `bytes` starts with.
pub(crate) fn magic_kind(bytes: &[u8]) -> Option<&'static str> {
    let starts = |m: &[u8]| bytes.starts_with(m);
    if let Some(kind) = crate::scanner::executable_kind(bytes) {
        return Some(kind);
    }
    if starts(b"MZ") && bytes.len() >= 4 && (bytes[2] == 0x90 || bytes[2] == 0x50) {
        return Some("PE (Windows)");
    }
    [
        (&b"PK\x03\x04"[..], "ZIP archive"),
        (b"\x1f\x8b\x08", "gzip archive"),
        (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
        (b"Rar!\x1a\x07", "RAR archive"),
        (b"\xfd7zXZ\x00", "xz archive"),
        (b"BZh", "bzip2 archive"),
        (b"\xca\xfe\xba\xbe", "Java class or universal Mach-O"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "OLE/MSI container"),
        (b"\x00asm", "WebAssembly module"),
    ]
    .iter()
    .find(|(m, _)| starts(m) && (m != b"BZh" || bytes.get(3).is_some_and(u8::is_ascii_digit)))
    .map(|(_, k)| *k)
}

/// What a decoded run turned out to be.
enum Verdict {
    /// Nothing worth reporting.
    Nothing,
    /// A finding: severity and message.
    Report(Severity, String),
    /// An executable or archive: message.
    Binary(String),
}

/// Runs decode-and-rescan over `text`.
pub(crate) fn run(scanner: &Scanner, text: &str, mentions: u8, depth: u8, hits: &mut Vec<Hit>) {
    if depth >= MAX_DEPTH {
        return;
    }
    let mut budget = MAX_CANDIDATES;
    let bytes = text.as_bytes();
    // Where the text itself talks about base64, shorter runs are worth decoding.
    let min_base64 = if mentions & GATE_BASE64 != 0 {
        20
    } else {
        MIN_BASE64
    };
    let mut emit = |id: &str, start: usize, end: usize, v: Verdict| {
        let (id, v) = match v {
            Verdict::Binary(m) => ("obf.embedded-binary", Verdict::Report(Severity::High, m)),
            v => (id, v),
        };
        if let Verdict::Report(severity, message) = v {
            if let Some(rule) = scanner.rule_index(id) {
                hits.push(Hit {
                    rule,
                    start,
                    end,
                    severity,
                    message: Some(message),
                    redact: None,
                });
            }
        }
    };

    // Base64 and plain hex runs of 20 or more characters. Every such run covers a multiple
    // of 20, so only those positions are probed and expanded: short words cost almost nothing.
    for (start, end) in long_runs(bytes) {
        if budget == 0 {
            break;
        }
        let mut padded = end;
        while padded < bytes.len() && padded < end + 2 && bytes[padded] == b'=' {
            padded += 1;
        }
        let run = &bytes[start..end];
        if run.len() < MIN_HEX.min(min_base64) {
            continue;
        }
        // A data: URI of an image or font is content, not a payload.
        let before = text.get(start.saturating_sub(40)..start).unwrap_or("");
        if before.contains("data:image/") || before.contains("data:font/") {
            continue;
        }
        if run.len() >= MIN_HEX && run.len() % 2 == 0 && run.iter().all(u8::is_ascii_hexdigit) {
            budget -= 1;
            let decoded = hex_decode(run);
            let v = inspect(scanner, &decoded, depth, "Hex run");
            emit("obf.encoded-payload", start, end, v);
            continue;
        }
        if run.len() >= min_base64 && varied(run) {
            budget -= 1;
            let Some(decoded) = base64_decode(run) else {
                continue;
            };
            let v = inspect(scanner, &decoded, depth, "Base64 run");
            emit("obf.base64-shell-payload", start, padded, v);
        }
    }

    // `\xNN` escapes and percent-encoding.
    for (marker, label) in [("\\x", "Hex escapes"), ("%", "Percent-encoded run")] {
        let mut from = 0;
        while budget > 0 {
            let Some(at) = bytes
                .get(from..)
                .and_then(|t| memchr::memmem::find(t, marker.as_bytes()))
            else {
                break;
            };
            let start = from + at;
            let (end, decoded, count) = if marker == "%" {
                percent_run(bytes, start)
            } else {
                escape_run(bytes, start)
            };
            from = end.max(start + 1);
            if count < 8 {
                continue;
            }
            budget -= 1;
            let v = inspect(scanner, &decoded, depth, label);
            let letters = decoded
                .iter()
                .filter(|b| b.is_ascii_alphabetic() || **b == b' ')
                .count();
            // Long escaped text is itself a way to hide strings from review.
            let v = match v {
                Verdict::Nothing
                    if marker == "\\x"
                        && mostly_printable(&decoded)
                        && letters * 10 >= decoded.len() * 7 =>
                {
                    Verdict::Report(
                        Severity::Medium,
                        format!(
                            "{label} decode to \"{}\"",
                            truncate_chars(&make_visible(&String::from_utf8_lossy(&decoded)), 140)
                        ),
                    )
                }
                v => v,
            };
            let id = if marker == "\\x" {
                "obf.hex-encoded-text"
            } else {
                "obf.encoded-payload"
            };
            emit(id, start, end, v);
        }
    }

    // ROT13 and reversed strings, only where the file itself mentions the transformation.
    type Transform = fn(&str) -> String;
    let transforms: [(u8, Transform, &str); 2] = [
        (
            GATE_ROT13,
            |lit| lit.chars().map(rot13).collect(),
            "ROT13 string",
        ),
        (
            GATE_REVERSE,
            |lit| lit.chars().rev().collect(),
            "Reversed string",
        ),
    ];
    for (gate, transform, label) in transforms {
        if mentions & gate == 0 {
            continue;
        }
        for (s, e) in string_literals(text)
            .into_iter()
            .chain(prose_runs(text))
            .take(budget)
        {
            let decoded = transform(text.get(s..e).unwrap_or(""));
            let v = inspect(scanner, decoded.as_bytes(), depth, label);
            emit("obf.encoded-payload", s, e, v);
        }
    }
}

/// Decides what a decoded run is.
fn inspect(scanner: &Scanner, decoded: &[u8], depth: u8, label: &str) -> Verdict {
    let decoded = decoded
        .get(..decoded.len().min(MAX_DECODED))
        .unwrap_or(decoded);
    if let Some(kind) = magic_kind(decoded) {
        return Verdict::Binary(format!(
            "{label} decodes to a {kind} ({} bytes)",
            decoded.len()
        ));
    }
    // PowerShell -EncodedCommand and similar: UTF-16LE text.
    let utf16;
    let decoded = if decoded.len() >= 8 && decoded.iter().skip(1).step_by(2).all(|&b| b == 0) {
        utf16 = decoded.iter().step_by(2).copied().collect::<Vec<u8>>();
        utf16.as_slice()
    } else {
        decoded
    };
    if !mostly_printable(decoded) {
        return Verdict::Nothing;
    }
    let s = String::from_utf8_lossy(decoded);
    let inner = scanner.decoded_hits(&s, depth + 1);
    let worst = inner.iter().map(|h| h.severity).max();
    let mut rules: Vec<&str> = inner
        .iter()
        .filter(|h| h.severity >= Severity::Medium)
        .filter_map(|h| crate::rules::RULES.get(h.rule).map(|r| r.id))
        .collect();
    rules.dedup();
    rules.truncate(4);
    let shown = truncate_chars(&make_visible(&s), 140);
    if looks_like_payload(&s) || worst.is_some_and(|w| w >= Severity::High) {
        let why = if rules.is_empty() {
            String::new()
        } else {
            format!(" (rescan: {})", rules.join(", "))
        };
        return Verdict::Report(
            worst.unwrap_or(Severity::High).max(Severity::High),
            format!("{label} decodes to \"{shown}\"{why}"),
        );
    }
    if worst.is_some_and(|w| w >= Severity::Medium) {
        return Verdict::Report(
            Severity::Medium,
            format!(
                "{label} decodes to \"{shown}\" (rescan: {})",
                rules.join(", ")
            ),
        );
    }
    Verdict::Nothing
}

const fn b64_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'-' || b == b'_';
        i += 1;
    }
    t
}

/// Base64 (standard or URL-safe) characters.
static IS_B64: [bool; 256] = b64_table();

/// Runs of base64 characters, 20 or more long: (start, end).
fn long_runs(bytes: &[u8]) -> Vec<(usize, usize)> {
    const MIN: usize = 20;
    let is = |i: usize| bytes.get(i).is_some_and(|&b| IS_B64[usize::from(b)]);
    let mut out = Vec::new();
    let mut p = MIN - 1;
    while p < bytes.len() {
        if !is(p) {
            p += MIN;
            continue;
        }
        let mut s = p;
        while s > 0 && is(s - 1) {
            s -= 1;
        }
        let mut e = p + 1;
        while is(e) {
            e += 1;
        }
        if e - s >= MIN {
            out.push((s, e));
        }
        p = e + MIN;
    }
    out
}

/// A run with upper case, lower case and digits (or hex): not a word, path or identifier.
fn varied(run: &[u8]) -> bool {
    let upper = run.iter().any(u8::is_ascii_uppercase);
    let lower = run.iter().any(u8::is_ascii_lowercase);
    let digit = run.iter().any(u8::is_ascii_digit);
    // Paths (`a/b/c`) and dashed names are not base64 unless they also mix classes.
    let slashes = run.iter().filter(|&&b| b == b'/').count();
    upper && lower && (digit || run.len() >= 48) && slashes * 8 < run.len()
}

fn base64_decode(run: &[u8]) -> Option<Vec<u8>> {
    let config = base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    let url_safe = run.iter().any(|&b| b == b'-' || b == b'_');
    let alphabet = if url_safe {
        &base64::alphabet::URL_SAFE
    } else {
        &base64::alphabet::STANDARD
    };
    let engine = base64::engine::GeneralPurpose::new(alphabet, config);
    let run = run.get(..run.len().min(MAX_DECODED * 4 / 3)).unwrap_or(run);
    let usable = run.len() - run.len() % 4;
    let candidate = if run.len() % 4 == 1 {
        run.get(..usable).unwrap_or(run)
    } else {
        run
    };
    engine.decode(candidate).ok()
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn hex_decode(run: &[u8]) -> Vec<u8> {
    run.chunks_exact(2)
        .take(MAX_DECODED)
        .filter_map(|p| Some(hex_value(p[0])? << 4 | hex_value(p[1])?))
        .collect()
}

/// A run of `\xNN` escapes (one or two backslashes) starting at `start`: end, bytes, count.
fn escape_run(bytes: &[u8], start: usize) -> (usize, Vec<u8>, usize) {
    let mut i = start;
    let mut out = Vec::new();
    while i < bytes.len() && out.len() < MAX_DECODED {
        let mut j = i;
        while j < bytes.len() && j < i + 2 && bytes[j] == b'\\' {
            j += 1;
        }
        if j == i || bytes.get(j) != Some(&b'x') {
            break;
        }
        let (Some(h), Some(l)) = (
            bytes.get(j + 1).copied().and_then(hex_value),
            bytes.get(j + 2).copied().and_then(hex_value),
        ) else {
            break;
        };
        out.push(h << 4 | l);
        i = j + 3;
    }
    let n = out.len();
    (i, out, n)
}

/// A token with `%NN` escapes starting at `start`: end, decoded bytes, number of escapes.
fn percent_run(bytes: &[u8], start: usize) -> (usize, Vec<u8>, usize) {
    let mut s = start;
    while s > 0 && !bytes[s - 1].is_ascii_whitespace() && !b"\"'`()<>".contains(&bytes[s - 1]) {
        s -= 1;
        if start - s > 256 {
            break;
        }
    }
    let mut i = s;
    let mut out = Vec::new();
    let mut count = 0;
    while i < bytes.len() && out.len() < MAX_DECODED {
        let b = bytes[i];
        if b.is_ascii_whitespace() || b"\"'`()<>".contains(&b) {
            break;
        }
        if b == b'%' {
            if let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex_value),
                bytes.get(i + 2).copied().and_then(hex_value),
            ) {
                out.push(h << 4 | l);
                count += 1;
                i += 3;
                continue;
            }
        }
        out.push(if b == b'+' { b' ' } else { b });
        i += 1;
    }
    (i, out, count)
}

fn rot13(c: char) -> char {
    match c {
        'a'..='m' | 'A'..='M' => char::from(c as u8 + 13),
        'n'..='z' | 'N'..='Z' => char::from(c as u8 - 13),
        _ => c,
    }
}

/// Byte ranges of unquoted prose that may be a transformed message: what follows the last
/// `: ` of a line, or a whole line, when it is 20 or more characters of mostly letters and
/// spaces with no quote (quoted runs are [`string_literals`]). At most [`MAX_CANDIDATES`].
fn prose_runs(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        if out.len() >= MAX_CANDIDATES {
            break;
        }
        let body = line.trim_end_matches(['\n', '\r']);
        let from = body.rfind(": ").map_or(0, |i| i + 2);
        let run = body.get(from..).unwrap_or("").trim();
        if run.len() < 20 || run.contains(['"', '\'', '`']) {
            continue;
        }
        let letters = run
            .bytes()
            .filter(|b| b.is_ascii_alphabetic() || *b == b' ')
            .count();
        if letters * 100 < run.len() * 85 {
            continue;
        }
        let lead = body.get(from..).unwrap_or("").len()
            - body.get(from..).unwrap_or("").trim_start().len();
        out.push((start + from + lead, start + from + lead + run.len()));
    }
    out
}

/// Byte ranges of the contents of quoted string literals of 12 or more characters.
fn string_literals(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() && out.len() < MAX_CANDIDATES {
        let q = bytes[i];
        if q == b'"' || q == b'\'' {
            if let Some(len) = bytes
                .get(i + 1..)
                .and_then(|r| r.iter().take(4096).position(|&b| b == q || b == b'\n'))
            {
                let e = i + 1 + len;
                if bytes.get(e) == Some(&q) && len >= 12 {
                    out.push((i + 1, e));
                }
                i = e + 1;
                continue;
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic_numbers() {
        assert_eq!(magic_kind(b"\x7fELF\x02\x01"), Some("ELF"));
        assert_eq!(magic_kind(b"MZ\x90\x00\x03"), Some("PE (Windows)"));
        assert_eq!(magic_kind(b"PK\x03\x04rest"), Some("ZIP archive"));
        assert_eq!(magic_kind(b"BZh91AY&SY"), Some("bzip2 archive"));
        assert_eq!(magic_kind(b"BZhello"), None);
        assert_eq!(magic_kind(b"\x89PNG\r\n"), None);
    }

    #[test]
    fn runs() {
        assert_eq!(hex_decode(b"6869"), b"hi");
        let (end, out, n) = escape_run(b"\\x68\\x69!", 0);
        assert_eq!((end, out.as_slice(), n), (8, &b"hi"[..], 2));
        let (_, out, n) = percent_run(b"a=%63%75%72%6c", 2);
        assert_eq!((out.as_slice(), n), (&b"a=curl"[..], 4));
        assert_eq!("uryyb".chars().map(rot13).collect::<String>(), "hello");
    }
}
