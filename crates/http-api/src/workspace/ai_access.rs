//! `/workspace/ai-access`: whether the tenant can run models through the gateway, and a guide
//! to calling `/run` with a workspace key.

use gc_domain::model::workspace::KeyScope;
use gc_domain::policy::ai_access::AiAccess;
use gc_domain::services::workspace as service;
use serde::Serialize;
use utoipa::ToSchema;

use crate::extract::Auth;
use crate::reply::{ok, Reply};

#[derive(Debug, Serialize, ToSchema)]
pub struct AiAccessView {
    /// `ready`, `disabled` or `not_ready`.
    #[schema(value_type = String)]
    pub status: AiAccess,
    /// The tenant's region, `AIHK` or `AICA`: runs go to this region's gateway only.
    pub region: &'static str,
    /// Why AI access is not ready, as a sentence; null when it is ready.
    pub reason: Option<String>,
    /// How many ready, chat-enabled provider keys of the tenant's region exist.
    pub chat_enabled_keys: u64,
}

/// The tenant's AI access, computed as the administrators' view computes it.
#[utoipa::path(get, path = "/api/v1/workspace/ai-access", tag = "workspace",
    responses((status = 200, body = AiAccessView)))]
pub async fn get_ai_access(Auth(state, p): Auth) -> Reply {
    let access = state.db(move |store| service::ai_access(store, &p)).await?;
    let region = access.tenant.region.as_str();
    let reason = match access.status {
        AiAccess::Ready => None,
        AiAccess::Disabled => Some(
            "AI access is turned off for this tenant; a platform administrator can turn it on."
                .to_owned(),
        ),
        AiAccess::NotReady => Some(format!(
            "This tenant has no ready, chat-enabled provider key for its region {region}; \
             a platform administrator must add one."
        )),
    };
    let view = AiAccessView {
        status: access.status,
        region,
        reason,
        chat_enabled_keys: u64::try_from(access.usable_keys).unwrap_or(u64::MAX),
    };
    ok(view)
}

#[derive(Debug, Serialize, ToSchema)]
pub struct GuideExample {
    /// A shell command.
    pub curl: String,
    /// A Python script.
    pub python: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AiAccessGuide {
    pub steps: Vec<String>,
    pub example: GuideExample,
}

/// How to call `/run` (and, where mounted, `/chat/completions`) with a workspace key.
#[utoipa::path(get, path = "/api/v1/workspace/ai-access/guide", tag = "workspace",
    responses((status = 200, body = AiAccessGuide)))]
pub async fn get_guide(Auth(state, p): Auth) -> Reply {
    p.read_scope(KeyScope::WorkspaceRead)?;
    let base = format!("{}/api/v1", state.http.public_origin.trim_end_matches('/'));
    let mut steps = vec![
        "Check that GET /api/v1/workspace/ai-access says \"ready\"; if not, its reason says what a platform administrator must do.".to_owned(),
        "Create a key with the `run` scope: POST /api/v1/workspace/api-keys {\"name\": \"my-script\", \"scopes\": [\"run\"]} from a signed-in session. The key is shown once; keep it secret.".to_owned(),
        format!("Send POST {base}/run with the header `Authorization: Bearer <key>` and an OpenAI chat-completions body: {{\"messages\": [{{\"role\": \"user\", \"content\": \"...\"}}]}}. `model` defaults to `auto`, your region's default model."),
        "Add \"stream\": true for server-sent events ending with `data: [DONE]`.".to_owned(),
        "The request always goes to your tenant's region; a `provider`, `base_url`, `api_key`, `region` or `gateway` field is refused.".to_owned(),
    ];
    let curl = format!(
        "curl -sS {base}/run \\\n  -H \"Authorization: Bearer $GC_API_KEY\" \\\n  -H \"Content-Type: application/json\" \\\n  -d '{{\"model\": \"auto\", \"messages\": [{{\"role\": \"user\", \"content\": \"Hello\"}}]}}'"
    );
    let python = if state.http.chat_completions {
        steps.push(format!(
            "OpenAI SDKs work too: set the base URL to {base} and the API key to your workspace key."
        ));
        format!(
            "import os\nfrom openai import OpenAI\n\nclient = OpenAI(base_url=\"{base}\", api_key=os.environ[\"GC_API_KEY\"])\nreply = client.chat.completions.create(\n    model=\"auto\",\n    messages=[{{\"role\": \"user\", \"content\": \"Hello\"}}],\n)\nprint(reply.choices[0].message.content)\n"
        )
    } else {
        format!(
            "import os\nimport requests\n\nres = requests.post(\n    \"{base}/run\",\n    headers={{\"Authorization\": \"Bearer \" + os.environ[\"GC_API_KEY\"]}},\n    json={{\"model\": \"auto\", \"messages\": [{{\"role\": \"user\", \"content\": \"Hello\"}}]}},\n    timeout=120,\n)\nres.raise_for_status()\nprint(res.json()[\"choices\"][0][\"message\"][\"content\"])\n"
        )
    };
    ok(AiAccessGuide {
        steps,
        example: GuideExample { curl, python },
    })
}
