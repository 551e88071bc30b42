//! `/auth`: accounts, sign-in and sessions.

pub mod change_password;
pub mod ip_admin;
pub mod me;
pub mod sessions;
pub mod signin;
pub mod signout;
pub mod signup;
