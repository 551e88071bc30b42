//! The upstream key as a type that cannot be logged by accident.

use std::fmt;

/// An upstream (provider) key in clear text.
///
/// `Debug` and `Display` print `[redacted]`; only [`Secret::expose`] gives the value, and this
/// crate uses it solely to build the `Authorization` header and to redact upstream messages.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a clear-text key.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The clear-text key. Never log or return the result.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Replaces every occurrence of the secret in `text`, then truncates to `max_chars`
/// characters (redaction first, so truncation can never leave half a key behind).
pub(crate) fn redact_and_truncate(text: &str, secret: Option<&Secret>, max_chars: usize) -> String {
    let mut out = match secret {
        // Very short "keys" would redact ordinary words; real keys are long.
        Some(s) if s.expose().len() >= 4 && text.contains(s.expose()) => {
            text.replace(s.expose(), "[redacted]")
        }
        _ => text.to_owned(),
    };
    if let Some((idx, _)) = out.char_indices().nth(max_chars) {
        out.truncate(idx);
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_are_redacted() {
        let s = Secret::new("sk-very-secret-value");
        assert_eq!(format!("{s:?}"), "Secret([redacted])");
        assert_eq!(format!("{s}"), "[redacted]");
        assert_eq!(s.expose(), "sk-very-secret-value");
    }

    #[test]
    fn redaction_happens_before_truncation() {
        let s = Secret::new("sk-abcdefgh");
        let text = "bad key sk-abcdefgh given";
        assert_eq!(
            redact_and_truncate(text, Some(&s), 100),
            "bad key [redacted] given"
        );
        // Truncating in the middle of where the key was must not leave a prefix of it.
        let t = redact_and_truncate(text, Some(&s), 12);
        assert!(!t.contains("sk-abc"), "{t}");
        assert_eq!(redact_and_truncate("héllo wörld", None, 4), "héll…");
    }
}
