//! Token counts for reservations (issue 28, decision 0025): OpenAI's own byte-pair encodings,
//! `o200k_base` for the gpt-4o, gpt-4.1, gpt-5 and o-series families and `cl100k_base` for
//! every other model (gpt-4, gpt-3.5 and names gc does not know), from `tiktoken-rs`, which
//! embeds its encoding files in the binary: nothing is downloaded, at build or at run time.
//!
//! Each encoding is loaded on its first use, that is by the first run a token limit applies
//! to (a server whose tenants have no token limit never loads one, and idles as before); it
//! then stays loaded. Measured in a release build: `cl100k_base` adds 23 MiB of RSS and takes
//! 74 ms to load, `o200k_base` 45 MiB and 157 ms (docs/benchmarks.md, issue 28); counting
//! runs at about 13 tokens a microsecond.

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

/// Text beyond this many bytes (per call) is not run through the encoder but estimated at
/// one token per [`BYTES_PER_TOKEN_PAST_LIMIT`] bytes, so a huge prompt costs bounded work.
const ENCODE_MAX_BYTES: usize = 256 * 1024;
/// The estimate past [`ENCODE_MAX_BYTES`]: English text averages about 4 bytes a token; 3
/// leans towards more tokens (a reservation too large is settled back).
const BYTES_PER_TOKEN_PAST_LIMIT: usize = 3;

/// The encoding family of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    O200k,
    Cl100k,
}

impl Encoding {
    /// The family of `model` (a provider prefix such as `openai/` is ignored).
    pub fn of(model: &str) -> Self {
        let name = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        let o_series = name.len() > 1
            && name.starts_with('o')
            && name[1..].starts_with(|c: char| c.is_ascii_digit());
        if name.starts_with("gpt-4o")
            || name.starts_with("gpt-4.1")
            || name.starts_with("gpt-4.5")
            || name.starts_with("gpt-5")
            || name.starts_with("chatgpt-4o")
            || name.starts_with("gpt-oss")
            || o_series
        {
            Self::O200k
        } else {
            Self::Cl100k
        }
    }

    fn bpe(self) -> Option<&'static CoreBPE> {
        static O200K: OnceLock<Option<CoreBPE>> = OnceLock::new();
        static CL100K: OnceLock<Option<CoreBPE>> = OnceLock::new();
        match self {
            Self::O200k => O200K.get_or_init(|| tiktoken_rs::o200k_base().ok()),
            Self::Cl100k => CL100K.get_or_init(|| tiktoken_rs::cl100k_base().ok()),
        }
        .as_ref()
    }
}

/// The tokens of `text` in `model`'s encoding (special tokens counted as plain text).
pub fn count(model: &str, text: &str) -> u64 {
    if text.is_empty() {
        return 0;
    }
    let (head, rest) = match text.get(..ENCODE_MAX_BYTES) {
        Some(head) if head.len() < text.len() => (head, text.len() - head.len()),
        // A cut inside a character, or nothing to cut: walk back to a boundary.
        _ if text.len() > ENCODE_MAX_BYTES => {
            let mut cut = ENCODE_MAX_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            (&text[..cut], text.len() - cut)
        }
        _ => (text, 0),
    };
    let encoded = match Encoding::of(model).bpe() {
        Some(bpe) => bpe.count_ordinary(head),
        // Unreachable with the embedded files; an estimate rather than a failed run.
        None => head.len().div_ceil(BYTES_PER_TOKEN_PAST_LIMIT),
    };
    let estimated = rest.div_ceil(BYTES_PER_TOKEN_PAST_LIMIT);
    u64::try_from(encoded.saturating_add(estimated)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_follow_the_model_name() {
        for m in [
            "gpt-4o",
            "gpt-4o-mini",
            "openai/gpt-4.1",
            "gpt-5",
            "o1",
            "o3-mini",
            "o4-mini",
        ] {
            assert_eq!(Encoding::of(m), Encoding::O200k, "{m}");
        }
        for m in ["gpt-4", "gpt-3.5-turbo", "auto", "m-large", "omni", "o"] {
            assert_eq!(Encoding::of(m), Encoding::Cl100k, "{m}");
        }
    }

    #[test]
    fn counts_are_openais() {
        // Known counts: "hello world" is 2 tokens in both encodings; the sentence is 10 (nine
        // words and the stop) in cl100k_base.
        assert_eq!(count("gpt-4o", "hello world"), 2);
        assert_eq!(count("gpt-4", "hello world"), 2);
        assert_eq!(
            count("gpt-4", "The quick brown fox jumps over the lazy dog."),
            10
        );
        assert_eq!(count("gpt-4", ""), 0);
    }

    #[test]
    fn huge_text_is_bounded_and_never_undercounted_to_zero() {
        let text = "é".repeat(400 * 1024);
        let n = count("gpt-4o", &text);
        assert!(n > 100_000, "{n}");
    }
}
