use std::time::Instant;

use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use chrono::Utc;
use gc_domain::gateway::{ai_key_binding, AiKeyStatus, RunScope};
use gc_domain::model::new_id;
use gc_domain::workspace::NewActivity;
use gc_domain::DomainError;
use gc_gateway::{ChatOutcome, RunReport, Secret, UpstreamError};
use serde_json::{json, Map, Value};

use crate::error::ApiError;
use crate::extract::{Body, Caller};
use crate::state::AppState;

/// Fields that would let a caller pick where the request goes: never accepted.
const PROVIDER_FIELDS: [&str; 5] = ["provider", "base_url", "api_key", "region", "gateway"];
const ROLES: [&str; 5] = ["system", "user", "assistant", "tool", "developer"];

/// Checks a chat body: OpenAI's shape, no provider choice. Unknown OpenAI parameters pass.
pub fn validate_body(body: &Value) -> Result<Map<String, Value>, DomainError> {
    let Value::Object(map) = body else {
        return Err(DomainError::invalid("body", "must be a JSON object"));
    };
    if let Some(field) = PROVIDER_FIELDS.iter().find(|f| map.contains_key(**f)) {
        return Err(DomainError::ProviderNotAllowed((*field).to_owned()));
    }
    let messages = map
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| DomainError::invalid("messages", "must be a non-empty array"))?;
    if messages.is_empty() {
        return Err(DomainError::invalid(
            "messages",
            "must be a non-empty array",
        ));
    }
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        if !ROLES.contains(&role) {
            return Err(DomainError::invalid(
                format!("messages[{i}].role"),
                "must be one of system, user, assistant, tool",
            ));
        }
        match m.get("content") {
            Some(Value::String(_) | Value::Array(_)) => {}
            Some(Value::Null) | None if role == "assistant" => {}
            _ => {
                return Err(DomainError::invalid(
                    format!("messages[{i}].content"),
                    "must be a string or an array of content parts",
                ))
            }
        }
    }
    match map.get("model") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= 200 => {}
        Some(_) => {
            return Err(DomainError::invalid(
                "model",
                "must be a model name or \"auto\"",
            ))
        }
    }
    if map
        .get("stream")
        .is_some_and(|s| !s.is_boolean() && !s.is_null())
    {
        return Err(DomainError::invalid("stream", "must be a boolean"));
    }
    if let Some(t) = map.get("max_tokens").filter(|t| !t.is_null()) {
        if t.as_u64().is_none_or(|n| n < 1) {
            return Err(DomainError::invalid(
                "max_tokens",
                "must be a positive integer",
            ));
        }
    }
    Ok(map.clone())
}

fn upstream_error(e: &UpstreamError) -> ApiError {
    let status = match e {
        UpstreamError::Timeout => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::BAD_GATEWAY,
    };
    // The gateway crate redacts the key from upstream messages before they get here.
    ApiError::new(status, e.code(), e.to_string())
}

/// `POST /run`: a chat request through the tenant's region gateway.
#[utoipa::path(post, path = "/api/v1/run", tag = "gateway",
    request_body(content = Object, description = "OpenAI chat-completions body: messages, model (default auto), stream, max_tokens, ..."),
    responses((status = 200, description = "The upstream completion, or with stream: true a text/event-stream ending in data: [DONE]"),
        (status = 403, description = "member refusals, insufficient_scope, shadow_read_only, ai_access_disabled, ai_access_not_ready"),
        (status = 422, description = "validation_failed or provider_not_allowed"),
        (status = 502, description = "upstream_error"), (status = 504, description = "upstream_timeout")))]
pub async fn run(
    state: web::Data<AppState>,
    caller: Caller,
    body: Body<Value>,
) -> Result<HttpResponse, ApiError> {
    pipeline(state, caller, body.into_inner(), "/run").await
}

/// `POST /chat/completions`: the same pipeline for OpenAI SDKs (mounted when enabled).
#[utoipa::path(post, path = "/api/v1/chat/completions", tag = "gateway",
    request_body(content = Object, description = "OpenAI chat-completions body"),
    responses((status = 200, description = "An OpenAI chat completion or event stream"),
        (status = 401, description = "OpenAI-shaped error"), (status = 404, description = "not mounted (GC_CHAT_COMPLETIONS=false)")))]
pub async fn chat_completions(
    state: web::Data<AppState>,
    caller: Caller,
    body: Body<Value>,
) -> Result<HttpResponse, ApiError> {
    pipeline(state, caller, body.into_inner(), "/chat/completions").await
}

