//! The administration commands beyond accounts and tenants (`gc-server admin ai-keys | limits
//! | keys | tokens | diagnostics | usage`), run by [`crate::admin_cli`].
//!
//! Like the rest of `gc-server admin`, they open the database directly and go through the
//! domain's services with the [`LocalOperator`](gc_domain::policy::access::LocalOperator) as the
//! admin: the same validation, sealing, probes and activity lines as the API, and no server
//! needs to be running (see `docs/operations.md`, "Administration from the command line").
//! Secrets are never taken as arguments (they would land in shell history and `ps`): an AI
//! key's secret comes from standard input or a file.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use chrono::Utc;
use clap::{Args, Subcommand};
use gc_domain::model::TenantPatch;
use gc_domain::policy::quota::limit_change;
use gc_domain::ports::KeySealer;
use gc_domain::services::admin;
use gc_domain::services::admin_tokens::AdminTokenRequest;
use gc_domain::services::ai_keys::{self, NewAiKey};
use gc_domain::services::api_keys::{KeyLimitsRequest, NewKeyRequest};
use gc_domain::services::diagnostics::{self, DiagnosisRequest};
use gc_domain::services::provisioning;
use gc_domain::services::usage::{self, UsageGroup, UsageQuery, UsageRange};
use gc_domain::services::Storage;
use gc_domain::DomainResult;
use gc_gateway::Gateways;
use gc_http_api::admin::ai_keys::AiKeyView;
use gc_http_api::admin::diagnostics as diag_view;
use gc_http_api::admin::tokens as token_view;
use gc_http_api::views::TenantView;
use gc_http_api::workspace::api_keys::{ApiKeyView, CreatedApiKey};
use gc_persistence::DbStore;
use serde_json::json;
use uuid::Uuid;

use crate::admin_cli::{all_pages, domain, report, report_list, shown, tenant_id, Invocation};
use crate::upstream::GatewayProbes;

