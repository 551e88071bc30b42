//! gc-gateway: the upstream side of the AI gateway.
//!
//! This crate owns the calls to one region's OpenAI-compatible gateway and nothing else: it
//! knows neither the web framework nor the database. A [`RegionGateway`] is built once per
//! region from a [`GatewayConfig`] and shared (it is an `Arc` inside, cloning is cheap). It
//! holds one pooled hyper client (rustls with the bundled webpki roots, `http` and `https`,
//! TCP_NODELAY, keep-alive pool).
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
//! goes into the (sensitive-flagged) `Authorization` header; every message built from an
//! upstream answer has the key redacted, so no [`UpstreamError`] or [`ProbeResult`] can
//! carry it.

mod error;
mod gateway;
mod report;
mod secret;
mod sse;

#[cfg(feature = "mock")]
pub mod mock;

pub use error::{GatewayError, UpstreamError};
pub use gateway::{ChatOutcome, Completion, GatewayConfig, KeyStatus, ProbeResult, RegionGateway};
pub use report::{RunReport, RunStatus, Usage};
pub use secret::Secret;
pub use sse::RunStream;
