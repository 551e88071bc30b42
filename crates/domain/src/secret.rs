//! A secret string that cannot be logged by accident.

use std::fmt;

/// A secret in clear text (a session token, an API key, an upstream key). `Debug` and
/// `Display` print `[redacted]`; only [`SecretString::expose`] gives the value.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The clear text. Never log the result.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// A display hint: `…` and the last four characters.
    pub fn hint(&self) -> String {
        let tail: String = {
            let chars: Vec<char> = self.0.chars().collect();
            chars[chars.len().saturating_sub(4)..].iter().collect()
        };
        format!("…{tail}")
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretString([redacted])")
    }
}

impl fmt::Display for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_do_not_format() {
        let s = SecretString::new("sk-very-secret-1234");
        assert_eq!(format!("{s:?} {s}"), "SecretString([redacted]) [redacted]");
        assert_eq!(s.hint(), "…1234");
        assert_eq!(SecretString::new("ab").hint(), "…ab");
    }
}