#[derive(Debug, Subcommand)]
pub enum AiKeyCommand {
    /// Add an upstream key to a tenant; it is probed against its region's gateway at once.
    ///
    /// The secret is read from --secret-file, or else from standard input (one line); never
    /// from an argument.
    Add {
        /// The tenant id.
        #[arg(long)]
        tenant: String,
        /// AIHK or AICA: the only region the key is used in.
        #[arg(long)]
        region: String,
        #[arg(long)]
        label: Option<String>,
        /// A file holding the secret (its first line).
        #[arg(long)]
        secret_file: Option<PathBuf>,
        /// Keep the key out of runs (it is stored and probed, not used).
        #[arg(long, default_value_t = false)]
        no_chat: bool,
    },
    /// List a tenant's upstream keys (never their secrets).
    List {
        /// The tenant id.
        #[arg(long)]
        tenant: String,
    },
    /// Remove an upstream key; it is unusable from the next request on.
    Remove {
        /// The tenant id.
        #[arg(long)]
        tenant: String,
        /// The key id.
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum LimitsCommand {
    /// Set a tenant's quotas: each a positive integer, or `none` to remove that limit; a limit
    /// not named stays as it is.
    Tenant {
        /// The tenant id.
        id: String,
        #[arg(long, value_name = "N|none")]
        requests_per_minute: Option<String>,
        #[arg(long, value_name = "N|none")]
        tokens_per_minute: Option<String>,
        #[arg(long, value_name = "N|none")]
        monthly_tokens: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Make a workspace key for a member, in the member's tenant, as the member would in the
    /// console (same rules). The secret is printed once.
    Create {
        /// The member's email.
        #[arg(long)]
        member: String,
        /// The key's name.
        #[arg(long)]
        name: String,
        /// Scopes: workspace:read, workspace:write, guard:scan, run (repeat or comma-separate).
        #[arg(long = "scope", value_delimiter = ',', required = true)]
        scopes: Vec<String>,
        /// An RFC 3339 time in the future; default: no expiry.
        #[arg(long)]
        expires_at: Option<String>,
        /// The key's own limit, at most the tenant's.
        #[arg(long)]
        requests_per_minute: Option<i64>,
        /// The key's own limit, at most the tenant's.
        #[arg(long)]
        tokens_per_minute: Option<i64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make an API token for a platform admin (printed once): `Authorization: Bearer gca_...`
    /// on /admin/**, with that admin's rights.
    Create {
        /// The platform admin's email.
        #[arg(long)]
        admin: String,
        /// The token's name.
        #[arg(long)]
        name: String,
        /// admin (every administration route) or admin:read (reads only).
        #[arg(long, default_value = "admin")]
        scope: String,
        /// An RFC 3339 time in the future; default: no expiry.
        #[arg(long)]
        expires_at: Option<String>,
    },
    /// List a platform admin's tokens (never the tokens themselves).
    List {
        /// The platform admin's email.
        #[arg(long)]
        admin: String,
    },
    /// A token's audit trail: its newest uses (time, route), newest first. Kept 90 days and
    /// at most 10,000 a token (docs/operations.md).
    Uses {
        /// The platform admin's email.
        #[arg(long)]
        admin: String,
        /// The token id.
        id: String,
        /// How many uses at most (1 to 10,000).
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=10_000))]
        limit: i64,
    },
    /// Revoke a token: refused from the next request on.
    Revoke {
        /// The platform admin's email.
        #[arg(long)]
        admin: String,
        /// The token id.
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct DiagnosticsArgs {
    /// Only this region (AIHK or AICA).
    #[arg(long)]
    pub region: Option<String>,
    /// Only this tenant's keys.
    #[arg(long)]
    pub tenant: Option<String>,
}

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// First day, YYYY-MM-DD (UTC); default the first of the current month.
    #[arg(long)]
    pub from: Option<String>,
    /// Last day, inclusive; default the last of the current month.
    #[arg(long)]
    pub to: Option<String>,
    /// Only this tenant.
    #[arg(long)]
    pub tenant: Option<String>,
}

/// Storage work run at once on this thread: the command line has nothing else to do.
struct Direct<'a>(&'a DbStore);

impl Storage for Direct<'_> {
    type Store = DbStore;

    async fn run<T, F>(&self, work: F) -> DomainResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&DbStore) -> DomainResult<T> + Send + 'static,
    {
        work(self.0)
    }
}

/// Runs `work` (which may call the region gateways) to completion on a small runtime.
fn block_on<T>(work: impl std::future::Future<Output = T>) -> anyhow::Result<T> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a runtime for the gateway probes")?;
    Ok(rt.block_on(work))
}

pub fn ai_keys(inv: &Invocation, command: AiKeyCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    let (config, store, operator, json) = (inv.config, inv.store, inv.operator, inv.json);
    match command {
        AiKeyCommand::Add {
            tenant,
            region,
            label,
            secret_file,
            no_chat,
        } => {
            let tenant = tenant_id(&tenant)?;
            let secret = read_secret(secret_file.as_deref())?;
            let gateways = Gateways::new(crate::gateways(config)?);
            let sealer: Arc<dyn KeySealer> = Arc::new(crate::sealer(config)?);
            let key = block_on(ai_keys::create(
                (&Direct(store), &GatewayProbes(&gateways), sealer),
                operator.clone(),
                tenant,
                NewAiKey {
                    region,
                    secret,
                    label,
                    chat_enabled: Some(!no_chat),
                },
                Utc::now(),
            ))?
            .map_err(domain)?;
            let line = format!(
                "{}\t{}\t{}",
                key.id,
                key.status.as_str(),
                shown(key.status_reason.as_deref().unwrap_or("-"))
            );
            report(
                out,
                json,
                serde_json::to_value(AiKeyView::from(key)),
                || line,
            )?;
        }
        AiKeyCommand::List { tenant } => {
            let tenant = tenant_id(&tenant)?;
            let keys = block_on(ai_keys::list(&Direct(store), operator.clone(), tenant))?
                .map_err(domain)?;
            report_list(
                out,
                json,
                &keys,
                |k| serde_json::to_value(AiKeyView::from(k.clone())),
                "id\tregion\tlabel\thint\tchat\tstatus\treason",
                |k| {
                    format!(
                        "{}\t{}\t{}\t…{}\t{}\t{}\t{}",
                        k.id,
                        k.region.as_str(),
                        shown(&k.label),
                        shown(&k.hint),
                        k.chat_enabled,
                        k.status.as_str(),
                        shown(k.status_reason.as_deref().unwrap_or("-"))
                    )
                },
            )?;
        }
        AiKeyCommand::Remove { tenant, id } => {
            let tenant = tenant_id(&tenant)?;
            let id = Uuid::parse_str(id.trim())
                .map_err(|_| anyhow::anyhow!("{id:?} is not a key id (a UUID)"))?;
            block_on(ai_keys::delete(
                &Direct(store),
                operator.clone(),
                tenant,
                id,
            ))?
            .map_err(domain)?;
            let view = json!({ "id": id, "deleted": true });
            report(out, json, Ok(view), || format!("removed AI key {id}"))?;
        }
    }
    Ok(())
}

