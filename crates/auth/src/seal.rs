//! Sealing of upstream provider keys with AES-256-GCM.
//!
//! A sealed value is `v1.<key id>.<base64 nonce+ciphertext>`, where the key id is the first
//! eight hex digits of the SHA-256 of the master key. The tenant id and the AI key's id are
//! bound as associated data, so a sealed value copied to another row does not open. To rotate
//! the master key, configure the new one as current and the old ones as previous: values
//! sealed under any of them still open, new values use the current one.

use aes_gcm::aead::{Aead, Payload};
use aes_gcm::{Aes256Gcm, KeyInit, Nonce};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error("the master key must be 32 bytes, base64-encoded")]
    BadMasterKey,
    #[error("the sealed value is malformed")]
    Malformed,
    #[error("the sealed value was made with an unknown master key")]
    UnknownKey,
    #[error("the sealed value does not open (wrong key or associated data)")]
    Open,
}

/// A 32-byte master key. Its `Debug` is redacted.
#[derive(Clone)]
pub struct MasterKey {
    bytes: [u8; 32],
}

impl MasterKey {
    pub fn from_base64(raw: &str) -> Result<Self, SealError> {
        let decoded = STANDARD
            .decode(raw.trim())
            .map_err(|_| SealError::BadMasterKey)?;
        let bytes: [u8; 32] = decoded.try_into().map_err(|_| SealError::BadMasterKey)?;
        Ok(Self { bytes })
    }

    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self { bytes }
    }

    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.bytes)
    }

    fn id(&self) -> String {
        Sha256::digest(self.bytes)
            .iter()
            .take(4)
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(<redacted>)")
    }
}

/// Seals with the current master key; opens with the current or any previous one.
#[derive(Clone)]
pub struct Sealer {
    current: (String, Aes256Gcm),
    previous: Vec<(String, Aes256Gcm)>,
}

impl Sealer {
    pub fn new(current: &MasterKey, previous: &[MasterKey]) -> Self {
        let cipher = |k: &MasterKey| (k.id(), Aes256Gcm::new(&k.bytes.into()));
        Self {
            current: cipher(current),
            previous: previous.iter().map(cipher).collect(),
        }
    }

    pub fn seal(&self, plaintext: &str, associated: &[u8]) -> Result<String, SealError> {
        let mut nonce = [0u8; 12];
        rand::rng().fill_bytes(&mut nonce);
        let ciphertext = self
            .current
            .1
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext.as_bytes(),
                    aad: associated,
                },
            )
            .map_err(|_| SealError::Open)?;
        let mut blob = nonce.to_vec();
        blob.extend_from_slice(&ciphertext);
        Ok(format!("v1.{}.{}", self.current.0, STANDARD.encode(blob)))
    }

    pub fn open(&self, sealed: &str, associated: &[u8]) -> Result<String, SealError> {
        let mut parts = sealed.splitn(3, '.');
        let (Some("v1"), Some(id), Some(body)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(SealError::Malformed);
        };
        let cipher = std::iter::once(&self.current)
            .chain(self.previous.iter())
            .find(|(kid, _)| kid == id)
            .map(|(_, c)| c)
            .ok_or(SealError::UnknownKey)?;
        let blob = STANDARD.decode(body).map_err(|_| SealError::Malformed)?;
        if blob.len() < 12 + 16 {
            return Err(SealError::Malformed);
        }
        let (nonce, ciphertext) = blob.split_at(12);
        let plain = cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: associated,
                },
            )
            .map_err(|_| SealError::Open)?;
        String::from_utf8(plain).map_err(|_| SealError::Open)
    }

    /// True when `sealed` was made with an older master key and should be re-sealed.
    pub fn needs_reseal(&self, sealed: &str) -> bool {
        sealed
            .split('.')
            .nth(1)
            .is_some_and(|id| id != self.current.0)
    }
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_open_only_with_the_same_associated_data() {
        let sealer = Sealer::new(&MasterKey::generate(), &[]);
        let sealed = sealer
            .seal("sk-upstream-secret", b"tenant-1/key-1")
            .unwrap();
        assert!(!sealed.contains("sk-upstream"));
        assert_eq!(
            sealer.open(&sealed, b"tenant-1/key-1").unwrap(),
            "sk-upstream-secret"
        );
        assert_eq!(
            sealer.open(&sealed, b"tenant-2/key-1"),
            Err(SealError::Open)
        );
        assert_eq!(sealer.open("garbage", b""), Err(SealError::Malformed));
    }

    #[test]
    fn rotation_keeps_old_values_readable() {
        let old = MasterKey::generate();
        let new = MasterKey::generate();
        let sealed = Sealer::new(&old, &[]).seal("secret", b"ad").unwrap();
        let rotated = Sealer::new(&new, std::slice::from_ref(&old));
        assert!(rotated.needs_reseal(&sealed));
        assert_eq!(rotated.open(&sealed, b"ad").unwrap(), "secret");
        assert_eq!(
            Sealer::new(&new, &[]).open(&sealed, b"ad"),
            Err(SealError::UnknownKey)
        );
    }

    #[test]
    fn master_keys_parse_from_base64() {
        let key = MasterKey::generate();
        assert!(MasterKey::from_base64(&key.to_base64()).is_ok());
        assert_eq!(
            MasterKey::from_base64("c2hvcnQ=").unwrap_err(),
            SealError::BadMasterKey
        );
        assert!(!format!("{key:?}").contains(&key.to_base64()));
    }
}