async fn pipeline(
    state: web::Data<AppState>,
    caller: Caller,
    body: Result<Value, ApiError>,
    route: &'static str,
) -> Result<HttpResponse, ApiError> {
    let gateways = state.gateways.clone();
    let configured: Vec<gc_domain::values::Region> = gc_domain::values::Region::ALL
        .into_iter()
        .filter(|r| gateways.region(*r).is_some())
        .collect();
    // One trip to the database: authenticate, apply the member rules and the key scope, check
    // the body, then load the region's usable keys and decide.
    let decided = caller
        .db(&state, move |store, p| {
            let tenant = RunScope::caller_tenant(p)?;
            // The body is judged only once the caller may run at all.
            let body = match body.and_then(|b| validate_body(&b).map_err(ApiError::from)) {
                Ok(body) => body,
                Err(e) => return Ok(Err(e)),
            };
            let configured = configured.contains(&tenant.region);
            let keys = if tenant.ai_enabled && configured {
                store.usable_ai_keys(tenant.id, tenant.region)?
            } else {
                Vec::new()
            };
            Ok(Ok((RunScope::authorize(p, keys, configured)?, body)))
        })
        .await?;
    let (scope, body) = decided?;
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let gateway = gateways
        .region(scope.region())
        .ok_or_else(|| DomainError::AiAccessNotReady("the gateway is not configured".into()))?
        .clone();

    let started = Instant::now();
    let mut last_error = None;
    for key in scope.keys_from(gateways.next_start()) {
        let binding = ai_key_binding(key.tenant_id, key.id);
        let secret = match gateways.sealer().open(&key.sealed_secret, &binding) {
            Ok(s) => Secret::new(s),
            Err(e) => {
                tracing::error!(key_id = %key.id, error = %e, "an AI key does not open with the master key");
                mark_not_ready(
                    &state,
                    key.id,
                    "the key cannot be decrypted with the current master key",
                )
                .await;
                continue;
            }
        };
        let template = RunTemplate {
            tenant_id: scope.tenant().id,
            actor: scope.actor().clone(),
            region: scope.region().as_str(),
            key_id: key.id,
            stream,
            route,
        };
        match gateway.chat(&secret, Value::Object(body.clone())).await {
            Ok(ChatOutcome::Complete(done)) => {
                state.recorder.record(template.activity(&done.report()));
                return Ok(HttpResponse::Ok()
                    .insert_header((CONTENT_TYPE, "application/json"))
                    .body(done.body));
            }
            Ok(ChatOutcome::Stream(run)) => {
                let recorder = state.recorder.clone();
                let run =
                    run.with_on_finish(move |report| recorder.record(template.activity(&report)));
                return Ok(HttpResponse::Ok()
                    .insert_header((CONTENT_TYPE, "text/event-stream"))
                    .insert_header((CACHE_CONTROL, "no-cache"))
                    .insert_header(("x-accel-buffering", "no"))
                    .streaming(run));
            }
            Err(e) if e.is_key_rejected() => {
                tracing::warn!(key_id = %key.id, status = ?e.upstream_status(), "the gateway rejected an AI key; trying the next");
                mark_not_ready(&state, key.id, "rejected by the gateway").await;
                last_error = Some(e);
            }
            Err(e) => {
                state.recorder.record(template.failed(&e, started));
                return Err(upstream_error(&e));
            }
        }
    }
    Err(match last_error {
        Some(e) => ApiError::new(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            format!(
                "every ready {} key was rejected by the gateway (last: {e})",
                scope.region().as_str()
            ),
        ),
        None => DomainError::AiAccessNotReady("no usable key".into()).into(),
    })
}

async fn mark_not_ready(state: &AppState, key_id: uuid::Uuid, reason: &'static str) {
    let result = state
        .db(move |store| {
            store.set_ai_key_status(key_id, AiKeyStatus::NotReady, Some(reason), Utc::now())
        })
        .await;
    if let Err(e) = result {
        tracing::error!(key_id = %key_id, error = %e, "could not mark an AI key not ready");
    }
}

/// What every run record of one request shares.
struct RunTemplate {
    tenant_id: uuid::Uuid,
    actor: gc_domain::workspace::Actor,
    region: &'static str,
    key_id: uuid::Uuid,
    stream: bool,
    route: &'static str,
}

impl RunTemplate {
    fn entry(&self, detail: Value) -> NewActivity {
        NewActivity {
            id: new_id(),
            tenant_id: self.tenant_id,
            at: Utc::now(),
            actor: self.actor.clone(),
            action: "run".into(),
            target: None,
            detail,
        }
    }

    fn activity(&self, report: &RunReport) -> NewActivity {
        self.entry(json!({
            "route": self.route,
            "model": report.model,
            "region": self.region,
            "key_id": self.key_id,
            "stream": self.stream,
            "status": report.status.as_str(),
            "latency_ms": report.latency_ms,
            "ttft_ms": report.ttft_ms,
            "usage": report.usage.as_ref().map(|u| json!({
                "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens,
                "total_tokens": u.total_tokens,
            })),
            "error": report.error_code,
        }))
    }

    fn failed(&self, e: &UpstreamError, started: Instant) -> NewActivity {
        self.entry(json!({
            "route": self.route,
            "region": self.region,
            "key_id": self.key_id,
            "stream": self.stream,
            "status": "error",
            "latency_ms": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "error": e.code(),
            "upstream_status": e.upstream_status(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_checked_and_providers_refused() {
        let ok = json!({"messages": [{"role": "user", "content": "hi"}], "temperature": 0.2, "stream": true});
        assert!(validate_body(&ok).is_ok());
        for field in PROVIDER_FIELDS {
            let mut b = ok.clone();
            b[field] = json!("x");
            assert_eq!(
                validate_body(&b).unwrap_err().code(),
                "provider_not_allowed"
            );
        }
        for bad in [
            json!({"messages": []}),
            json!({}),
            json!({"messages": [{"role": "wizard", "content": "x"}]}),
            json!({"messages": [{"role": "user"}]}),
            json!({"messages": [{"role": "user", "content": "x"}], "stream": "yes"}),
            json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}),
            json!({"messages": [{"role": "user", "content": "x"}], "model": 3}),
            json!([1]),
        ] {
            assert_eq!(
                validate_body(&bad).unwrap_err().code(),
                "validation_failed",
                "{bad}"
            );
        }
    }
}