/// `N` or `none` (remove the limit), as the API's `limits` field takes a number or null.
fn limit_arg(field: &str, raw: Option<&str>) -> anyhow::Result<Option<Option<i64>>> {
    raw.map(|raw| {
        let raw = raw.trim();
        if raw.eq_ignore_ascii_case("none") {
            Ok(None)
        } else {
            raw.parse::<i64>()
                .map(Some)
                .map_err(|_| anyhow::anyhow!("--{field}: {raw:?} is neither a number nor none"))
        }
    })
    .transpose()
}

pub fn limits(inv: &Invocation, command: LimitsCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    let (store, operator, json) = (inv.store, inv.operator, inv.json);
    match command {
        LimitsCommand::Tenant {
            id,
            requests_per_minute,
            tokens_per_minute,
            monthly_tokens,
        } => {
            let id = tenant_id(&id)?;
            let change = |field: &str, arg: &str, raw: Option<&str>| -> anyhow::Result<_> {
                limit_change(field, limit_arg(arg, raw)?).map_err(domain)
            };
            let patch = TenantPatch {
                requests_per_minute: change(
                    "limits.requests_per_minute",
                    "requests-per-minute",
                    requests_per_minute.as_deref(),
                )?,
                tokens_per_minute: change(
                    "limits.tokens_per_minute",
                    "tokens-per-minute",
                    tokens_per_minute.as_deref(),
                )?,
                monthly_tokens: change(
                    "limits.monthly_tokens",
                    "monthly-tokens",
                    monthly_tokens.as_deref(),
                )?,
                ..TenantPatch::default()
            };
            let (t, access) = admin::update_tenant(store, operator, id, &patch).map_err(domain)?;
            let show = |v: Option<u64>| v.map_or_else(|| "none".to_owned(), |n| n.to_string());
            report(
                out,
                json,
                serde_json::to_value(TenantView::new(&t, access)),
                || {
                    format!(
                        "tenant {}: requests_per_minute={} tokens_per_minute={} monthly_tokens={}",
                        t.id,
                        show(t.limits.requests_per_minute),
                        show(t.limits.tokens_per_minute),
                        show(t.limits.monthly_tokens)
                    )
                },
            )?;
        }
    }
    Ok(())
}

