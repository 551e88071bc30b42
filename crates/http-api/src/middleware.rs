//! The outermost middleware: request ids, the uniform error body, the Shadow header, and
//! the deadline on reading request bodies.

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpResponse};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use uuid::Uuid;

use crate::error::ApiError;
use crate::state::AppState;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub const SHADOW_TENANT: HeaderName = HeaderName::from_static("x-shadow-tenant");

/// The id of the current request, in request extensions.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// Set by the credential extractor when the caller is in a Shadow view.
#[derive(Debug, Clone, Copy)]
pub struct ShadowTenant(pub Uuid);

/// Marks a response whose errors use OpenAI's shape (`/chat/completions`).
#[derive(Debug, Clone, Copy)]
pub struct OpenAiErrors;

/// A caller's id is echoed when it is sane: 1 to 128 visible ASCII characters.
pub fn sane(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_graphic())
}

pub async fn request_context(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let id = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| sane(v))
        .map_or_else(|| Uuid::now_v7().to_string(), str::to_owned);
    req.extensions_mut().insert(RequestId(id.clone()));
    let started = std::time::Instant::now();
    limit_body_time(&mut req);

    let res = next.call(req).await?.map_into_boxed_body();

    let status = res.status();
    let mut res = if status.as_u16() >= 400 {
        let api_error = res
            .response()
            .error()
            .and_then(|e| e.as_error::<ApiError>())
            .cloned();
        let is_json = res
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        match api_error {
            Some(e) => rewrite(res, &e, &id),
            None if !is_json => rewrite(res, &ApiError::from_status(status), &id),
            None => res,
        }
    } else {
        res
    };

    if let Ok(v) = HeaderValue::from_str(&id) {
        res.headers_mut().insert(REQUEST_ID, v);
    }
    // The path only: query strings and headers are never logged.
    tracing::info!(
        request_id = %id,
        method = %res.request().method(),
        path = %res.request().path(),
        status = res.status().as_u16(),
        latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "request"
    );
    if res.status() == actix_web::http::StatusCode::REQUEST_TIMEOUT {
        // The rest of a late body is not worth waiting for: close the connection.
        res.response_mut()
            .head_mut()
            .set_connection_type(actix_web::http::ConnectionType::Close);
    }
    // The route template, never the raw path: label values stay a small, fixed set.
    if let Some(state) = res.request().app_data::<actix_web::web::Data<AppState>>() {
        let route = res
            .request()
            .match_pattern()
            .unwrap_or_else(|| "unmatched".to_owned());
        state.metrics.http_request(
            res.request().method().as_str(),
            route,
            res.status().as_u16(),
        );
    }
    let shadow = res.request().extensions().get::<ShadowTenant>().copied();
    if let Some(ShadowTenant(tenant)) = shadow {
        if let Ok(v) = HeaderValue::from_str(&tenant.to_string()) {
            res.headers_mut().insert(SHADOW_TENANT, v);
        }
    }
    Ok(res)
}

fn rewrite(res: ServiceResponse<BoxBody>, e: &ApiError, id: &str) -> ServiceResponse<BoxBody> {
    let openai = res.request().extensions().get::<OpenAiErrors>().is_some();
    let body = if openai {
        let kind = match e.status().as_u16() {
            // OpenAI's word for a spent budget: its clients do not retry it.
            429 if e.code() == gc_domain::ErrorCode::BudgetExhausted => "insufficient_quota",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            429 => "rate_limit_error",
            s if s >= 500 => "api_error",
            _ => "invalid_request_error",
        };
        serde_json::json!({"error": {
            "code": e.code().as_str(),
            "message": e.message(),
            "type": kind,
            "param": e.param(),
            "request_id": id,
        }})
    } else {
        e.body(id)
    };
    res.map_body(|head, _| {
        head.headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        // Drop any length left from the old body.
        head.headers.remove(actix_web::http::header::CONTENT_LENGTH);
        BoxBody::new(body.to_string())
    })
}

/// The 404 for unknown routes.
pub async fn not_found() -> HttpResponse {
    HttpResponse::NotFound().finish()
}

/// The message of the I/O error a body stream ends with at its deadline.
const BODY_TIMEOUT: &str = "request body deadline passed";

/// True when a payload error is the body deadline of [`limit_body_time`].
pub fn is_body_timeout(e: &actix_web::error::PayloadError) -> bool {
    matches!(e, actix_web::error::PayloadError::Io(io)
        if io.kind() == std::io::ErrorKind::TimedOut && io.to_string() == BODY_TIMEOUT)
}

/// Wraps the request body in a deadline (`HttpSettings::body_timeout`, counted from the end of
/// the headers): a body still arriving then ends with an error that the JSON extractor answers
/// with 408 `request_timeout`, and the connection is closed. Headers have their deadline in
/// the server's connection layer (`gc_server::protocol`), but nothing bounds bodies, so without
/// this a client sending one byte a second would hold its connection for as long as it likes.
fn limit_body_time(req: &mut ServiceRequest) {
    use actix_web::http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
    let has_body = req.headers().contains_key(TRANSFER_ENCODING)
        || req
            .headers()
            .get(CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    if !has_body {
        return;
    }
    let timeout = req
        .app_data::<actix_web::web::Data<crate::AppState>>()
        .map_or(Duration::from_secs(10), |s| s.http.body_timeout);
    let payload = req.take_payload();
    let stream: Pin<
        Box<
            dyn futures_util::Stream<
                Item = Result<actix_web::web::Bytes, actix_web::error::PayloadError>,
            >,
        >,
    > = Box::pin(DeadlineBody {
        inner: payload,
        deadline: Box::pin(tokio::time::sleep(timeout)),
        done: false,
    });
    req.set_payload(actix_web::dev::Payload::from(stream));
}

/// A body stream that fails once its deadline has passed.
struct DeadlineBody {
    inner: actix_web::dev::Payload,
    deadline: Pin<Box<tokio::time::Sleep>>,
    done: bool,
}

impl futures_util::Stream for DeadlineBody {
    type Item = Result<actix_web::web::Bytes, actix_web::error::PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match futures_util::Stream::poll_next(Pin::new(&mut self.inner), cx) {
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(item)) => Poll::Ready(Some(item)),
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.done = true;
                    Poll::Ready(Some(Err(actix_web::error::PayloadError::Io(
                        std::io::Error::new(std::io::ErrorKind::TimedOut, BODY_TIMEOUT),
                    ))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}
