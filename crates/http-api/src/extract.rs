//! Extractors: the authenticated caller, the client IP, and checked JSON bodies.

use std::marker::PhantomData;
use std::net::IpAddr;

use actix_web::cookie::{Cookie, SameSite};
use actix_web::dev::Payload;
use actix_web::http::{header, Method};
use actix_web::{web, FromRequest, HttpMessage, HttpRequest};
use chrono::Utc;
use futures_util::future::LocalBoxFuture;
use gc_domain::policy::access::{Credential, Principal};
use gc_domain::services::accounts::{
    self, check_credential, CheckedCredential, Presented as Shown,
};
use gc_domain::DomainError;
use gc_domain::ErrorCode;

use crate::error::ApiError;
use crate::middleware::ShadowTenant;
use crate::state::AppState;

pub const SESSION_COOKIE: &str = "gc_session";

/// How a request presented itself, before any lookup.
enum Presented {
    Bearer(String),
    Cookie(String),
    Nothing,
}

fn presented(req: &HttpRequest) -> Result<Presented, ApiError> {
    if let Some(value) = req.headers().get(header::AUTHORIZATION) {
        let value = value
            .to_str()
            .map_err(|_| ApiError::from(DomainError::InvalidApiKey))?;
        return match value.split_once(' ') {
            Some((scheme, key)) if scheme.eq_ignore_ascii_case("bearer") => {
                Ok(Presented::Bearer(key.trim().to_owned()))
            }
            _ => Err(DomainError::Unauthenticated.into()),
        };
    }
    Ok(req.cookie(SESSION_COOKIE).map_or(Presented::Nothing, |c| {
        Presented::Cookie(c.value().to_owned())
    }))
}

fn state_of(req: &HttpRequest) -> Result<web::Data<AppState>, ApiError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| DomainError::Internal("application state missing".into()).into())
}

/// Cookie-authenticated writes must come from our own origin.
fn check_origin(req: &HttpRequest, state: &AppState) -> Result<(), ApiError> {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    let origin = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok());
    if origin == Some(state.http.public_origin.as_str()) {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::OriginMismatch,
            "cookie-authenticated writes must send an Origin header equal to the service's origin",
        ))
    }
}

/// Checks what needs no database: the key's checksum and the token's shape (both judged by the
/// domain), the Origin of cookie writes.
fn check(req: &HttpRequest, state: &AppState) -> Result<Option<CheckedCredential>, ApiError> {
    match presented(req)? {
        Presented::Nothing => Ok(None),
        Presented::Bearer(key)
            if key.starts_with(gc_domain::policy::admin_tokens::TOKEN_PREFIX) =>
        {
            let route = format!("{} {}", req.method(), req.path());
            let shown = Shown::AdminToken {
                raw: &key,
                admin_route: is_admin_route(req),
                writes: !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS),
                route: &route,
            };
            Ok(Some(check_credential(state.credentials.as_ref(), shown)?))
        }
        Presented::Bearer(key) => Ok(Some(check_credential(
            state.credentials.as_ref(),
            Shown::Bearer(&key),
        )?)),
        Presented::Cookie(token) => {
            let checked =
                check_credential(state.credentials.as_ref(), Shown::SessionToken(&token))?;
            check_origin(req, state)?;
            Ok(Some(checked))
        }
    }
}

/// True for a request routed to `/admin/**`, the only routes where an admin token is a
/// credential. The router's matched pattern is read, not the raw path, so no spelling of a path
/// can pass as another route.
fn is_admin_route(req: &HttpRequest) -> bool {
    req.match_pattern()
        .is_some_and(|pattern| pattern.starts_with("/api/v1/admin/"))
}

fn mark_shadow(req: &HttpRequest, principal: &Principal) {
    if let Some((tenant, _)) = principal.shadow() {
        req.extensions_mut().insert(ShadowTenant(tenant.id));
    }
    if let Credential::AdminToken { token_id, name, .. } = principal.credential() {
        // The audit line is in the database already; this puts the use in the log too.
        tracing::info!(
            admin_id = %principal.user().id,
            token_id = %token_id,
            token_name = %name,
            method = %req.method(),
            path = req.path(),
            "admin token used"
        );
    }
}

async fn authenticate(req: HttpRequest) -> Result<Option<Principal>, ApiError> {
    let state = state_of(&req)?;
    let Some(checked) = check(&req, &state)? else {
        return Ok(None);
    };
    let policy = state.policy;
    let principal = state
        .read(move |store| accounts::authenticate(store, &policy, &checked, Utc::now()))
        .await?;
    mark_shadow(&req, &principal);
    Ok(Some(principal))
}

/// Credentials checked without the database, for handlers on a hot path that authenticate and
/// do their reading in one storage call ([`Caller::read`]).
pub struct Caller {
    req: HttpRequest,
    checked: CheckedCredential,
}

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready((|| {
            let state = state_of(req)?;
            let checked = check(req, &state)?.ok_or(DomainError::Unauthenticated)?;
            Ok(Caller {
                req: req.clone(),
                checked,
            })
        })())
    }
}

