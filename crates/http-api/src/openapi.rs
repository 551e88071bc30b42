//! The OpenAPI document, generated from the route table (`routes.rs`: which handlers, and each
//! operation's access class) and the handlers' annotations. `cargo xtask openapi`
//! writes it to `docs/openapi.json`; a test fails when the file drifts, and `cargo xtask
//! api-check` tests the running server against it.
//!
//! The annotations give each route's method and path (checked against the table by
//! `every_documented_operation_is_a_declared_route`), body, answers and the errors peculiar to
//! it; this module adds what every route shares: the `Error` schema (its `code` enum generated
//! from `gc_domain::ErrorCode::ALL`), the security schemes, and from the access class the
//! table declares each operation's credentials and the statuses that kind of route can answer
//! whoever calls it (401 for bad credentials, 403 refusals, the body and query errors, 503).

use gc_domain::policy::records::nullable;
use gc_domain::ErrorCode;
use gc_domain::ErrorCode as C;
use serde_json::{json, Map, Value};
use utoipa::{Modify, OpenApi};

use crate::routes::{self, Access, Route};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "gc",
        description = "Multi-tenant workspace service with an AI gateway. Errors have the body \
            {\"error\": {\"code\", \"message\", \"request_id\"}}.",
        license(name = "Apache-2.0")
    ),
    tags(
        (name = "system", description = "Probes (liveness, readiness) and this document"),
        (name = "auth", description = "Accounts, sign-in and sessions"),
        (name = "admin", description = "Tenants and users (platform admins)"),
        (name = "workspace", description = "The tenant's stored records"),
        (name = "gateway", description = "Chat runs through the tenant's region gateway"),
        (name = "guard", description = "The agent-skill scanner"),
    ),
    modifiers(&Contract)
)]
pub struct ApiDoc;

