//! `POST /run`, `POST /chat/completions`, `POST /responses` and `POST /embeddings`: one
//! domain preparation for the run's kind (every refusal, the keys loaded and opened by
//! `RunScope`), then the domain's run orchestration.

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::{web, HttpResponse};
use gc_domain::runs::{prepare_for, ChatAnswer, RunError, RunKind, UpstreamFailure};
use gc_domain::ErrorCode;
use serde_json::Value;

use std::time::Instant;

use crate::error::{rate_limit_headers, ApiError};
use crate::extract::{Body, Caller};
use crate::state::AppState;

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
        (status = 502, description = "upstream_error"),
        (status = 503, description = "busy: the run-record writer is behind and has no place for this run's record, refused before any quota is counted (retry after Retry-After); service_unavailable: the database did not answer"),
        (status = 504, description = "upstream_timeout")))]
pub async fn run(
    state: web::Data<AppState>,
    caller: Caller,
    body: Body<Value>,
) -> Result<HttpResponse, ApiError> {
    pipeline(state, caller, body.into_inner(), "/run", RunKind::Chat).await
}

/// `POST /chat/completions`: the same pipeline for OpenAI SDKs (mounted when enabled).
#[utoipa::path(post, path = "/api/v1/chat/completions", tag = "gateway",
    request_body(content = Object, description = "OpenAI chat-completions body"),
    responses((status = 200, description = "An OpenAI chat completion or event stream"),
        (status = 401, description = "OpenAI-shaped error"), (status = 404, description = "not mounted (GC_CHAT_COMPLETIONS=false)"),
        (status = 503, description = "busy: the run-record writer is behind and has no place for this run's record, refused before any quota is counted (retry after Retry-After); service_unavailable: the database did not answer")))]
pub async fn chat_completions(
    state: web::Data<AppState>,
    caller: Caller,
    body: Body<Value>,
) -> Result<HttpResponse, ApiError> {
    pipeline(
        state,
        caller,
        body.into_inner(),
        "/chat/completions",
        RunKind::Chat,
    )
    .await
}

/// `POST /responses`: OpenAI's Responses API through the same pipeline (mounted with
/// `/chat/completions`).
#[utoipa::path(post, path = "/api/v1/responses", tag = "gateway",
    request_body(content = Object, description = "OpenAI Responses API body: input (a string or an array of items, required), model (default auto), instructions, max_output_tokens, stream, tools, ..."),
    responses((status = 200, description = "The upstream's response object, or with stream: true its text/event-stream (event names kept, ending after response.completed; gc's error frame and data: [DONE] if it breaks)"),
        (status = 401, description = "OpenAI-shaped error"), (status = 404, description = "not mounted (GC_CHAT_COMPLETIONS=false)"),
        (status = 503, description = "busy: the run-record writer is behind and has no place for this run's record, refused before any quota is counted (retry after Retry-After); service_unavailable: the database did not answer")))]
pub async fn responses(
    state: web::Data<AppState>,
    caller: Caller,
    body: Body<Value>,
) -> Result<HttpResponse, ApiError> {
    pipeline(
        state,
        caller,
        body.into_inner(),
        "/responses",
        RunKind::Responses,
    )
    .await
}

/// `POST /embeddings`: OpenAI's embeddings through the same pipeline (mounted with
/// `/chat/completions`).
#[utoipa::path(post, path = "/api/v1/embeddings", tag = "gateway",
    request_body(content = Object, description = "OpenAI embeddings body: model (required, a model name), input (a string, or 1 to 2048 strings or token arrays), encoding_format, dimensions, ..."),
    responses((status = 200, description = "The upstream's embeddings list ({object: list, data, model, usage})"),
        (status = 401, description = "OpenAI-shaped error"), (status = 404, description = "not mounted (GC_CHAT_COMPLETIONS=false)"),
        (status = 503, description = "busy: the run-record writer is behind and has no place for this run's record, refused before any quota is counted (retry after Retry-After); service_unavailable: the database did not answer")))]
pub async fn embeddings(
    state: web::Data<AppState>,
    caller: Caller,
    body: Body<Value>,
) -> Result<HttpResponse, ApiError> {
    pipeline(
        state,
        caller,
        body.into_inner(),
        "/embeddings",
        RunKind::Embeddings,
    )
    .await
}

/// Starts the quota refiller on the blocking pool when this request left a lease to refill
/// (decision 0017): at most one per process at a time; the request does not wait for it.
/// The claim travels with the work: if the pool never runs it, dropping it lets the next
/// request start another refiller.
fn refill_leases(state: &web::Data<AppState>) {
    let Some(claim) = state.runs.quotas().refill_due() else {
        return;
    };
    let state = state.clone();
    actix_web::rt::spawn(async move {
        let runs = state.runs.clone();
        let failed = state
            .db(move |store| Ok(runs.quotas().refill(claim, store, chrono::Utc::now)))
            .await;
        match failed {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                failed = n,
                "quota leases not refilled ahead; requests take them when used up"
            ),
            Err(e) => tracing::warn!(error = %e.code().as_str(), "the quota refiller did not run"),
        }
    });
}

async fn pipeline(
    state: web::Data<AppState>,
    caller: Caller,
    body: Result<Value, ApiError>,
    route: &'static str,
    kind: RunKind,
) -> Result<HttpResponse, ApiError> {
    use gc_domain::runs::ChatUpstream;
    let started = Instant::now();
    let runs = state.runs.clone();
    let sealer = state.sealer.clone();
    // One trip to the database: authenticate, then every refusal in the contract's order,
    // the quotas last (they count the request). Just before the quotas the run takes its
    // place in the run writer's queue: none free is 503 `busy` with `Retry-After: 1`, and
    // nothing counted (decision 0033).
    // On the serving thread when the store can answer at once (`Caller::read`); the body
    // stays in its slot until `prepare` no longer needs the store, so a second attempt on the
    // blocking pool still has it.
    let body = std::sync::Mutex::new(Some(body));
    let plan = caller
        .read(&state, move |ports, p| {
            let mut body = body
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            prepare_for(
                kind,
                ports,
                sealer.as_ref(),
                runs.quotas(),
                runs.sink(),
                p,
                &mut body,
                |r| runs.upstream().configured(r),
                |model, text| runs.upstream().count_tokens(model, text),
            )
        })
        .await
        .inspect_err(|e| {
            if matches!(
                e.code(),
                ErrorCode::RateLimited | ErrorCode::BudgetExhausted
            ) {
                state.metrics.quota_refused(e.code().as_str());
            }
        });
    refill_leases(&state);
    let plan = plan??;
    let limits = plan.limits();
    let region = plan.scope().region().as_str();
    let upstream_started = Instant::now();
    let answer = state.runs.execute(plan, route).await;
    let upstream = upstream_started.elapsed();
    let answer = answer.map_err(|e| run_error(e).with_rate_limits(&limits))?;
    let mut res = HttpResponse::Ok();
    for header in rate_limit_headers(&limits) {
        res.insert_header(header);
    }
    let res = match answer {
        ChatAnswer::Complete { body, .. } => res
            .insert_header((CONTENT_TYPE, "application/json"))
            .body(body),
        ChatAnswer::Stream(run) => res
            .insert_header((CONTENT_TYPE, "text/event-stream"))
            .insert_header((CACHE_CONTROL, "no-cache"))
            .insert_header(("x-accel-buffering", "no"))
            .streaming(run),
    };
    let added = started.elapsed().saturating_sub(upstream);
    state
        .metrics
        .run_latency(region, route, upstream.as_secs_f64(), added.as_secs_f64());
    Ok(res)
}
