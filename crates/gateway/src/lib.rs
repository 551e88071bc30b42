//! gc-gateway: the upstream side of the AI gateway.
//!
//! This crate owns the calls to one region's OpenAI-compatible gateway and nothing else: it
//! knows neither the web framework nor the database. A [`RegionGateway`] is built once per
//! region from a [`GatewayConfig`] and shared (it is an `Arc` inside, cloning is cheap). It
//! holds a pooled hyper client per thread that calls it (rustls with the bundled webpki roots,
//! `http` and `https`, TCP_NODELAY, keep-alive pool), so an upstream connection is driven by
//! the same server worker as the run using it.
//!
//! - [`RegionGateway::probe`] checks a key with `GET {base}/models`;
//!   [`RegionGateway::check_reachable`] checks the gateway without a key.
//! - [`RegionGateway::chat`] sends `POST {base}/chat/completions`. Failures before the first
//!   byte reaches the client are [`UpstreamError`]s; a streamed answer is a [`RunStream`] of
//!   ready-to-send SSE frames that enforces the contract's stream rules (`[DONE]` exactly once,
//!   one in-band error frame when the upstream breaks, goes idle or ends early).
//!
//! # Run reports
//!
//! Every successful `chat` yields a [`RunReport`] exactly once:
//!
//! - [`Completion::report`] builds it for a non-streamed answer (everything is known at once).
//! - [`RunStream::on_finish`] registers a callback that the stream calls exactly once, when it
//!   emits its final frame (`ok` or `error`) or, if that never happened, when it is dropped
//!   (`cancelled`, the client went away). The callback runs inline on the task polling or
//!   dropping the stream, so it must be cheap and non-blocking (e.g. `try_send` into the
//!   bounded activity queue). A callback was chosen over a oneshot channel because it needs
//!   no extra task per run to wait on the receiver and cannot be forgotten half-way: the
//!   report simply goes where the callback sends it.
//!
//! # Secrets
//!
//! Upstream keys are passed as [`Secret`] (redacted `Debug`/`Display`). The key only ever
//! goes into the (sensitive-flagged) `Authorization` header. Every string derived from an
//! upstream answer goes through [`sanitize_upstream`], which removes the key in any form
//! (any letter case, split, hex, base64 at any alignment) and anything token-like, so no
//! [`UpstreamError`], [`ProbeResult`], [`RunReport`] or in-band error frame can carry it.
//! Upstream errors are rebuilt by gc (status, checked `code` / `type`, sanitised message),
//! never passed through; content passed through verbatim has the key (any letter case)
//! replaced.
//!
//! Only an upstream 401 proves a key bad ([`UpstreamError::KeyRejected`]); a 403, 404, 429
//! and the like are [`UpstreamError::Status`], whose status
//! [`UpstreamError::client_status`] passes on to the client.

mod error;
mod gateway;
mod port;
mod report;
mod secret;
mod sse;
pub mod tokens;

#[cfg(feature = "mock")]
pub mod mock;

pub use error::{GatewayError, UpstreamError};
pub use gateway::{ChatOutcome, Completion, GatewayConfig, KeyStatus, ProbeResult, RegionGateway};
pub use port::{domain_report, failure, Gateways};
pub use report::{RunReport, RunStatus, Usage};
pub use secret::{sanitize_upstream, Secret, MIN_FORM_KEY_BYTES};
pub use sse::RunStream;
