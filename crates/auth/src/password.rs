//! bcrypt password hashing. A password longer than 72 bytes is refused before bcrypt sees it,
//! so nothing is ever silently cut. (The crate's `non_truncating_*` functions count bcrypt's
//! NUL terminator and so refuse a 72-byte password, which the contract allows; our own length
//! guard gives the same protection for every length the contract accepts.)

use gc_domain::ports::PasswordHasher;
use gc_domain::values::Password;
use gc_domain::{DomainError, DomainResult};
use rand::RngCore;

/// The most bytes bcrypt reads of a password.
const MAX_BYTES: usize = 72;

/// bcrypt at a configured cost. Slow by design: call it on a blocking pool.
pub struct BcryptHasher {
    cost: u32,
    /// Made on first use (it takes as long as a real hash; start-up should not wait for it).
    dummy: std::sync::OnceLock<String>,
}

impl BcryptHasher {
    pub fn new(cost: u32) -> Result<Self, bcrypt::BcryptError> {
        // Check the cost now, on a cheap input, so a bad configuration fails at start.
        if !(4..=31).contains(&cost) {
            return Err(bcrypt::BcryptError::CostNotAllowed(cost));
        }
        Ok(Self {
            cost,
            dummy: std::sync::OnceLock::new(),
        })
    }

    fn dummy(&self) -> &str {
        self.dummy.get_or_init(|| {
            let mut random = [0u8; 24];
            rand::rng().fill_bytes(&mut random);
            let filler: String = random.iter().map(|b| format!("{b:02x}")).collect();
            // The cost was checked in `new`; should hashing still fail, a malformed hash makes
            // every verification against it fail, which is the safe side.
            bcrypt::hash(filler, self.cost).unwrap_or_default()
        })
    }

    pub fn cost(&self) -> u32 {
        self.cost
    }
}

impl PasswordHasher for BcryptHasher {
    fn hash(&self, password: &Password) -> DomainResult<String> {
        if password.expose().len() > MAX_BYTES {
            return Err(DomainError::invalid(
                "password",
                "must be at most 72 bytes long",
            ));
        }
        bcrypt::hash(password.expose(), self.cost)
            .map_err(|e| DomainError::Internal(format!("password hashing failed: {e}")))
    }

    fn verify(&self, password: &str, hash: &str) -> bool {
        // Over-long passwords can never have been stored; verify against the dummy anyway so
        // the answer takes as long as any other.
        if password.len() > MAX_BYTES {
            let _ = bcrypt::verify(b"", self.dummy());
            return false;
        }
        bcrypt::verify(password, hash).unwrap_or(false)
    }

    fn dummy_hash(&self) -> &str {
        self.dummy()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_are_never_truncated() {
        let hasher = BcryptHasher::new(4).unwrap();
        let pw = Password::parse("password", "correct horse battery".into()).unwrap();
        let hash = hasher.hash(&pw).unwrap();
        assert!(hasher.verify("correct horse battery", &hash));
        assert!(!hasher.verify("correct horse batterx", &hash));
        let long = "quiet lemon harbour keeps seven brass kettles near one green lantern at dusk"
            [..72]
            .to_owned();
        let hash = hasher
            .hash(&Password::parse("password", long.clone()).unwrap())
            .unwrap();
        assert!(hasher.verify(&long, &hash));
        // 73 bytes sharing the first 72 must not match.
        assert!(!hasher.verify(&format!("{long}z"), &hash));
        assert!(!hasher.verify("anything", hasher.dummy_hash()));
    }
}