/// The document as pretty JSON, as committed in `docs/openapi.json`.
pub fn document() -> String {
    serde_json::to_string_pretty(&document_json())
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The name of the shared error schema.
const ERROR: &str = "Error";
/// `/chat/completions` answers errors in OpenAI's shape.
const OPENAI_ERROR: &str = "OpenAiError";
const SESSION: &str = "session";
const KEY: &str = "workspace_key";
const ADMIN_TOKEN: &str = "admin_token";

/// The route the table declares for an operation of the document (`method` in lowercase,
/// `path` under `/api/v1`, parameter names as the annotation spells them). `None` for an
/// operation no route mounts, which `every_documented_operation_is_a_declared_route` rules out.
fn declared(method: &str, path: &str) -> Option<Route> {
    routes::all().find(|r| r.method.eq_ignore_ascii_case(method) && same_shape(r.path, path))
}

/// Whether two path templates are the same but for their parameters' names.
fn same_shape(a: &str, b: &str) -> bool {
    a.split('/').count() == b.split('/').count()
        && a.split('/')
            .zip(b.split('/'))
            .all(|(x, y)| x == y || (x.starts_with('{') && y.starts_with('{')))
}

/// What the document says of an operation no route declares: no credentials, no refusals.
const UNDECLARED: Route = Route {
    method: "",
    path: "",
    access: Access::Public,
    errors: &[],
    openai_errors: false,
};

/// The error statuses an operation can answer, each with its codes.
#[derive(Default)]
struct Statuses(std::collections::BTreeMap<String, Vec<ErrorCode>>);

impl Statuses {
    fn add(&mut self, status: &str, codes: &[ErrorCode]) {
        let entry = self.0.entry(status.to_owned()).or_default();
        for code in codes {
            if !entry.contains(code) {
                entry.push(*code);
            }
        }
    }

    /// Adds each code under its own status.
    fn codes(&mut self, codes: &[ErrorCode]) {
        for code in codes {
            self.add(&code.status().to_string(), &[*code]);
        }
    }
}

/// The member refusals every tenant-scoped route answers.
const MEMBER: [C; 3] = [C::MemberUnassigned, C::MemberSuspended, C::TenantSuspended];

/// The statuses of one operation: from its body and parameters, then from the access class
/// the route table declares, then the errors the table names as peculiar to the route.
fn statuses(method: &str, route: &Route, op: &Value) -> Statuses {
    let mut s = Statuses::default();
    let unsafe_method = method != "get";
    let params = op["parameters"].as_array().cloned().unwrap_or_default();
    let param = |kind: &str| params.iter().any(|p| p["in"] == kind);
    let named = |name: &str| params.iter().any(|p| p["name"] == name);
    if op.get("requestBody").is_some() {
        s.codes(&[
            C::InvalidJson,
            C::InvalidBody,
            C::PayloadTooLarge,
            C::UnsupportedMediaType,
            C::ValidationFailed,
        ]);
        if route.access != Access::Run {
            s.codes(&[C::UnknownField]);
        }
    }
    if param("query") {
        s.codes(&[C::InvalidQuery]);
    }
    if named("cursor") {
        s.codes(&[C::InvalidCursor]);
    }
    if param("path") {
        s.codes(&[C::NotFound]);
    }
    if named("If-Match") {
        s.codes(&[C::InvalidIfMatch, C::VersionConflict]);
    }
    let credentials = [C::Unauthenticated, C::InvalidApiKey];
    match route.access {
        Access::Public => {}
        Access::Guard => {
            s.codes(&credentials);
            s.codes(&[C::OriginMismatch, C::InsufficientScope]);
            s.codes(&MEMBER);
        }
        Access::Session
        | Access::Admin
        | Access::AdminSession
        | Access::KeyManagement
        | Access::Workspace(_) => {
            s.codes(&credentials);
            s.codes(&[C::ServiceUnavailable]);
            if unsafe_method {
                s.codes(&[C::OriginMismatch]);
            }
            match route.access {
                Access::Session => s.codes(&[C::SessionRequired]),
                Access::Admin | Access::AdminSession => {
                    s.codes(&[C::SessionRequired, C::AdminRequired, C::MemberSuspended]);
                    // An admin token may lack the scope; the session-only routes take none.
                    if route.access == Access::Admin {
                        s.codes(&[C::InsufficientScope]);
                    }
                }
                Access::KeyManagement => {
                    s.codes(&[C::SessionRequired]);
                    s.codes(&MEMBER);
                    if unsafe_method {
                        s.codes(&[C::ShadowReadOnly]);
                    }
                }
                _ => {
                    s.codes(&MEMBER);
                    s.codes(&[C::InsufficientScope]);
                    if unsafe_method {
                        s.codes(&[C::ShadowReadOnly]);
                    }
                }
            }
        }
        Access::Models | Access::Run => {
            s.codes(&credentials);
            s.codes(&MEMBER);
            s.codes(&[C::InsufficientScope, C::ShadowReadOnly]);
        }
    }
    // A run reaches the upstream (and takes a session's unsafe method); the model list does not.
    match route.access {
        Access::Models => s.codes(&[C::ServiceUnavailable]),
        Access::Run => {
            s.codes(&[
                C::OriginMismatch,
                C::AiAccessDisabled,
                C::AiAccessNotReady,
                C::ProviderNotAllowed,
                C::ModelNotAllowed,
                C::RateLimited,
                C::BudgetExhausted,
                C::UpstreamRateLimited,
                C::UpstreamError,
                C::ServiceUnavailable,
                C::Busy,
                C::UpstreamTimeout,
            ]);
            s.add("4XX", &[C::UpstreamRejected]);
        }
        _ => {}
    }
    s.codes(route.errors);
    s
}

/// The answers a route's declaration implies, described once here rather than on each
/// handler: a run's 503 (its class), a password check's 503 (`Busy` among its errors), a usage
/// report's 503 and 422 (its path), and the 401 and 404 of the OpenAI routes mounted only with
/// `GC_CHAT_COMPLETIONS` (their table, [`routes::CHAT_ROUTES`]).
fn declared_answers(route: &Route) -> Vec<(&'static str, &'static str)> {
    let mut answers = Vec::new();
    if route.access == Access::Run {
        answers.push((
            "503",
            "busy: the run-record writer is behind and has no place for this run's record, \
             refused before any quota is counted (retry after Retry-After); service_unavailable: \
             the database did not answer",
        ));
    }
    // Every other route that can answer `busy` checks a password on the shared hashing queue.
    if route.access != Access::Run && route.errors.contains(&ErrorCode::Busy) {
        answers.push((
            "503",
            "busy: the password-hashing queue is full (Retry-After)",
        ));
    }
    // The usage reports share one gate of running reports and one range of days.
    if route.path.ends_with("/usage") {
        answers.push((
            "503",
            "busy: every tenant's reports already running (`GC_USAGE_REPORTS_MAX`); `Retry-After`",
        ));
        answers.push((
            "422",
            "validation_failed: a day that does not exist, `to` before `from`, or a range of \
             more than 400 days",
        ));
    }
    if routes::CHAT_ROUTES.iter().any(|r| r.contains(route)) {
        answers.push(("401", "OpenAI-shaped error"));
        answers.push(("404", "not mounted (GC_CHAT_COMPLETIONS=false)"));
    }
    answers
}

/// The security requirements of an operation.
fn security(access: Access) -> Value {
    match access {
        Access::Public => json!([]),
        Access::Guard => json!([{}, {SESSION: []}, {KEY: ["guard:scan"]}]),
        Access::Admin => json!([{SESSION: []}, {ADMIN_TOKEN: ["admin"]}]),
        Access::Session | Access::AdminSession | Access::KeyManagement => json!([{SESSION: []}]),
        Access::Workspace(scope) => json!([{SESSION: []}, {KEY: [scope]}]),
        Access::Run | Access::Models => json!([{SESSION: []}, {KEY: ["run"]}]),
    }
}

fn error_schema(openai: bool) -> Value {
    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    let mut properties = json!({
        "code": {"type": "string", "enum": codes, "description": "Stable, snake_case; see docs/api.md."},
        "message": {"type": "string", "description": "A human sentence; it names the field of a validation error."},
        "request_id": {"type": "string", "description": "The request's `x-request-id`."}
    });
    let mut required = vec!["code", "message", "request_id"];
    if openai {
        properties["type"] = json!({"type": "string", "enum": [
            "authentication_error", "permission_error", "not_found_error", "rate_limit_error",
            "api_error", "invalid_request_error"
        ]});
        properties["param"] =
            json!({"type": ["string", "null"], "description": "The offending field, if any."});
        required.extend(["type", "param"]);
    }
    json!({
        "type": "object",
        "description": if openai {
            "An error in OpenAI's shape: gc's code, message and request id, with `type` and `param`."
        } else {
            "The body of every answer with status 400 or above."
        },
        "required": ["error"],
        "additionalProperties": false,
        "properties": {"error": {
            "type": "object",
            "required": required,
            "additionalProperties": false,
            "properties": properties
        }}
    })
}

/// An email address as `gc_domain::values::Email` accepts it (ASCII addresses; the server also
/// takes some others).
fn email_schema() -> Value {
    json!({
        "type": "string",
        "maxLength": 254,
        "pattern": "^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,40}(\\.[A-Za-z0-9-]{1,40}){1,3}$",
        "description": "An email address; case-insensitive."
    })
}

/// A new password: 12 to 72 bytes, never truncated (the pattern keeps to printable ASCII,
/// where bytes and characters agree).
fn password_schema() -> Value {
    json!({
        "type": "string",
        "minLength": 12,
        "maxLength": 72,
        "pattern": "^[\\x20-\\x7E]*$",
        "description": "12 to 72 bytes; never silently truncated. Refused (422 `validation_failed`) when guessable: only whitespace, fewer than 5 different characters, a repeated unit or a keyboard, letter or digit run, a common password (also with digits or symbols around it), or holding the account's email or its name part."
    })
}

fn one_of(values: &[&str]) -> Value {
    json!({"type": "string", "enum": values})
}

fn uuid(nullable: bool) -> Value {
    json!({"type": if nullable { json!(["string", "null"]) } else { json!("string") }, "format": "uuid"})
}

/// A quota as `gc_domain::policy::quota::limit_value` accepts it: a positive integer up to 10^12, or
/// null for none.
fn limit_schema() -> Value {
    json!({"type": ["integer", "null"], "minimum": 1, "maximum": gc_domain::policy::quota::MAX_LIMIT,
           "description": "A positive integer (at most 10^12), or null for no limit."})
}

/// A day of the usage routes: `YYYY-MM-DD` (UTC), or empty for the default. The server reads
/// any date chrono parses; the pattern states the canonical form.
fn day_schema() -> Value {
    json!({"type": "string",
           "pattern": "^([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]))?$"})
}

/// A usage cursor: the base64url (no padding) of the previous page's last group key. The
/// server takes any such encoding of UTF-8 text; the pattern states the encodings of ASCII
/// text (every key of days, tenants and keys; model names in practice), per 3-byte group.
fn usage_cursor_schema() -> Value {
    let (c1, c2, c3, c4) = (
        "[A-Za-f]",
        "[A-HQ-Xg-nw-z0-3]",
        "[ABEFIJMNQRUVYZcdghklopstwx014589]",
        "[A-Za-z0-9_-]",
    );
    json!({"type": "string",
           "pattern": format!("^({c1}{c2}{c3}{c4})*({c1}[AQgw]|{c1}{c2}[AEIMQUYcgkosw048])?$"),
           "description": "The `next_cursor` of the previous page (opaque; empty for the first page)."})
}

/// The characters Rust's `str::trim` removes (Unicode `White_Space`), spelled out: `\s` means
/// other sets in Python's and ECMAScript's regular expressions.
const WHITE_SPACE: &str =
    r"\t\n\u000B\f\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000";

/// The characters `char::is_control` names (Unicode `Cc`).
const CONTROL: &str = r"\u0000-\u001F\u007F-\u009F";

/// A money limit as `gc_domain::policy::prices::money_limit` takes it (`parse_money` after a trim):
/// digits with at most one point, at most 12 digits before it and 1 to 9 after it, more than
/// zero and at most 10^9. The pattern is exactly that rule: whole units 1 to 999,999,999
/// (leading zeros within the 12 digits) with any decimals; no whole units (or only zeros)
/// with a decimal that is not zero; or exactly 10^9.
fn money_schema(whose: &str) -> Value {
    let units: Vec<String> = (1..=9)
        .map(|s| format!("0{{0,{}}}[1-9][0-9]{{{}}}", 12 - s, s - 1))
        .collect();
    let fractions: Vec<String> = (0..=8)
        .map(|z| format!("0{{{z}}}[1-9][0-9]{{0,{}}}", 8 - z))
        .collect();
    json!({
        "type": ["string", "null"],
        "pattern": format!(
            "^[{WHITE_SPACE}]*(({})(\\.[0-9]{{1,9}})?|0{{0,12}}\\.({})|0{{0,2}}1000000000(\\.0{{1,9}})?)[{WHITE_SPACE}]*$",
            units.join("|"),
            fractions.join("|")
        ),
        "description": format!("Money per UTC month in the deployment's currency, a decimal string (`\"25.00\"`): digits with at most 9 decimals, more than 0 and at most 10^9 (surrounding white space is ignored){whose}; null: no limit.")
    })
}

/// An RFC 3339 time in the future, or null. The server takes any such time; the pattern
/// describes a safe subset (from the year 2100).
fn future_time_schema(what: &str) -> Value {
    json!({"type": ["string", "null"],
           "pattern": "^2[1-9][0-9]{2}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z$",
           "description": format!("An RFC 3339 time in the future (the server takes any such time; the pattern describes a safe subset); absent or null: {what}.")})
}

/// A tenant's `allowed_models` as `gc_domain::policy::models::allowed_models` takes it: null, or at
/// most 100 names, each (trimmed) 1 to 200 bytes without control characters and not `auto`.
/// The pattern states the trimming exactly and at most 50 characters once trimmed, which are
/// at most 200 bytes (a byte count has no JSON Schema keyword).
fn allowed_models_schema() -> Value {
    let name = format!(
        "^[{WHITE_SPACE}]*[^{WHITE_SPACE}{CONTROL}]([^{CONTROL}]{{0,48}}[^{WHITE_SPACE}{CONTROL}])?[{WHITE_SPACE}]*$"
    );
    json!({
        "type": ["array", "null"],
        "maxItems": gc_domain::policy::models::MAX_ALLOWED_MODELS,
        "items": {
            "type": "string",
            "pattern": name,
            "not": {"pattern": format!("^[{WHITE_SPACE}]*auto[{WHITE_SPACE}]*$")}
        },
        "description": "The models the tenant's runs may name (within the region's list), at most 100 names of 1 to 200 bytes (trimmed; no control characters; not `auto`; duplicates collapse); null: the region's list."
    })
}

/// A run's `model`: a name (not only white space, at most 200 bytes; the schema states at
/// most 50 characters) or `auto`.
fn model_schema(required: bool) -> Value {
    let mut schema = json!({
        "type": "string",
        "maxLength": 50,
        "pattern": format!("[^{WHITE_SPACE}]"),
    });
    if required {
        schema["not"] = json!({"const": "auto"});
        schema["description"] =
            json!("A model name (`auto` names the region's chat model and is refused here).");
    } else {
        schema = nullable(schema);
        schema["description"] = json!("Default `auto`: the region's default model.");
    }
    schema
}

/// A positive whole number (the server takes up to 2^64 - 1 as an integer literal; the schema
/// states the 32-bit range OpenAI's clients send).
fn positive_schema() -> Value {
    json!({"type": ["integer", "null"], "minimum": 1, "maximum": u32::MAX})
}

/// The fields a run body may not hold (`gc_domain::policy::runs::PROVIDER_FIELDS`: 422
/// `provider_not_allowed`).
fn no_provider_fields() -> Value {
    let each: Vec<Value> = gc_domain::policy::runs::PROVIDER_FIELDS
        .iter()
        .map(|f| json!({"required": [f]}))
        .collect();
    json!({"anyOf": each})
}

/// The body of `POST /responses`, as `gc_domain::policy::runs::validate_responses_body` checks it.
fn responses_request_schema() -> Value {
    let max = gc_domain::policy::runs::MAX_INPUT_ITEMS;
    json!({
        "type": "object",
        "description": "OpenAI's Responses body. A `provider`, `base_url`, `api_key`, `region` or `gateway` field is refused (422 `provider_not_allowed`); other OpenAI parameters pass through.",
        "required": ["input"],
        "not": no_provider_fields(),
        "properties": {
            "input": {"oneOf": [
                {"type": "string", "minLength": 1},
                {"type": "array", "minItems": 1, "maxItems": max, "items": {
                    "type": "object",
                    "description": "A message `{role, content}` or a typed item.",
                    "properties": {"role": one_of(&["system", "developer", "user", "assistant", "tool"])}
                }}
            ], "description": "Text, or 1 to 2048 items (messages or typed items)."},
            "model": model_schema(false),
            "instructions": {"type": ["string", "null"]},
            "max_output_tokens": positive_schema(),
            "stream": {"type": ["boolean", "null"], "description": "true: `text/event-stream` with the upstream's event names."}
        }
    })
}

/// The body of `POST /embeddings`, as `gc_domain::policy::runs::validate_embeddings_body` checks it.
fn embeddings_request_schema() -> Value {
    let max = gc_domain::policy::runs::MAX_INPUT_ITEMS;
    let token = json!({"type": "integer", "minimum": 0, "maximum": u32::MAX});
    json!({
        "type": "object",
        "description": "OpenAI's embeddings body. A `provider`, `base_url`, `api_key`, `region` or `gateway` field is refused (422 `provider_not_allowed`); other OpenAI parameters pass through.",
        "required": ["model", "input"],
        "not": no_provider_fields(),
        "properties": {
            "model": model_schema(true),
            "input": {"oneOf": [
                {"type": "string", "minLength": 1},
                {"type": "array", "minItems": 1, "maxItems": max, "items": {"anyOf": [
                    {"type": "string", "minLength": 1},
                    token.clone(),
                    {"type": "array", "minItems": 1, "items": token}
                ]}}
            ], "description": "Text, or 1 to 2048 items: non-empty strings, tokens, or non-empty token arrays."},
            "encoding_format": {"type": ["string", "null"], "enum": ["float", "base64", null]},
            "dimensions": positive_schema(),
            "stream": {"enum": [false, null], "description": "Embeddings do not stream."}
        }
    })
}

/// The constraints the server enforces on the typed request bodies, from the same domain rules
/// (`gc_domain::values`, `gc_domain::policy::records::text_schema`). Each entry replaces one property.
fn body_constraints() -> Vec<(&'static str, &'static str, Value)> {
    use gc_domain::policy::records::text_schema;
    let region = one_of(&["AIHK", "AICA"]);
    let status = one_of(&["active", "suspended"]);
    let role = one_of(&["member", "platform_admin"]);
    let scopes: Vec<&str> = gc_domain::model::workspace::KeyScope::ALL
        .iter()
        .map(|s| s.as_str())
        .collect();
    vec![
        ("SignupBody", "email", email_schema()),
        ("SignupBody", "password", password_schema()),
        ("SignupBody", "name", text_schema(1, 100)),
        ("ChangePasswordBody", "new_password", password_schema()),
        ("PatchMeBody", "name", nullable(text_schema(1, 100))),
        ("CreateTenantBody", "name", text_schema(1, 100)),
        ("CreateTenantBody", "region", region.clone()),
        ("PatchTenantBody", "name", nullable(text_schema(1, 100))),
        ("PatchTenantBody", "status", nullable(status.clone())),
        ("PatchTenantBody", "region", nullable(region.clone())),
        ("CreateUserBody", "email", email_schema()),
        ("CreateUserBody", "name", text_schema(1, 100)),
        ("CreateUserBody", "password", password_schema()),
        ("CreateUserBody", "role", nullable(role.clone())),
        ("PatchUserBody", "name", nullable(text_schema(1, 100))),
        ("PatchUserBody", "role", nullable(role)),
        ("PatchUserBody", "status", nullable(status)),
        ("AssignTenantBody", "tenant_id", uuid(true)),
        ("IpAdminBody", "tenant_id", uuid(true)),
        ("CreateAiKeyBody", "region", region.clone()),
        (
            "CreateAiKeyBody",
            "secret",
            json!({"type": "string", "pattern": "^[\\x21-\\x7E]{1,1024}$",
                   "description": "The provider key: 1 to 1024 visible characters. Sealed at rest, never returned."}),
        ),
        ("CreateAiKeyBody", "label", nullable(text_schema(0, 100))),
        ("DiagnosticsBody", "region", nullable(region)),
        ("CreateApiKeyBody", "name", text_schema(1, 100)),
        ("PatchApiKeyBody", "name", nullable(text_schema(1, 100))),
        ("KeyLimitsBody", "requests_per_minute", limit_schema()),
        ("KeyLimitsBody", "tokens_per_minute", limit_schema()),
        ("TenantLimitsBody", "requests_per_minute", limit_schema()),
        ("TenantLimitsBody", "tokens_per_minute", limit_schema()),
        ("TenantLimitsBody", "monthly_tokens", limit_schema()),
        ("TenantLimitsBody", "monthly_spend", money_schema("")),
        (
            "KeyLimitsBody",
            "monthly_spend",
            money_schema(", at most the tenant's"),
        ),
        ("PatchTenantBody", "allowed_models", allowed_models_schema()),
        ("CreateAdminTokenBody", "name", text_schema(1, 100)),
        (
            "CreateAdminTokenBody",
            "scope",
            one_of(&[
                gc_domain::policy::admin_tokens::AdminTokenScope::Admin.as_str(),
                gc_domain::policy::admin_tokens::AdminTokenScope::AdminRead.as_str(),
            ]),
        ),
        (
            "CreateAdminTokenBody",
            "expires_at",
            future_time_schema("the token does not expire"),
        ),
        (
            "CreateApiKeyBody",
            "scopes",
            json!({"type": "array", "minItems": 1, "items": {"type": "string", "enum": scopes},
                   "description": "Duplicates collapse."}),
        ),
        (
            "CreateApiKeyBody",
            "expires_at",
            future_time_schema("never expires"),
        ),
        ("ScanBody", "mode", one_of(&[crate::guard::MODE_SKILL])),
        (
            "ScanBody",
            "target",
            json!({
                "type": "string",
                "description": "Exactly `https://github.com/OWNER/REPO` (optional trailing `/` or `.git`), or pasted content. Any other address (other hosts, IP literals, ports, credentials, deeper paths, `http:`, `ssh:`, `git@`, `file:`, MCP/SSE endpoints) is refused with `target_not_allowed`, a ZIP archive with `archive_not_accepted`. Single-line text that does not look like an address is content too; the schema describes multi-line content.",
                "anyOf": [
                    {"pattern": "^https://github\\.com/[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$"},
                    {"pattern": "^[^PUpu\\s][\\s\\S]*\\n[\\s\\S]*\\S[\\s\\S]*$"}
                ]
            }),
        ),
    ]
}

/// The body of `/run` and `/chat/completions`: OpenAI's chat-completions shape. Other OpenAI
/// parameters pass through; the provider cannot be chosen.
fn chat_request_schema() -> Value {
    let content =
        json!({"type": ["string", "array"], "description": "Text, or OpenAI content parts."});
    let properties = json!({
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": {"anyOf": [
                {"type": "object", "required": ["role", "content"], "properties": {
                    "role": {"type": "string", "enum": ["system", "developer", "user", "tool"]},
                    "content": content
                }},
                {"type": "object", "required": ["role"], "properties": {
                    "role": {"type": "string", "enum": ["assistant"]},
                    "content": nullable(content.clone())
                }}
            ]}
        },
        "model": {"type": ["string", "null"], "maxLength": 50, "pattern": "\\S",
                  "description": "Default `auto`: the region's default model. The server takes up to 200 bytes."},
        "stream": {"type": ["boolean", "null"], "description": "true: `text/event-stream` ending with `data: [DONE]`."},
        "max_tokens": {"type": ["integer", "null"], "minimum": 1, "maximum": 4294967295_u64}
    });
    json!({
        "type": "object",
        "description": "OpenAI's chat-completions body. A `provider`, `base_url`, `api_key`, `region` or `gateway` field is refused (422 `provider_not_allowed`); other OpenAI parameters pass through.",
        "required": ["messages"],
        "properties": properties
    })
}