pub fn keys(inv: &Invocation, command: KeyCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    let (store, operator, json) = (inv.store, inv.operator, inv.json);
    match command {
        KeyCommand::Create {
            member,
            name,
            scopes,
            expires_at,
            requests_per_minute,
            tokens_per_minute,
        } => {
            let limits =
                (requests_per_minute.is_some() || tokens_per_minute.is_some()).then(|| {
                    KeyLimitsRequest {
                        requests_per_minute: requests_per_minute.map(Some),
                        tokens_per_minute: tokens_per_minute.map(Some),
                        ..KeyLimitsRequest::default()
                    }
                });
            let req = NewKeyRequest {
                name,
                scopes: scopes.iter().map(|s| s.trim().to_owned()).collect(),
                expires_at,
                limits,
            };
            let created = provisioning::member_key(
                store,
                &gc_auth::Credentials,
                operator,
                &member,
                &req,
                Utc::now(),
            )
            .map_err(domain)?;
            let secret = created.secret.expose();
            let view = serde_json::to_value(CreatedApiKey {
                view: ApiKeyView::from(&created.key),
                key: secret.to_owned(),
            });
            let what = format!("workspace key {} for {}", created.key.id, shown(&member));
            report_secret(out, json, view, secret, &what)?;
        }
    }
    Ok(())
}

/// Reports a secret shown once: `view` with `--json`; else the secret alone on standard output,
/// so `KEY=$(gc-server admin keys create ...)` works, and what it is (`what`) on standard error.
fn report_secret(
    out: &mut dyn Write,
    json: bool,
    view: serde_json::Result<serde_json::Value>,
    secret: &str,
    what: &str,
) -> anyhow::Result<()> {
    report(out, json, view, || {
        eprintln!("{what} (shown once; store it now):");
        secret.to_owned()
    })
}

pub fn tokens(inv: &Invocation, command: TokenCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    let (store, operator, json) = (inv.store, inv.operator, inv.json);
    match command {
        TokenCommand::Create {
            admin,
            name,
            scope,
            expires_at,
        } => {
            let request = AdminTokenRequest {
                name,
                scope,
                expires_at,
            };
            let created = provisioning::admin_token(
                store,
                &gc_auth::Credentials,
                operator,
                &admin,
                &request,
                Utc::now(),
            )
            .map_err(domain)?;
            let secret = created.secret.expose();
            let view = serde_json::to_value(token_view::CreatedAdminToken {
                view: token_view::AdminTokenView::from(&created.token),
                token: secret.to_owned(),
            });
            let what = format!("admin token {} for {}", created.token.id, shown(&admin));
            report_secret(out, json, view, secret, &what)?;
        }
        TokenCommand::List { admin } => {
            let all =
                all_pages(|page| provisioning::admin_token_list(store, operator, &admin, page))?;
            report_list(
                out,
                json,
                &all,
                |t| serde_json::to_value(token_view::AdminTokenView::from(t)),
                "id\tname\tscope\texpires_at\tlast_used_at",
                |t| {
                    let v = token_view::AdminTokenView::from(t);
                    format!(
                        "{}\t{}\t{}\t{}\t{}",
                        v.id,
                        shown(&v.name),
                        v.scope,
                        v.expires_at.map_or_else(|| "-".into(), |t| t.to_rfc3339()),
                        v.last_used_at
                            .map_or_else(|| "-".into(), |t| t.to_rfc3339())
                    )
                },
            )?;
        }
        TokenCommand::Uses { admin, id, limit } => {
            let id = Uuid::parse_str(id.trim())
                .map_err(|_| anyhow::anyhow!("{id:?} is not a token id (a UUID)"))?;
            // Only a token of this admin: the same look-up as `list`, so an unknown admin or
            // a token of another admin is refused as `list` and `revoke` refuse them.
            let all =
                all_pages(|page| provisioning::admin_token_list(store, operator, &admin, page))?;
            if !all.iter().any(|t| t.id == id) {
                anyhow::bail!("{} has no admin token {id}", shown(&admin));
            }
            let uses = store.admin_token_uses(id, limit).map_err(domain)?;
            report_list(
                out,
                json,
                &uses,
                |u| {
                    Ok(json!({
                        "id": u.id,
                        "at": u.at,
                        "token_id": u.token_id,
                        "token_name": u.token_name,
                        "route": u.route,
                    }))
                },
                "at\troute",
                |u| format!("{}\t{}", u.at.to_rfc3339(), shown(&u.route)),
            )?;
        }
        TokenCommand::Revoke { admin, id } => {
            let id = Uuid::parse_str(id.trim())
                .map_err(|_| anyhow::anyhow!("{id:?} is not a token id (a UUID)"))?;
            provisioning::admin_token_revoke(store, operator, &admin, id).map_err(domain)?;
            let view = json!({ "id": id, "revoked": true });
            report(out, json, Ok(view), || format!("revoked admin token {id}"))?;
        }
    }
    Ok(())
}

