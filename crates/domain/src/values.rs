//! Validated value types. Each is checked once when built; inside the domain it is always valid.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::error::{DomainError, DomainResult};

/// An email address, trimmed and lower-cased (emails are case-insensitive here).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Email(String);

impl Email {
    pub fn parse(field: &str, raw: &str) -> DomainResult<Self> {
        let value = raw.trim().to_lowercase();
        let valid = value.len() <= 254
            && value.split_once('@').is_some_and(|(local, domain)| {
                !local.is_empty()
                    && local.len() <= 64
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
                    && !domain.contains("..")
                    && !domain.contains('@')
            })
            && !value.chars().any(|c| c.is_whitespace() || c.is_control());
        if valid {
            Ok(Self(value))
        } else {
            Err(DomainError::invalid(field, "must be a valid email address"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Builds from a value that was validated before it was stored.
    pub fn from_stored(value: String) -> Self {
        Self(value)
    }
}

/// A new password: 12 to 72 bytes, never truncated, and not guessable at sight (the password
/// policy, decision 0026): not only whitespace, at least [`Password::MIN_DISTINCT`] different
/// characters, not a repeated unit or a keyboard, letter or digit run, not one of the common
/// passwords of `common_passwords.txt` once lower-cased with digits and symbols around it
/// taken off (`password1234`, `P@ssw0rd!`), and, with [`Password::parse_for`], not holding the
/// account's email or the part of it before the `@`.
#[derive(Clone)]
pub struct Password(String);

impl Password {
    pub const MIN_BYTES: usize = 12;
    pub const MAX_BYTES: usize = 72;
    /// Different characters (whitespace aside) a password needs at least.
    pub const MIN_DISTINCT: usize = 5;

    /// A new password by the rules that need no account (see [`Password::parse_for`]).
    pub fn parse(field: &str, raw: String) -> DomainResult<Self> {
        if raw.len() < Self::MIN_BYTES || raw.len() > Self::MAX_BYTES {
            return Err(DomainError::invalid(
                field,
                format!(
                    "must be {} to {} bytes long",
                    Self::MIN_BYTES,
                    Self::MAX_BYTES
                ),
            ));
        }
        if let Some(reason) = password_policy::weakness(&raw) {
            return Err(DomainError::invalid(field, reason));
        }
        Ok(Self(raw))
    }

    /// A new password of the account with this email: the rules of [`Password::parse`], and
    /// it must not hold the email or its part before the `@` (when that is 4 characters or
    /// more), in any case.
    pub fn parse_for(field: &str, raw: String, email: &str) -> DomainResult<Self> {
        let password = Self::parse(field, raw)?;
        if password_policy::holds_email(&password.0, email) {
            return Err(DomainError::invalid(
                field,
                "must not contain the account's email address or its name part",
            ));
        }
        Ok(password)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

/// The password policy's checks (see [`Password`]).
mod password_policy {
    use std::collections::HashSet;
    use std::sync::OnceLock;

    /// Common passwords, one or more a line separated by spaces; `#` starts a comment line.
    const COMMON: &str = include_str!("common_passwords.txt");
    /// Keyboard rows, in order; a password that is a run along them is refused.
    const KEYBOARD: &str = "`1234567890-=qwertyuiop[]\\asdfghjkl;'zxcvbnm,./";

    /// Why `raw` is too easy to guess, if it is.
    pub(super) fn weakness(raw: &str) -> Option<&'static str> {
        let compact: Vec<char> = raw
            .chars()
            .filter(|c| !c.is_whitespace())
            .flat_map(char::to_lowercase)
            .collect();
        if compact.is_empty() {
            return Some("must not be only spaces");
        }
        let distinct: HashSet<char> = compact.iter().copied().collect();
        if distinct.len() < super::Password::MIN_DISTINCT {
            return Some("must use at least 5 different characters");
        }
        let base = base(raw);
        let base_chars: Vec<char> = base.chars().collect();
        if periodic(&compact) || run(&compact) || (base_chars.len() >= 6 && run(&base_chars)) {
            return Some("must not be a repeated pattern or a keyboard, letter or digit sequence");
        }
        if common().contains(base.as_str()) {
            return Some(
                "is too common (a well-known password, perhaps with digits or symbols added); choose a less predictable one",
            );
        }
        None
    }

    /// Whether `raw` holds the email or its local part (of 4 characters or more).
    pub(super) fn holds_email(raw: &str, email: &str) -> bool {
        let password = raw.to_lowercase();
        let email = email.trim().to_lowercase();
        if email.is_empty() {
            return false;
        }
        let local = email.split('@').next().unwrap_or_default();
        password.contains(&email) || (local.chars().count() >= 4 && password.contains(local))
    }

    /// The word a password is made of: lower-cased, digits, symbols and spaces around it taken
    /// off, look-alike digits and symbols inside read as letters and separators dropped, so
    /// `P@ssw0rd-1234!` reads `password`.
    fn base(raw: &str) -> String {
        let lower = raw.to_lowercase();
        let trimmed = lower.trim_matches(|c: char| !c.is_alphabetic());
        trimmed
            .chars()
            .filter(|c| !c.is_whitespace() && !matches!(c, '-' | '_' | '.'))
            .map(|c| match c {
                '@' | '4' => 'a',
                '0' => 'o',
                '$' | '5' => 's',
                '3' => 'e',
                '1' | '!' => 'i',
                '7' => 't',
                other => other,
            })
            .collect()
    }

    /// The common passwords' words (see [`base`]), of 3 letters or more.
    fn common() -> &'static HashSet<String> {
        static SET: OnceLock<HashSet<String>> = OnceLock::new();
        SET.get_or_init(|| {
            COMMON
                .lines()
                .filter(|l| !l.starts_with('#'))
                .flat_map(str::split_whitespace)
                .map(base)
                .filter(|w| w.chars().count() >= 3)
                .collect()
        })
    }

    /// Whether `s` repeats a unit of at most half its length (`abcabcabcabc`).
    fn periodic(s: &[char]) -> bool {
        (1..=s.len() / 2).any(|p| (p..s.len()).all(|i| s[i] == s[i - p]))
    }

    /// Whether `s` runs along the alphabet, the digits (`…890…` counts) or a keyboard row,
    /// either way.
    fn run(s: &[char]) -> bool {
        let step = |a: char, b: char| -> i32 {
            match (a.to_digit(10), b.to_digit(10)) {
                (Some(9), Some(0)) => 1,
                (Some(0), Some(9)) => -1,
                _ => b as i32 - a as i32,
            }
        };
        let monotone = |d: i32| s.windows(2).all(|w| step(w[0], w[1]) == d);
        let text: String = s.iter().collect();
        let reversed: String = s.iter().rev().collect();
        monotone(1) || monotone(-1) || KEYBOARD.contains(&text) || KEYBOARD.contains(&reversed)
    }
}

/// Validates an `expires_at`: `None`, or an RFC 3339 time after `now`.
pub fn expiry(raw: Option<&str>, now: DateTime<Utc>) -> DomainResult<Option<DateTime<Utc>>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let at = DateTime::parse_from_rfc3339(raw)
        .map_err(|_| {
            DomainError::invalid(
                "expires_at",
                "must be an RFC 3339 time such as 2030-01-01T00:00:00Z",
            )
        })?
        .with_timezone(&Utc);
    if at <= now {
        return Err(DomainError::invalid("expires_at", "must be in the future"));
    }
    Ok(Some(at))
}

/// Validates a free-text name: trimmed, `min..=max` characters, no control characters.
pub fn text(field: &str, raw: &str, min: usize, max: usize) -> DomainResult<String> {
    let value = raw.trim();
    let count = value.chars().count();
    if count < min || count > max {
        return Err(DomainError::invalid(
            field,
            if min > 0 {
                format!("must be {min} to {max} characters long")
            } else {
                format!("must be at most {max} characters long")
            },
        ));
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t' && c != '\r')
    {
        return Err(DomainError::invalid(
            field,
            "must not contain control characters",
        ));
    }
    Ok(value.to_owned())
}

/// The two gateway regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Region {
    #[serde(rename = "AIHK")]
    Aihk,
    #[serde(rename = "AICA")]
    Aica,
}

impl Region {
    pub const ALL: [Region; 2] = [Region::Aihk, Region::Aica];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Aihk => "AIHK",
            Self::Aica => "AICA",
        }
    }

    pub fn parse(field: &str, raw: &str) -> DomainResult<Self> {
        match raw {
            "AIHK" => Ok(Self::Aihk),
            "AICA" => Ok(Self::Aica),
            _ => Err(DomainError::invalid(field, "must be AIHK or AICA")),
        }
    }
}

/// An IANA time-zone name such as `Europe/Berlin`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Timezone(String);

impl Timezone {
    pub fn parse(field: &str, raw: &str) -> DomainResult<Self> {
        raw.parse::<chrono_tz::Tz>()
            .map(|tz| Self(tz.name().to_owned()))
            .map_err(|_| DomainError::invalid(field, "must be an IANA time-zone name"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_are_normalised_and_checked() {
        assert_eq!(
            Email::parse("email", " Ann@Example.COM ").unwrap().as_str(),
            "ann@example.com"
        );
        for bad in [
            "",
            "ann",
            "@example.com",
            "ann@",
            "ann@example",
            "a b@example.com",
            "ann@.example.com",
        ] {
            assert!(Email::parse("email", bad).is_err(), "{bad}");
        }
    }

    /// `n` bytes of a password the policy accepts.
    fn varied(n: usize) -> String {
        "quiet lemon harbour keeps seven brass kettles near one green lantern at dusk"[..n]
            .to_owned()
    }

    #[test]
    fn passwords_are_bounded_in_bytes_never_truncated() {
        assert!(Password::parse("password", "short".into()).is_err());
        assert!(Password::parse("password", varied(12)).is_ok());
        assert!(Password::parse("password", varied(72)).is_ok());
        assert!(Password::parse("password", varied(73)).is_err());
        // 25 three-byte characters are 75 bytes.
        assert!(Password::parse("password", "€".repeat(25)).is_err());
        assert_eq!(
            format!("{:?}", Password::parse("p", varied(12)).unwrap()),
            "Password(<redacted>)"
        );
    }

    #[test]
    fn guessable_passwords_are_refused_with_the_reason() {
        let refused = |raw: &str| match Password::parse("new_password", raw.into()) {
            Err(DomainError::Validation { field, message }) => {
                assert_eq!(field, "new_password");
                message
            }
            other => panic!("{raw:?} accepted: {other:?}"),
        };
        assert!(refused(&" ".repeat(12)).contains("spaces"));
        assert!(refused("\t \n".repeat(4).as_str()).contains("spaces"));
        assert!(refused("aaaaaaaaaaab").contains("different"));
        for common in [
            "password1234",
            "Password!2024",
            "P@ssw0rd-1234!",
            "1234password",
            "letmein12345",
            "iloveyou!!!!",
            "Monkey123456",
            "dragon-2024!",
            "Football2025!",
            "trustno1trustno1",
        ] {
            refused(common);
        }
        for pattern in [
            "123456789012",
            "abcdefghijklm",
            "qwertyuiop[]",
            "zyxwvutsrqpon",
            "abc123abc123",
            "passwordpassword",
            "qwertyuiop2024",
        ] {
            refused(pattern);
        }
        for fine in [
            "admin-password-123",
            "member-password-123",
            "a-long-password-1",
            "correct horse battery",
            "ann-first-password",
            "not-the-password-1",
        ] {
            assert!(Password::parse("password", fine.into()).is_ok(), "{fine}");
        }
    }

    #[test]
    fn a_password_must_not_hold_the_account_s_email() {
        let email = "Ann.Smith@Example.com";
        for bad in [
            "ann.smith@example.com",
            "my ANN.SMITH@example.com pw",
            "ann.smith-rocks-2024",
        ] {
            let e = Password::parse_for("password", bad.into(), email).unwrap_err();
            assert!(
                matches!(&e, DomainError::Validation { field, message } if field == "password" && message.contains("email")),
                "{bad}: {e:?}"
            );
        }
        assert!(Password::parse_for("password", "quiet-lemon-harbour".into(), email).is_ok());
        // A short local part is not looked for.
        assert!(Password::parse_for("password", "bo-quiet-lemon".into(), "bo@example.com").is_ok());
    }

    #[test]
    fn timezones_must_be_iana_names() {
        assert_eq!(
            Timezone::parse("timezone", "Europe/Berlin")
                .unwrap()
                .as_str(),
            "Europe/Berlin"
        );
        assert!(Timezone::parse("timezone", "Mars/Olympus").is_err());
    }

    #[test]
    fn text_is_trimmed_and_bounded() {
        assert_eq!(text("name", "  Ann ", 1, 10).unwrap(), "Ann");
        assert!(text("name", "   ", 1, 10).is_err());
        assert!(text("name", "x\u{0}y", 1, 10).is_err());
        assert!(text("name", &"é".repeat(11), 1, 10).is_err());
    }
}
