//! The domain's credential and sealing ports, implemented with this crate's primitives.

use gc_domain::ports::{CredentialCodec, KeySealer};
use gc_domain::secret::SecretString;
use gc_domain::{DomainError, DomainResult};

use crate::api_key::{checksum_ok, checksum_ok_with, ApiKeySecret};
use crate::seal::Sealer;
use crate::token::{sha256_hex, SessionToken};

/// Random session tokens and CRC32-checked `gc_` keys, stored as SHA-256.
#[derive(Debug, Clone, Copy, Default)]
pub struct Credentials;

impl CredentialCodec for Credentials {
    fn new_session_token(&self) -> (SecretString, String) {
        let token = SessionToken::generate();
        (SecretString::new(token.expose()), token.hash())
    }

    fn new_api_key(&self) -> (SecretString, String, String) {
        let key = ApiKeySecret::generate();
        (SecretString::new(key.expose()), key.hash(), key.hint())
    }

    fn session_hash(&self, raw: &str) -> Option<String> {
        SessionToken::looks_valid(raw).then(|| sha256_hex(raw))
    }

    fn api_key_hash(&self, raw: &str) -> Option<String> {
        checksum_ok(raw).then(|| sha256_hex(raw))
    }

    fn new_admin_token(&self) -> (SecretString, String) {
        let token =
            ApiKeySecret::generate_with_prefix(gc_domain::policy::admin_tokens::TOKEN_PREFIX);
        (SecretString::new(token.expose()), token.hash())
    }

    fn admin_token_hash(&self, raw: &str) -> Option<String> {
        checksum_ok_with(gc_domain::policy::admin_tokens::TOKEN_PREFIX, raw)
            .then(|| sha256_hex(raw))
    }
}

impl KeySealer for Sealer {
    fn seal(&self, plaintext: &str, binding: &[u8]) -> DomainResult<String> {
        Sealer::seal(self, plaintext, binding)
            .map_err(|e| DomainError::Internal(format!("sealing failed: {e}")))
    }

    fn open(&self, sealed: &str, binding: &[u8]) -> Option<SecretString> {
        Sealer::open(self, sealed, binding)
            .ok()
            .map(SecretString::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seal::MasterKey;

    #[test]
    fn made_credentials_pass_their_own_checks_and_hash_as_stored() {
        let c = Credentials;
        let (token, hash) = c.new_session_token();
        assert_eq!(c.session_hash(token.expose()), Some(hash));
        let (key, hash, hint) = c.new_api_key();
        assert_eq!(c.api_key_hash(key.expose()), Some(hash));
        assert!(hint.starts_with("gc_"));
        assert_eq!(c.api_key_hash("gc_made_up"), None);
        let (token, hash) = c.new_admin_token();
        assert!(token.expose().starts_with("gca_"));
        assert_eq!(c.admin_token_hash(token.expose()), Some(hash));
        assert_eq!(c.api_key_hash(token.expose()), None);
        assert_eq!(c.admin_token_hash(key.expose()), None);
        assert_eq!(c.session_hash("x"), None);
    }

    #[test]
    fn sealed_keys_open_only_with_their_binding() {
        let s = Sealer::new(&MasterKey::generate(), &[]);
        let sealed = KeySealer::seal(&s, "sk-secret", b"a").unwrap();
        assert_eq!(
            KeySealer::open(&s, &sealed, b"a").unwrap().expose(),
            "sk-secret"
        );
        assert!(KeySealer::open(&s, &sealed, b"b").is_none());
    }
}
