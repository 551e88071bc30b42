//! `POST /run`, `POST /chat/completions`, `POST /responses` and `POST /embeddings`: each
//! extracts the run's kind and body, makes the one call of `gc_domain::services::run` (which
//! authenticates, decides, admits, calls the upstream and records) and maps its answer.

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::{web, HttpResponse};
use gc_domain::services::run::{
    self, ChatAnswer, Ran, RunAnswer, RunError, RunFailure, RunKind, RunRequest, UpstreamFailure,
};
use gc_domain::ErrorCode;
use serde_json::Value;

use crate::error::{rate_limit_headers, ApiError};
use crate::extract::{Body, Caller};
use crate::state::{AnswerStream, AppState};

/// The HTTP answer to a failed run: an upstream 4xx keeps its status (`upstream_rejected`, or
/// `upstream_rate_limited` with the upstream's `Retry-After`); a 5xx or transport failure is
/// 502, a time-out 504. Messages are rebuilt by the gateway adapter, never the upstream's text.
fn run_error(e: RunError) -> ApiError {
    match e {
        RunError::Upstream(UpstreamFailure::Refused {
            status,
            message,
            retry_after_secs,
        }) => {
            if status == 429 {
                ApiError::new(ErrorCode::UpstreamRateLimited, message)
                    .with_retry_after(retry_after_secs.unwrap_or(1))
            } else {
                ApiError::upstream_rejected(status, message)
            }
        }
        RunError::Upstream(UpstreamFailure::Timeout) => ApiError::new(
            ErrorCode::UpstreamTimeout,
            "upstream did not answer in time",
        ),
        RunError::Upstream(UpstreamFailure::Failed { message, .. }) => {
            ApiError::new(ErrorCode::UpstreamError, message)
        }
        // Cannot happen from the gateway: a 401 moves on to the next key.
        RunError::Upstream(UpstreamFailure::KeyRejected) => {
            ApiError::new(ErrorCode::UpstreamError, "the gateway rejected the key")
        }
        RunError::AllKeysRejected(region) => ApiError::new(
            ErrorCode::UpstreamError,
            format!(
                "every ready {} key was rejected by the gateway",
                region.as_str()
            ),
        ),
    }
}

/// `POST /run`: a chat request through the tenant's region gateway.
#[utoipa::path(post, path = "/api/v1/run", tag = "gateway",
    request_body(content = Object, description = "OpenAI chat-completions body: messages, model (default auto), stream, max_tokens, ..."),
    responses((status = 200, description = "The upstream completion, or with stream: true a text/event-stream ending in data: [DONE]"),
        (status = 403, description = "member refusals, insufficient_scope, shadow_read_only, ai_access_disabled, ai_access_not_ready"),
        (status = 422, description = "validation_failed or provider_not_allowed"),
        (status = 429, description = "rate_limited or budget_exhausted (a quota, with Retry-After), upstream_rate_limited"),
        (status = 502, description = "upstream_error"), (status = 504, description = "upstream_timeout")))]
pub async fn run(
    state: web::Data<AppState>,
    caller: Caller,
    body: Body<Value>,
) -> Result<HttpResponse, ApiError> {
    let request = request(RunKind::Chat, "/run", &caller, body);
    let ran = run::run(&state.run_ports(), request).await;
    answer(&caller, ran)
}

/// `POST /chat/completions`: the same pipeline for OpenAI SDKs (mounted when enabled).
#[utoipa::path(post, path = "/api/v1/chat/completions", tag = "gateway",
    request_body(content = Object, description = "OpenAI chat-completions body"),
    responses((status = 200, description = "An OpenAI chat completion or event stream")))]
pub async fn chat_completions(
    state: web::Data<AppState>,
    caller: Caller,
    body: Body<Value>,
) -> Result<HttpResponse, ApiError> {
    let request = request(RunKind::Chat, "/chat/completions", &caller, body);
    let ran = run::run(&state.run_ports(), request).await;
    answer(&caller, ran)
}

/// `POST /responses`: OpenAI's Responses API through the same pipeline (mounted with
/// `/chat/completions`).
#[utoipa::path(post, path = "/api/v1/responses", tag = "gateway",
    request_body(content = Object, description = "OpenAI Responses API body: input (a string or an array of items, required), model (default auto), instructions, max_output_tokens, stream, tools, ..."),
    responses((status = 200, description = "The upstream's response object, or with stream: true its text/event-stream (event names kept, ending after response.completed; gc's error frame and data: [DONE] if it breaks)")))]
pub async fn responses(
    state: web::Data<AppState>,
    caller: Caller,
    body: Body<Value>,
) -> Result<HttpResponse, ApiError> {
    let request = request(RunKind::Responses, "/responses", &caller, body);
    let ran = run::run(&state.run_ports(), request).await;
    answer(&caller, ran)
}

/// `POST /embeddings`: OpenAI's embeddings through the same pipeline (mounted with
/// `/chat/completions`).
#[utoipa::path(post, path = "/api/v1/embeddings", tag = "gateway",
    request_body(content = Object, description = "OpenAI embeddings body: model (required, a model name), input (a string, or 1 to 2048 strings or token arrays), encoding_format, dimensions, ..."),
    responses((status = 200, description = "The upstream's embeddings list ({object: list, data, model, usage})")))]
pub async fn embeddings(
    state: web::Data<AppState>,
    caller: Caller,
    body: Body<Value>,
) -> Result<HttpResponse, ApiError> {
    let request = request(RunKind::Embeddings, "/embeddings", &caller, body);
    let ran = run::run(&state.run_ports(), request).await;
    answer(&caller, ran)
}

/// The service's request for a run of `kind` on `route`, with the caller's credential.
fn request(
    kind: RunKind,
    route: &'static str,
    caller: &Caller,
    body: Body<Value>,
) -> RunRequest<ApiError> {
    RunRequest {
        kind,
        route,
        credential: caller.credential(),
        body: body.into_inner(),
    }
}

/// The HTTP answer to a run: the Shadow view's marks, then the answer with the quotas'
/// headers (JSON, or an event stream), or the refusal.
fn answer(
    caller: &Caller,
    ran: Ran<bytes::Bytes, AnswerStream, ApiError>,
) -> Result<HttpResponse, ApiError> {
    caller.authenticated(ran.principal.as_ref());
    let RunAnswer { answer, limits } = match ran.outcome {
        Ok(answer) => answer,
        Err(RunFailure::Refused(e)) => return Err(e.into()),
        Err(RunFailure::Body(e)) => return Err(e),
        Err(RunFailure::Upstream { error, limits }) => {
            return Err(run_error(error).with_rate_limits(&limits))
        }
    };
    let mut res = HttpResponse::Ok();
    for header in rate_limit_headers(&limits) {
        res.insert_header(header);
    }
    Ok(match answer {
        ChatAnswer::Complete { body, .. } => res
            .insert_header((CONTENT_TYPE, "application/json"))
            .body(body),
        ChatAnswer::Stream(run) => res
            .insert_header((CONTENT_TYPE, "text/event-stream"))
            .insert_header((CACHE_CONTROL, "no-cache"))
            .insert_header(("x-accel-buffering", "no"))
            .streaming(run),
    })
}
