//! The matching view of a text: what the rules see, so that one rule covers every spelling.
//!
//! Every non-ASCII character is rewritten: compatibility decomposition (NFKD, the decomposing
//! half of NFKC: full-width and mathematical letters, ligatures, circled letters become ASCII),
//! combining marks after a base letter dropped (`ìgnore` reads `ignore`), invisible, bidi and
//! tag characters and the soft hyphen removed (`ig<U+00AD>nore` reads `ignore`), and letters
//! that are TR39 confusables of ASCII letters folded to their Latin skeleton (Cyrillic `с`,
//! Greek `ο`). ASCII text is copied as is, so a pure ASCII text has no separate view.
//!
//! The view keeps a sparse offset map (one entry per rewritten character) so that a match in
//! the view is reported at the right line and column of the original text.

use std::borrow::Cow;
use std::collections::HashMap;

/// A rewritten character: `norm_len` bytes at `norm` in the view stand for `orig_len` bytes at
/// `orig` in the original.
#[derive(Debug, Clone, Copy)]
struct Span {
    norm: usize,
    orig: usize,
    norm_len: usize,
    orig_len: usize,
}

/// The matching view of one text.
pub(crate) struct View<'a> {
    pub text: Cow<'a, str>,
    spans: Vec<Span>,
}

impl View<'_> {
    /// True when the view differs from the original text.
    pub fn changed(&self) -> bool {
        matches!(self.text, Cow::Owned(_))
    }

    /// The original byte offset of a view offset (a char boundary of the original).
    pub fn to_orig(&self, n: usize) -> usize {
        let i = self.spans.partition_point(|s| s.norm <= n);
        let Some(s) = i.checked_sub(1).and_then(|i| self.spans.get(i)) else {
            return n;
        };
        if n < s.norm + s.norm_len {
            if n == s.norm {
                s.orig
            } else {
                // Inside a rewritten character: the end of the original character.
                s.orig + s.orig_len
            }
        } else {
            s.orig + s.orig_len + (n - s.norm - s.norm_len)
        }
    }
}

/// Characters removed from the view: they are invisible or only reorder what is shown.
pub(crate) fn is_removed(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// How one non-ASCII character reads in the view.
fn fold(c: char, out: &mut String) {
    if is_removed(c) {
        return;
    }
    // Scripts without Latin look-alikes (CJK, kana, Hangul ...) stay as they are.
    if ('\u{2E80}'..='\u{FAFF}').contains(&c) || ('\u{20000}'..='\u{3FFFF}').contains(&c) {
        out.push(c);
        return;
    }
    let mut decomposed: Vec<char> = Vec::with_capacity(4);
    unicode_normalization::char::decompose_compatible(c, |d| decomposed.push(d));
    for (i, d) in decomposed.into_iter().enumerate() {
        if d.is_ascii() {
            out.push(d);
            continue;
        }
        if i > 0 && unicode_normalization::char::is_combining_mark(d) {
            continue;
        }
        if is_removed(d) {
            continue;
        }
        if d.is_alphabetic() {
            let skeleton: String = unicode_security::skeleton(d.encode_utf8(&mut [0; 4])).collect();
            if !skeleton.is_empty()
                && skeleton.len() <= 3
                && skeleton.bytes().all(|b| b.is_ascii_alphanumeric())
            {
                out.push_str(&skeleton);
                continue;
            }
        }
        out.push(d);
    }
}

/// The offset of the first non-ASCII byte at or after `from`: ASCII stretches are skipped 32
/// bytes at a time (the word-at-a-time `is_ascii`), not byte by byte.
pub(crate) fn next_non_ascii(bytes: &[u8], from: usize) -> Option<usize> {
    let rest = bytes.get(from..)?;
    let mut skipped = 0;
    for chunk in rest.chunks_exact(32) {
        if !chunk.is_ascii() {
            break;
        }
        skipped += 32;
    }
    let tail = rest.get(skipped..)?;
    tail.iter()
        .position(|&b| b >= 0x80)
        .map(|p| from + skipped + p)
}

/// Builds the matching view of `text` (borrowed when `text` is ASCII).
pub(crate) fn view(text: &str) -> View<'_> {
    if text.is_ascii() {
        return View {
            text: Cow::Borrowed(text),
            spans: Vec::new(),
        };
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut spans = Vec::new();
    let mut cache: HashMap<char, String> = HashMap::new();
    let mut i = 0;
    while i < bytes.len() {
        let run = next_non_ascii(bytes, i).map_or(bytes.len() - i, |at| at - i);
        out.push_str(text.get(i..i + run).unwrap_or(""));
        i += run;
        let Some(c) = text.get(i..).and_then(|t| t.chars().next()) else {
            break;
        };
        // A combining mark after an ASCII letter: part of that letter, dropped.
        let folded = if unicode_normalization::char::is_combining_mark(c)
            && out.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric)
        {
            ""
        } else {
            cache.entry(c).or_insert_with(|| {
                let mut s = String::new();
                fold(c, &mut s);
                s
            })
        };
        let same = folded.len() == c.len_utf8() && folded.starts_with(c);
        if !same {
            spans.push(Span {
                norm: out.len(),
                orig: i,
                norm_len: folded.len(),
                orig_len: c.len_utf8(),
            });
        }
        out.push_str(folded);
        i += c.len_utf8();
    }
    if spans.is_empty() {
        return View {
            text: Cow::Borrowed(text),
            spans,
        };
    }
    View {
        text: Cow::Owned(out),
        spans,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_is_borrowed() {
        let v = view("plain text");
        assert!(!v.changed());
        assert_eq!(v.to_orig(3), 3);
    }

    #[test]
    fn folds_every_spelling() {
        // Soft hyphen, zero-width space, Cyrillic letters, mathematical bold, full width.
        for s in [
            "ig\u{00AD}nore previous",
            "ig\u{200B}nore previous",
            "ign\u{043E}r\u{0435} previous",
            "\u{1D422}\u{1D420}\u{1D427}\u{1D428}\u{1D42B}\u{1D41E} previous",
            "\u{FF49}\u{FF47}\u{FF4E}\u{FF4F}\u{FF52}\u{FF45} previous",
            "i\u{0300}gnore previous",
        ] {
            assert_eq!(view(s).text, "ignore previous", "{s:?}");
        }
        // CJK and plain accented words stay readable.
        assert_eq!(view("日本語").text, "日本語");
        assert_eq!(view("café").text, "cafe");
    }

    #[test]
    fn maps_offsets_back() {
        let s = "a\u{200B}b ignore";
        let v = view(s);
        let n = v.text.find("ignore").unwrap_or(0);
        assert_eq!(&s[v.to_orig(n)..], "ignore");
        assert_eq!(v.to_orig(v.text.len()), s.len());
    }
}