/// The answer of a non-streaming run: the upstream's completion object.
fn completion_schema() -> Value {
    json!({
        "type": "object",
        "description": "The upstream's OpenAI chat completion, passed through.",
        "required": ["choices"],
        "properties": {
            "id": {"type": "string"},
            "object": {"type": "string"},
            "created": {"type": "integer"},
            "model": {"type": "string"},
            "choices": {"type": "array"},
            "usage": {"type": ["object", "null"]}
        }
    })
}

/// Schemas of the Guard's answers (the guard crate has no schema derive).
fn guard_schemas(schemas: &mut Map<String, Value>) {
    let severity = one_of(&["info", "low", "medium", "high", "critical"]);
    schemas.insert(
        "GuardDescription".into(),
        json!({
            "type": "object",
            "required": ["modes", "limits", "rules"],
            "properties": {
                "modes": {"type": "array", "items": {"type": "string"}},
                "limits": {"type": "object", "properties": {
                    "max_download_bytes": {"type": "integer"},
                    "max_unpacked_bytes": {"type": "integer"},
                    "max_files": {"type": "integer"},
                    "max_file_bytes": {"type": "integer"},
                    "timeout_ms": {"type": "integer"}
                }},
                "rules": {"type": "array", "items": {"type": "object", "required": ["id", "severity", "title"],
                    "properties": {"id": {"type": "string"}, "severity": severity, "title": {"type": "string"}}}}
            }
        }),
    );
    let capabilities = json!({"type": "array", "items": {
        "type": "object",
        "required": ["what", "detail", "line", "role", "why"],
        "properties": {
            "what": {"type": "string"},
            "detail": {"type": "string"},
            "path": {"type": "string"},
            "line": {"type": "integer", "minimum": 1},
            "role": one_of(&["install", "runs", "carried"]),
            "why": {"type": "string"}
        }
    }});
    schemas.insert(
        "ScanResult".into(),
        json!({
            "type": "object",
            "required": ["verdict", "mode", "target", "findings", "stats", "inventory"],
            "properties": {
                "verdict": one_of(&["pass", "warn", "fail"]),
                "mode": one_of(&[crate::guard::MODE_SKILL]),
                "target": {"type": "object", "required": ["kind"], "properties": {
                    "kind": one_of(&["content", "repository"]),
                    "owner": {"type": "string"},
                    "repo": {"type": "string"},
                    "ref": {"type": "string", "description": "The commit that was scanned."}
                }},
                "findings": {"type": "array", "items": {
                    "type": "object",
                    "required": ["rule_id", "severity", "title", "message", "line", "column", "excerpt"],
                    "properties": {
                        "rule_id": {"type": "string"},
                        "severity": severity,
                        "title": {"type": "string"},
                        "message": {"type": "string"},
                        "path": {"type": "string"},
                        "line": {"type": "integer", "minimum": 1},
                        "column": {"type": "integer", "minimum": 1},
                        "excerpt": {"type": "string"}
                    }
                }},
                "inventory": {"type": "object", "description": "What the skill can do, from every file: what it executes, what sensitive data it reads, where it sends data, what it downloads, what it persists, which supply chain it changes; each item says whether its file runs at install time, runs, or is only carried (tests, documentation, CI, locale). At most 40 items per list (`truncated`).",
                    "required": ["executes", "reads", "sends", "downloads", "persists", "supply_chain", "truncated"],
                    "properties": {
                        "executes": capabilities.clone(),
                        "reads": capabilities.clone(),
                        "sends": capabilities.clone(),
                        "downloads": capabilities.clone(),
                        "persists": capabilities.clone(),
                        "supply_chain": capabilities.clone(),
                        "obfuscation": capabilities,
                        "truncated": {"type": "boolean"}
                    }},
                "stats": {"type": "object", "required": ["files_scanned", "files_skipped", "bytes_scanned", "duration_ms"],
                    "properties": {
                        "files_scanned": {"type": "integer", "minimum": 0},
                        "files_skipped": {"type": "integer", "minimum": 0},
                        "bytes_scanned": {"type": "integer", "minimum": 0},
                        "duration_ms": {"type": "integer", "minimum": 0},
                        "findings_truncated": {"type": "integer", "minimum": 0}
                    }}
            }
        }),
    );
    schemas.insert(
        "Sarif".into(),
        json!({
            "type": "object",
            "description": "A SARIF 2.1.0 log (`?format=sarif`).",
            "required": ["version", "runs"],
            "properties": {
                "version": {"const": "2.1.0"},
                "$schema": {"type": "string"},
                "runs": {"type": "array", "items": {"type": "object"}}
            }
        }),
    );
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn json_content(name: &str) -> Value {
    json!({"application/json": {"schema": schema_ref(name)}})
}

/// The record bodies, generated from `gc_domain::policy::records`' field tables: (method, path,
/// schema name, schema). Each record kind is created on its list path and patched on its own
/// path, as `<name>Create` and `<name>Patch`; the settings are patched.
fn record_bodies() -> Vec<(&'static str, &'static str, String, Value)> {
    use gc_domain::model::workspace::RecordKind as K;
    use gc_domain::policy::records::{body_schema, settings_schema};
    const KINDS: [(&str, &str, &str, K); 4] = [
        (
            "/workspace/skills",
            "/workspace/skills/{id}",
            "Skill",
            K::Skill,
        ),
        (
            "/workspace/memory",
            "/workspace/memory/{id}",
            "MemoryCollection",
            K::MemoryCollection,
        ),
        (
            "/workspace/memory/{collectionId}/sources",
            "/workspace/memory/{collectionId}/sources/{id}",
            "MemorySource",
            K::MemorySource,
        ),
        (
            "/workspace/drafts/{kind}",
            "/workspace/drafts/{kind}/{id}",
            "Draft",
            K::AgentDraft,
        ),
    ];
    let mut bodies: Vec<_> = KINDS
        .iter()
        .flat_map(|&(list, item, name, kind)| {
            [
                (
                    "post",
                    list,
                    format!("{name}Create"),
                    body_schema(kind, true),
                ),
                (
                    "patch",
                    item,
                    format!("{name}Patch"),
                    body_schema(kind, false),
                ),
            ]
        })
        .collect();
    bodies.push((
        "patch",
        "/workspace/settings",
        "SettingsPatch".into(),
        settings_schema(),
    ));
    bodies
}

/// Adds the shared `Error` schemas (the `code` enum generated from `ErrorCode::ALL`) and the
/// security schemes to the generated document. The per-operation rules are applied to the
/// JSON by [`document_json`], as utoipa's types cannot hold every JSON Schema keyword used.
pub struct Contract;

impl Modify for Contract {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for (name, openai) in [(ERROR, false), (OPENAI_ERROR, true)] {
            match serde_json::from_value::<utoipa::openapi::schema::Schema>(error_schema(openai)) {
                Ok(schema) => {
                    components.schemas.insert(name.into(), schema.into());
                }
                Err(e) => tracing::error!(error = %e, "the error schema does not build"),
            }
        }
        if let Some(schemes) = security_schemes().as_object() {
            for (name, scheme) in schemes {
                match serde_json::from_value::<utoipa::openapi::security::SecurityScheme>(
                    scheme.clone(),
                ) {
                    Ok(scheme) => components.add_security_scheme(name, scheme),
                    Err(e) => tracing::error!(error = %e, "a security scheme does not build"),
                }
            }
        }
    }
}