impl Caller {
    /// The credential checked without the database, for a service that authenticates itself
    /// (`gc_domain::services::run`).
    pub fn credential(&self) -> CheckedCredential {
        self.checked.clone()
    }

    /// Marks the answer to the caller the service authenticated (a Shadow view's header, an
    /// admin token's log line); nothing when authentication failed.
    pub fn authenticated(&self, principal: Option<&Principal>) {
        if let Some(principal) = principal {
            mark_shadow(&self.req, principal);
        }
    }

    /// Authenticates and runs read `work` with the principal, in one call of
    /// [`AppState::read`]: on the serving thread when the store can answer at once, else in one
    /// blocking call. Both may run more than once, so `work` must be safe to repeat.
    pub async fn read<T, F>(self, state: &AppState, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: Fn(&dyn gc_domain::ports::Store, &Principal) -> gc_domain::DomainResult<T>
            + Send
            + 'static,
    {
        let (policy, checked) = (state.policy, self.checked);
        let done = state
            .read(move |store| with_principal(store, &policy, &checked, &work))
            .await?;
        shadowed(&self.req, done)
    }
}

/// Marks a Shadow view's answer and hands out the work's result.
fn shadowed<T>(
    req: &HttpRequest,
    (principal, out): (Principal, gc_domain::DomainResult<T>),
) -> Result<T, ApiError> {
    mark_shadow(req, &principal);
    Ok(out?)
}

/// Authenticates, then runs `work` with the principal. A refusal inside `work` still needs
/// the Shadow header, so the principal comes back either way.
fn with_principal<T>(
    store: &dyn gc_domain::ports::Store,
    policy: &accounts::AccountPolicy,
    checked: &CheckedCredential,
    work: impl FnOnce(&dyn gc_domain::ports::Store, &Principal) -> gc_domain::DomainResult<T>,
) -> gc_domain::DomainResult<(Principal, gc_domain::DomainResult<T>)> {
    let principal = accounts::authenticate(store, policy, checked, Utc::now())?;
    let out = work(store, &principal);
    Ok((principal, out))
}

/// An authenticated caller (session or workspace key), with the application state its handler
/// calls the service with: a handler's one extractor of both (`Auth(state, p): Auth`, decision
/// 0049). 401 without valid credentials.
pub struct Auth(pub web::Data<AppState>, pub Principal);

impl FromRequest for Auth {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let state = state_of(&req)?;
            authenticate(req)
                .await?
                .map(|p| Auth(state, p))
                .ok_or_else(|| DomainError::Unauthenticated.into())
        })
    }
}

/// A caller that may be anonymous; invalid credentials are still refused.
pub struct MaybeAuth(pub Option<Principal>);

impl FromRequest for MaybeAuth {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { Ok(MaybeAuth(authenticate(req).await?)) })
    }
}

/// The client's IP: the peer address, or the `X-Forwarded-For` entry added by the nearest
/// untrusted hop when the peer is a trusted proxy.
pub fn client_ip(req: &HttpRequest, state: &AppState) -> Option<IpAddr> {
    let peer = req.peer_addr().map(|a| a.ip())?;
    let trusted = |ip: &IpAddr| state.http.trusted_proxies.iter().any(|n| n.contains(ip));
    if !trusted(&peer) {
        return Some(peer);
    }
    let forwarded: Vec<IpAddr> = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|part| part.trim().parse().ok())
        .collect();
    Some(
        forwarded
            .into_iter()
            .rev()
            .find(|ip| !trusted(ip))
            .unwrap_or(peer),
    )
}

/// The session cookie for a new session.
pub fn session_cookie(token: &str, state: &AppState) -> Cookie<'static> {
    Cookie::build(SESSION_COOKIE, token.to_owned())
        .http_only(true)
        .same_site(SameSite::Lax)
        .path("/")
        .secure(state.http.secure_cookies())
        .max_age(actix_web::cookie::time::Duration::seconds(
            state.policy.session_absolute.num_seconds(),
        ))
        .finish()
}

/// A cookie that makes the browser forget the session.
pub fn expired_session_cookie(state: &AppState) -> Cookie<'static> {
    let mut cookie = session_cookie("", state);
    cookie.make_removal();
    cookie
}

/// The client's user agent, for the session list.
pub fn user_agent(req: &HttpRequest) -> String {
    req.headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .chars()
        .take(256)
        .collect()
}

/// For a body field that must be present but may be `null`: missing → `None`, `null` →
/// `Some(None)`. Use with `#[serde(default, deserialize_with = "crate::extract::nullable")]`.
///
/// A number with a zero fraction (`5.0`) is read as the integer it equals, as JSON Schema's
/// `integer` (and so the document) counts it.
pub fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::de::Error;
    let Some(mut value) = <Option<serde_json::Value> as serde::Deserialize>::deserialize(d)? else {
        return Ok(Some(None));
    };
    if let Some(f) = value.as_f64().filter(|_| value.is_f64()) {
        // Within ±2^53 every integer is exact as a float; beyond that leave it a float.
        if f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0 {
            #[allow(clippy::cast_possible_truncation)]
            let n = f as i64;
            value = serde_json::Value::from(n);
        }
    }
    serde_json::from_value(value)
        .map(Some)
        .map_err(D::Error::custom)
}

