//! What a finished run reports for the activity feed.

use serde::{Deserialize, Serialize};

/// Token usage as OpenAI reports it (`usage` of a completion or of the last stream chunk).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
}

impl Usage {
    /// The usage of an answer of `kind`: chat completions' and embeddings' `prompt_tokens`,
    /// `completion_tokens` (none for embeddings) and `total_tokens`; the Responses API's
    /// `input_tokens` and `output_tokens` as prompt and completion tokens. `None` when it is
    /// not such an object (a number where a count should be, a count of another kind).
    pub fn of(kind: gc_domain::policy::runs::RunKind, usage: serde_json::Value) -> Option<Self> {
        #[derive(Deserialize)]
        struct ResponsesUsage {
            input_tokens: u64,
            output_tokens: u64,
            #[serde(default)]
            total_tokens: Option<u64>,
        }
        match kind {
            gc_domain::policy::runs::RunKind::Responses => {
                let u = serde_json::from_value::<ResponsesUsage>(usage).ok()?;
                Some(Self {
                    prompt_tokens: u.input_tokens,
                    completion_tokens: u.output_tokens,
                    total_tokens: u
                        .total_tokens
                        .unwrap_or(u.input_tokens.saturating_add(u.output_tokens)),
                })
            }
            _ => serde_json::from_value::<Self>(usage).ok(),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The completion was delivered (a stream ended with the upstream's `[DONE]`).
    Ok,
    /// The stream ended with an in-band error frame (or the upstream sent an error event).
    Error,
    /// The client went away before the stream ended.
    Cancelled,
}

impl RunStatus {
    /// `"ok"`, `"error"` or `"cancelled"`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Error => "error",
            RunStatus::Cancelled => "cancelled",
        }
    }
}

/// The outcome of one run, for the activity feed. Never contains the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunReport {
    pub status: RunStatus,
    pub usage: Option<Usage>,
    /// Time from sending the request to the first passed-through event (streams) or to the whole
    /// response (non-streamed).
    pub ttft_ms: Option<u64>,
    /// Time from sending the request to the end of the run.
    pub latency_ms: u64,
    /// The model the upstream reported, else the model that was requested.
    pub model: String,
    /// For `error`: the in-band error's code (`upstream_error` or `upstream_timeout`).
    pub error_code: Option<String>,
    /// For `error`: a short description (never the key).
    pub error_message: Option<String>,
    /// Tokens of the output passed on to the client, when counted (streams of runs under a
    /// token limit, [`crate::RunStream::count_relayed`]; completions without a `usage`).
    #[serde(default)]
    pub relayed_tokens: Option<u64>,
}