/// The whole document as JSON: the generated one with the per-operation contract applied.
pub fn document_json() -> Value {
    let mut api = ApiDoc::openapi();
    api.merge(routes::ApiPaths::openapi());
    api.merge(routes::ChatPaths::openapi());
    let mut doc = serde_json::to_value(api).unwrap_or_default();
    contract(&mut doc);
    doc
}

fn security_schemes() -> Value {
    json!({
        SESSION: {
            "type": "apiKey",
            "in": "cookie",
            "name": crate::extract::SESSION_COOKIE,
            "description": "The session cookie set by `POST /auth/signin` and `POST /auth/signup` (HttpOnly, SameSite=Lax, Secure when the public origin is https). A cookie-authenticated request with a method other than GET, HEAD or OPTIONS must carry an `Origin` header equal to the service's public origin (`GC_PUBLIC_ORIGIN`), else 403 `origin_mismatch`."
        },
        KEY: {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "gc_<base62><crc32>",
            "description": "A workspace key, `Authorization: Bearer gc_...`, created with `POST /workspace/api-keys`. Scopes: `workspace:read` (GET on /workspace/**), `workspace:write` (POST/PATCH/DELETE on /workspace/**), `guard:scan` (POST /guard/scan), `run` (/run, /chat/completions and /models); a missing scope is 403 `insufficient_scope`. Not accepted on /auth/**, /admin/** or /workspace/api-keys/** (403 `session_required`). Exempt from the Origin rule. A revoked or expired key is 401 `invalid_api_key`."
        },
        ADMIN_TOKEN: {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "gca_<base62><crc32>",
            "description": "A platform admin's token, `Authorization: Bearer gca_...`, created with `POST /admin/tokens` (a session only). Accepted on /admin/** only (anywhere else 401 `invalid_api_key`), never on /admin/tokens/** (403 `session_required`); exempt from the Origin rule. Scopes: `admin` (every such route) or `admin:read` (GET only, else 403 `insufficient_scope`). It acts as its admin, judged on every request: a suspended admin's token is 403 `member_suspended`, a demoted admin's 403 `admin_required`, a deleted admin's, revoked or expired token 401 `invalid_api_key`. Every use is recorded (admin, token, route)."
        }
    })
}