pub fn diagnostics(
    inv: &Invocation,
    args: DiagnosticsArgs,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let (config, store, operator, json) = (inv.config, inv.store, inv.operator, inv.json);
    let request = DiagnosisRequest {
        region: args.region,
        tenant_id: args.tenant.as_deref().map(tenant_id).transpose()?,
    };
    let gateways = Gateways::new(crate::gateways(config)?);
    let sealer: Arc<dyn KeySealer> = Arc::new(crate::sealer(config)?);
    let d = block_on(diagnostics::diagnose(
        (&Direct(store), &GatewayProbes(&gateways), sealer),
        operator.clone(),
        request,
        Utc::now(),
    ))?
    .map_err(domain)?;
    if json {
        report(
            out,
            true,
            serde_json::to_value(diag_view::Diagnostics::from(&d)),
            String::new,
        )?;
    } else {
        writeln!(
            out,
            "region\tconfigured\treachable\tstatus\tlatency_ms\terror"
        )?;
        for g in &d.gateways {
            writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}\t{}",
                g.region.as_str(),
                g.configured(),
                g.reachable(),
                g.status_code()
                    .map_or_else(|| "-".into(), |c| c.to_string()),
                g.latency_ms().map_or_else(|| "-".into(), |c| c.to_string()),
                shown(g.error().as_deref().unwrap_or("-"))
            )?;
        }
        writeln!(out)?;
        writeln!(out, "key\ttenant\tregion\tstatus\treason")?;
        for k in &d.keys {
            writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}",
                k.id,
                k.tenant_id,
                k.region.as_str(),
                k.status.as_str(),
                shown(k.status_reason.as_deref().unwrap_or("-"))
            )?;
        }
    }
    Ok(())
}

pub fn usage(inv: &Invocation, args: UsageArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let (store, operator, json) = (inv.store, inv.operator, inv.json);
    let tenant = args.tenant.as_deref().map(tenant_id).transpose()?;
    let range = UsageRange::parse(
        args.from.as_deref(),
        args.to.as_deref(),
        Utc::now().date_naive(),
    )
    .map_err(domain)?;
    let mut lines = Vec::new();
    let mut before = None;
    loop {
        let q = UsageQuery::new(range, UsageGroup::Tenant, Some(200), before).map_err(domain)?;
        let page = usage::admin_usage(store, operator, tenant, &q).map_err(domain)?;
        lines.extend(page.items);
        match page.next {
            Some(next) => before = Some(next),
            None => break,
        }
    }
    report_list(
        out,
        json,
        &lines,
        |l| {
            Ok(json!({
                "tenant_id": l.group,
                "requests": l.requests,
                "errors": l.errors,
                "prompt_tokens": l.prompt_tokens,
                "completion_tokens": l.completion_tokens,
                "total_tokens": l.total_tokens,
            }))
        },
        "tenant_id\trequests\terrors\tprompt_tokens\tcompletion_tokens\ttotal_tokens",
        |l| {
            format!(
                "{}\t{}\t{}\t{}\t{}\t{}",
                shown(&l.group),
                l.requests,
                l.errors,
                l.prompt_tokens,
                l.completion_tokens,
                l.total_tokens
            )
        },
    )
}

/// An AI key's secret: the first line of `file`, else of standard input.
fn read_secret(file: Option<&std::path::Path>) -> anyhow::Result<String> {
    let raw = match file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the secret from {}", path.display()))?,
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading the secret from standard input")?;
            s
        }
    };
    let secret = raw.lines().next().unwrap_or_default().trim().to_owned();
    if secret.is_empty() {
        bail!("no secret: pipe it on standard input or name a file with --secret-file");
    }
    Ok(secret)
}
