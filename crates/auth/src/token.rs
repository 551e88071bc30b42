//! Session tokens: 32 random bytes, sent base64url in the cookie, stored as SHA-256 only.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Lower-case hex SHA-256 of a credential, the only form in which one is stored.
pub fn sha256_hex(value: &str) -> String {
    let digest = Sha256::digest(value.as_bytes());
    let mut out = String::with_capacity(64);
    for byte in digest {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A fresh session token. Its `Debug` is redacted.
pub struct SessionToken(String);

impl SessionToken {
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// The value for the cookie.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> String {
        sha256_hex(&self.0)
    }

    /// True when `raw` has the shape of a token (43 base64url characters), checked before any
    /// database lookup.
    pub fn looks_valid(raw: &str) -> bool {
        raw.len() == 43
            && raw
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    }
}

impl std::fmt::Debug for SessionToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_well_formed_and_hashed() {
        let a = SessionToken::generate();
        let b = SessionToken::generate();
        assert_ne!(a.expose(), b.expose());
        assert!(SessionToken::looks_valid(a.expose()));
        assert!(!SessionToken::looks_valid("short"));
        assert_eq!(a.hash().len(), 64);
        assert_ne!(a.hash(), a.expose());
        assert!(!format!("{a:?}").contains(a.expose()));
    }

    #[test]
    fn sha256_is_the_standard_digest() {
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