fn contract(doc: &mut Value) {
    let components = &mut doc["components"];
    let schemas = &mut components["schemas"];
    if !schemas.is_object() {
        *schemas = json!({});
    }
    let Some(schemas) = schemas.as_object_mut() else {
        return;
    };
    schemas.insert("ChatRequest".into(), chat_request_schema());
    schemas.insert("ChatCompletion".into(), completion_schema());
    schemas.insert("ResponsesRequest".into(), responses_request_schema());
    schemas.insert("EmbeddingsRequest".into(), embeddings_request_schema());
    guard_schemas(schemas);
    for (schema, property, constraint) in body_constraints() {
        if let Some(p) = schemas
            .get_mut(schema)
            .and_then(|s| s.get_mut("properties"))
            .and_then(|p| p.get_mut(property))
        {
            let description = p.get("description").cloned();
            *p = constraint;
            if let (Some(d), None) = (description, p.get("description")) {
                p["description"] = d;
            }
        }
    }
    // Bodies whose field may be null but must be present.
    for schema in ["AssignTenantBody", "IpAdminBody"] {
        if let Some(s) = schemas.get_mut(schema) {
            s["required"] = json!(["tenant_id"]);
        }
    }
    let records = record_bodies();
    for (_, _, name, schema) in &records {
        schemas.insert(name.clone(), schema.clone());
    }

    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for (full, item) in paths.iter_mut() {
        let path = full.strip_prefix("/api/v1").unwrap_or(full);
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            let route = declared(method, path).unwrap_or(UNDECLARED);
            op["security"] = security(route.access);
            if let Some((_, _, name, _)) = records
                .iter()
                .find(|(m, p, _, _)| *m == method.as_str() && *p == path)
            {
                op["requestBody"]["content"] = json_content(name);
                op["requestBody"]["required"] = json!(true);
            }
            special_bodies(method, path, op);
            if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
                for param in params {
                    match param["name"].as_str() {
                        Some("format") => param["schema"] = one_of(&["json", "sarif"]),
                        Some("kind") => param["schema"] = one_of(&["agents", "workflows", "apps"]),
                        Some("group_by") => param["schema"] = one_of(&["day", "model", "key"]),
                        Some("from" | "to") if path.ends_with("/usage") => {
                            param["schema"] = day_schema()
                        }
                        Some("cursor") if path.ends_with("/usage") => {
                            param["schema"] = usage_cursor_schema()
                        }
                        Some("If-Match") => {
                            param["schema"] = json!({"type": "string",
                                "pattern": "^(\\*|(W/)?(\"[0-9]{1,18}\"|[0-9]{1,18}))$"})
                        }
                        _ => {}
                    }
                }
            }
            let error = if route.openai_errors {
                OPENAI_ERROR
            } else {
                ERROR
            };
            for (status, description) in declared_answers(&route) {
                let response = &mut op["responses"][status];
                if response["description"].as_str().is_none_or(str::is_empty) {
                    response["description"] = json!(description);
                }
            }
            let wanted = statuses(method, &route, op);
            let responses = &mut op["responses"];
            for (status, codes) in wanted.0 {
                let listed = codes
                    .iter()
                    .map(|c| format!("`{}`", c.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ");
                let response = &mut responses[status.as_str()];
                let description = match response["description"].as_str() {
                    Some(d) if !d.is_empty() => format!("{d}. Error codes: {listed}."),
                    _ => format!("Error codes: {listed}."),
                };
                response["description"] = json!(description);
            }
            // Every error answer has the shared error body.
            if let Some(responses) = responses.as_object_mut() {
                for (status, response) in responses.iter_mut() {
                    // The readiness probe's 503 is its own body (`ReadyBody`), not an error.
                    let is_error = (status.starts_with('4') || status.starts_with('5'))
                        && !(path == "/ready" && status == "503");
                    if is_error {
                        response["content"] = json_content(error);
                        if matches!(status.as_str(), "429" | "503") {
                            response["headers"] = json!({"Retry-After": {
                                "description": "Seconds to wait before trying again.",
                                "schema": {"type": "integer", "minimum": 1}
                            }});
                        }
                    }
                }
            }
        }
    }
}

