//! gc-auth: credentials.
//!
//! Passwords (bcrypt, never truncated), session tokens and workspace API keys (random, only a
//! SHA-256 stored), and sealing of upstream provider keys with AES-256-GCM. Nothing here
//! logs or formats a secret.

pub mod api_key;
pub mod password;
pub mod ports;
pub mod seal;
pub mod token;

pub use api_key::{ApiKeySecret, KEY_PREFIX};
pub use password::BcryptHasher;
pub use ports::Credentials;
pub use seal::{MasterKey, SealError, Sealer};
pub use token::{sha256_hex, SessionToken};
