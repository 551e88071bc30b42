//! Workspace API keys: `gc_` + base62 of 32 random bytes (43 characters) + a 6-character
//! base62 CRC32 of that body, so scanners and this service can recognise a key, and reject a
//! made-up one, without a database lookup.

use rand::RngCore;

use crate::token::sha256_hex;

pub const KEY_PREFIX: &str = "gc_";
const BODY_LEN: usize = 43;
const CHECK_LEN: usize = 6;
const KEY_LEN: usize = KEY_PREFIX.len() + BODY_LEN + CHECK_LEN;
const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A workspace API key secret. Shown once at creation; its `Debug` is redacted.
pub struct ApiKeySecret(String);

impl ApiKeySecret {
    pub fn generate() -> Self {
        Self::generate_with_prefix(KEY_PREFIX)
    }

    /// A key of the same shape under another prefix (`gca_` for admin tokens, decision 0036).
    pub fn generate_with_prefix(prefix: &str) -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        let body = base62_fixed(&bytes, BODY_LEN);
        let check = base62_fixed(&crc32fast::hash(body.as_bytes()).to_be_bytes(), CHECK_LEN);
        Self(format!("{prefix}{body}{check}"))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> String {
        sha256_hex(&self.0)
    }

    /// `gc_…` and the last four characters, for lists.
    pub fn hint(&self) -> String {
        hint_of(&self.0)
    }
}

impl std::fmt::Debug for ApiKeySecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKeySecret(<redacted>)")
    }
}

/// `gc_…` plus the last four characters of a key.
pub fn hint_of(key: &str) -> String {
    format!("{KEY_PREFIX}{}", secret_hint(key))
}

/// `…` plus the last four characters of a secret: all a list may show of it.
pub fn secret_hint(secret: &str) -> String {
    let skip = secret.chars().count().saturating_sub(4);
    let tail: String = secret.chars().skip(skip).collect();
    format!("…{tail}")
}

/// True when `raw` is shaped like a key and its checksum matches. Costs no I/O.
pub fn checksum_ok(raw: &str) -> bool {
    checksum_ok_with(KEY_PREFIX, raw)
}

/// [`checksum_ok`] for keys made by [`ApiKeySecret::generate_with_prefix`].
pub fn checksum_ok_with(prefix: &str, raw: &str) -> bool {
    if raw.len() != KEY_LEN - KEY_PREFIX.len() + prefix.len() || !raw.starts_with(prefix) {
        return false;
    }
    let rest = &raw[prefix.len()..];
    if !rest.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return false;
    }
    let (body, check) = rest.split_at(BODY_LEN);
    base62_fixed(&crc32fast::hash(body.as_bytes()).to_be_bytes(), CHECK_LEN) == check
}

/// Big-endian bytes as base62, left-padded with `0` to `width` characters.
fn base62_fixed(bytes: &[u8], width: usize) -> String {
    let mut number: Vec<u8> = bytes.to_vec();
    let mut digits = Vec::with_capacity(width);
    while number.iter().any(|&b| b != 0) {
        let mut remainder = 0u32;
        for byte in number.iter_mut() {
            let acc = (remainder << 8) | u32::from(*byte);
            *byte = u8::try_from(acc / 62).unwrap_or(0);
            remainder = acc % 62;
        }
        digits.push(ALPHABET[remainder as usize]);
    }
    while digits.len() < width {
        digits.push(b'0');
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_have_the_documented_shape() {
        for _ in 0..200 {
            let key = ApiKeySecret::generate();
            let raw = key.expose();
            assert_eq!(raw.len(), KEY_LEN, "{raw}");
            assert!(raw.starts_with("gc_"));
            assert!(checksum_ok(raw));
            assert_eq!(key.hint(), format!("gc_…{}", &raw[raw.len() - 4..]));
            assert!(!format!("{key:?}").contains(raw));
        }
    }

    #[test]
    fn a_changed_character_fails_the_checksum() {
        let key = ApiKeySecret::generate();
        let raw = key.expose().to_owned();
        let mut bytes = raw.clone().into_bytes();
        bytes[10] = if bytes[10] == b'a' { b'b' } else { b'a' };
        let tampered = String::from_utf8(bytes).unwrap();
        assert!(!checksum_ok(&tampered));
        assert!(!checksum_ok(&raw[..raw.len() - 1]));
        assert!(!checksum_ok(&format!("xx_{}", &raw[3..])));
        assert!(!checksum_ok(""));
        assert!(!checksum_ok(&format!("{}é", &raw[..raw.len() - 2])));
    }

    #[test]
    fn prefixed_keys_check_only_under_their_prefix() {
        let token = ApiKeySecret::generate_with_prefix("gca_");
        let raw = token.expose();
        assert!(raw.starts_with("gca_") && raw.len() == KEY_LEN + 1);
        assert!(checksum_ok_with("gca_", raw));
        assert!(!checksum_ok(raw));
        assert!(!checksum_ok_with("gca_", ApiKeySecret::generate().expose()));
        assert!(!checksum_ok_with("gca_", &format!("gcb_{}", &raw[4..])));
    }

    #[test]
    fn base62_pads_and_encodes() {
        assert_eq!(base62_fixed(&[0, 0], 3), "000");
        assert_eq!(base62_fixed(&[61], 2), "0z");
        assert_eq!(base62_fixed(&[62], 2), "10");
        assert_eq!(base62_fixed(&[u8::MAX; 32], 43).len(), 43);
    }
}