/// Bodies and answers the annotations cannot name: the chat routes and the Guard.
fn special_bodies(method: &str, path: &str, op: &mut Value) {
    match (method, path) {
        ("post", "/run" | "/chat/completions") => {
            op["requestBody"]["content"] = json_content("ChatRequest");
            op["requestBody"]["required"] = json!(true);
            op["responses"]["200"]["content"] = json!({
                "application/json": {"schema": schema_ref("ChatCompletion")},
                "text/event-stream": {"schema": {"type": "object", "required": ["data"],
                    "properties": {"data": {"type": "string"}, "event": {"type": "string"}},
                    "description": "Server-sent events: the upstream's chunks as `data: {...}` lines, ending with `data: [DONE]`. A stream that breaks after the first byte sends one `data: {\"error\": {...}}` frame, then `data: [DONE]`."}}
            });
        }
        ("post", "/responses") => {
            op["requestBody"]["content"] = json_content("ResponsesRequest");
            op["requestBody"]["required"] = json!(true);
        }
        ("post", "/embeddings") => {
            op["requestBody"]["content"] = json_content("EmbeddingsRequest");
            op["requestBody"]["required"] = json!(true);
        }
        ("post", "/admin/ai-gateways/diagnostics") => {
            // No body at all means `{}`.
            op["requestBody"]["required"] = json!(false);
        }
        ("get", "/guard/scan") => {
            op["responses"]["200"]["content"] = json_content("GuardDescription");
        }
        ("post", "/guard/scan") => {
            op["responses"]["200"]["content"] = json!({
                "application/json": {"schema": schema_ref("ScanResult")},
                "application/sarif+json": {"schema": schema_ref("Sarif")}
            });
        }
        ("get", "/openapi.json") => {
            op["responses"]["200"]["content"] =
                json!({"application/json": {"schema": {"type": "object"}}});
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document's paths come from the table's handlers, but each handler's annotation
    /// states its own method and path: they must name the route the table mounts it on, else
    /// the operation would be documented under the wrong path or with the wrong access class.
    #[test]
    fn every_documented_operation_is_a_declared_route() {
        let doc = document_json();
        let mut operations = 0;
        for (full, item) in doc["paths"].as_object().into_iter().flatten() {
            let path = full.strip_prefix("/api/v1").unwrap_or(full);
            for method in item.as_object().into_iter().flatten().map(|(m, _)| m) {
                assert!(
                    declared(method, path).is_some(),
                    "{method} {full} is documented but no route declares it"
                );
                operations += 1;
            }
        }
        assert_eq!(operations, routes::all().count());
    }

    #[test]
    fn parameter_names_do_not_change_a_shape() {
        assert!(same_shape("/a/{collection_id}/b", "/a/{collectionId}/b"));
        assert!(!same_shape("/a/{id}", "/a/b"));
        assert!(!same_shape("/a/{id}", "/a/{id}/b"));
    }
}