/// A body of fields that may each be left out (`None`: unchanged) or `null` (`Some(None)`:
/// removed), read by [`nullable`] and documented as `Option<T>`. Declares the struct with its
/// derives and `deny_unknown_fields`; each field is written `doc? name: Type` (an identifier
/// type: `i64`, `String`, `Uuid`).
macro_rules! nullable_body {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$field_meta:meta])* $field:ident: $ty:ident ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $(
                $(#[$field_meta])*
                #[serde(default, deserialize_with = "crate::extract::nullable")]
                #[schema(value_type = Option<$ty>)]
                pub $field: Option<Option<$ty>>,
            )*
        }
    };
}
pub(crate) use nullable_body;

/// A value that must be a JSON object: serde's derived structs also read a JSON array as their
/// fields in order, which no route's document allows (`[null, null]` is not a tenant patch).
pub struct Object<T>(pub T);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
            .map(Object)
    }
}

/// For an optional body field that must be an object when present (see [`Object`]). Use with
/// `#[serde(default, deserialize_with = "crate::extract::optional_object")]`.
pub fn optional_object<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    <Option<Object<T>> as serde::Deserialize>::deserialize(d).map(|o| o.map(|o| o.0))
}

/// A part of the request whose refusal is held back until the handler asks for it.
///
/// actix polls a handler's extractors together and answers with the first error that is
/// ready; a body error is ready at once while credentials still wait for the database. Handlers
/// take [`Body<T>`] or [`Query<T>`] and call [`Held::into_inner`] after their authorisation
/// checks, so a caller who may not write at all hears 401/403, not a complaint about the body
/// or the query.
pub struct Held<T, S>(Result<T, ApiError>, PhantomData<S>);

/// A JSON body (400, 413, 415, 422 held back).
pub type Body<T> = Held<T, JsonBody>;

/// A query string (400 held back).
pub type Query<T> = Held<T, QueryString>;

impl<T, S> Held<T, S> {
    pub fn into_inner(self) -> Result<T, ApiError> {
        self.0
    }

    /// The part, once the caller has passed `check` (evaluated first, as the argument): a
    /// refused caller hears the check's refusal, not a complaint about the part.
    pub fn after<X>(self, check: Result<X, DomainError>) -> Result<T, ApiError> {
        check?;
        self.0
    }
}

/// An optional field of a body, parsed by the domain rule that names it: absent stays `None`,
/// a refusal names `field`.
pub fn parse_field<T>(
    field: &str,
    value: Option<&str>,
    parse: impl FnOnce(&str, &str) -> Result<T, DomainError>,
) -> Result<Option<T>, DomainError> {
    value.map(|v| parse(field, v)).transpose()
}

/// What a [`Held`] part can be: anything serde reads.
pub trait Part: serde::de::DeserializeOwned + 'static {}

impl<T: serde::de::DeserializeOwned + 'static> Part for T {}

/// A part being read, or its refusal.
pub type Reading<T> = LocalBoxFuture<'static, Result<T, ApiError>>;

/// Where a [`Held`] part is read from, and its refusal.
pub trait HeldSource: 'static {
    fn read<T: Part>(req: &HttpRequest, payload: &mut Payload) -> Reading<T>;
}

/// The request's JSON body; every body is a JSON object (see [`Object`]).
pub struct JsonBody;

impl HeldSource for JsonBody {
    fn read<T: Part>(req: &HttpRequest, payload: &mut Payload) -> Reading<T> {
        let json = web::Json::<Object<T>>::from_request(req, payload);
        Box::pin(async move {
            json.await.map(|j| j.into_inner().0).map_err(|e| {
                e.as_error::<ApiError>()
                    .cloned()
                    .unwrap_or_else(|| ApiError::new(ErrorCode::InvalidBody, e.to_string()))
            })
        })
    }
}

/// The request's query string.
pub struct QueryString;

impl HeldSource for QueryString {
    fn read<T: Part>(req: &HttpRequest, _: &mut Payload) -> Reading<T> {
        let parsed = web::Query::<T>::from_query(req.query_string())
            .map(web::Query::into_inner)
            .map_err(|e| {
                ApiError::new(
                    ErrorCode::InvalidQuery,
                    format!("the query string is invalid: {e}"),
                )
            });
        Box::pin(std::future::ready(parsed))
    }
}

impl<T: Part, S: HeldSource> FromRequest for Held<T, S> {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let read = S::read::<T>(req, payload);
        Box::pin(async move { Ok(Held(read.await, PhantomData)) })
    }
}
