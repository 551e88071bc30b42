//! `/admin`: tenants and users, for platform admins' sessions only.

pub mod ai_keys;
pub mod diagnostics;
pub mod tenants;
pub mod tokens;
pub mod usage;
pub mod users;
