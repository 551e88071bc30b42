//! Validated value types. Each is checked once when built; inside the domain it is always valid.

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

/// A new password: 12 to 72 bytes, never truncated.
#[derive(Clone)]
pub struct Password(String);

impl Password {
    pub const MIN_BYTES: usize = 12;
    pub const MAX_BYTES: usize = 72;

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
        Ok(Self(raw))
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

    #[test]
    fn passwords_are_bounded_in_bytes_never_truncated() {
        assert!(Password::parse("password", "short".into()).is_err());
        assert!(Password::parse("password", "x".repeat(12)).is_ok());
        assert!(Password::parse("password", "x".repeat(72)).is_ok());
        assert!(Password::parse("password", "x".repeat(73)).is_err());
        // 25 three-byte characters are 75 bytes.
        assert!(Password::parse("password", "€".repeat(25)).is_err());
        assert_eq!(
            format!("{:?}", Password::parse("p", "x".repeat(12)).unwrap()),
            "Password(<redacted>)"
        );
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
