//! `gc-server admin ...`: administration by the operator at the machine.
//!
//! Every command goes through the domain's administration services (`gc_domain::services::admin`) with
//! a [`LocalOperator`], so the API's rules apply (email and password rules, keys revoked when a
//! member leaves a tenant, activity lines) and the operator is recorded as the actor. Running
//! it needs the database URL, and whoever has that could change any row directly: the command
//! line adds no power, only the rules. Errors (an unknown email, a refused value) are returned
//! as messages; `main` prints them and exits with code 1.
//!
//! Every command takes `--json` (the API's shapes where the API has one). The commands for AI
//! keys, limits, workspace keys, diagnostics and usage live in [`crate::cli`].

use std::io::{Read, Write};

use anyhow::{anyhow, bail, Context};
use chrono::{SecondsFormat, Utc};
use gc_domain::model::{Role, Status, Tenant, TenantPatch, User, UserPatch};
use gc_domain::page::{Page, PageRequest};
use gc_domain::policy::access::LocalOperator;
use gc_domain::policy::ai_access::AiAccess;
use gc_domain::services::accounts::{PasswordHasher, Signup};
use gc_domain::services::admin::{self, tenant_name};
use gc_domain::values::Region;
use gc_domain::{DomainError, DomainResult};
use gc_http_api::views::{TenantView, UserView};
use serde_json::Value;
use uuid::Uuid;

use crate::config::{AdminCommand, TenantCommand, UserCommand, UsersCommand};
use crate::Config;

/// One `gc-server admin` invocation: the configuration, the store, the operator at the
/// console, and whether reports are JSON (`--json`).
#[derive(Clone, Copy)]
pub struct Invocation<'a> {
    pub config: &'a Config,
    pub store: &'a gc_persistence::DbStore,
    pub operator: &'a LocalOperator,
    pub json: bool,
}

/// Runs one admin command, writing its report to `out` (JSON with `json`).
pub fn run(
    config: &Config,
    command: AdminCommand,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let store = crate::open_store(config)?;
    let operator = LocalOperator::at_the_console(&login_name());
    let inv = Invocation {
        config,
        store: &store,
        operator: &operator,
        json,
    };
    match command {
        AdminCommand::Create { email, name } => {
            let user = create_user(&inv, &email, &name, None, true)?;
            let id = user.id;
            report_user(out, json, user, |e| {
                format!("created platform admin {e} ({id})")
            })?;
        }
        AdminCommand::Users {
            command:
                UsersCommand::Create {
                    email,
                    name,
                    tenant,
                    admin: platform_admin,
                },
        } => {
            let tenant = tenant.as_deref().map(tenant_id).transpose()?;
            let user = create_user(&inv, &email, &name, tenant, platform_admin)?;
            let id = user.id;
            report_user(out, json, user, |_| id.to_string())?;
        }
        AdminCommand::User(command)
        | AdminCommand::Users {
            command: UsersCommand::Other(command),
        } => {
            users(&inv, command, out)?;
        }
        AdminCommand::Tenants { command } => {
            tenants(&inv, command, out)?;
        }
        AdminCommand::AiKeys { command } => {
            crate::cli::ai_keys(&inv, command, out)?;
        }
        AdminCommand::Limits { command } => {
            crate::cli::limits(&inv, command, out)?;
        }
        AdminCommand::Keys { command } => {
            crate::cli::keys(&inv, command, out)?;
        }
        AdminCommand::Tokens { command } => {
            crate::cli::tokens(&inv, command, out)?;
        }
        AdminCommand::Diagnostics(args) => {
            crate::cli::diagnostics(&inv, args, out)?;
        }
        AdminCommand::Usage(args) => crate::cli::usage(&inv, args, out)?,
    }
    Ok(())
}

/// Writes `view` as pretty JSON with `--json`, else the line `text` makes.
pub(crate) fn report(
    out: &mut dyn Write,
    json: bool,
    view: serde_json::Result<Value>,
    text: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, &view?)?;
        writeln!(out)?;
    } else {
        writeln!(out, "{}", text())?;
    }
    Ok(())
}

/// Writes `items` as `{"data": [...]}` (each item's `view`) with `--json`, else `header` and
/// one tab-separated `row` per item.
pub(crate) fn report_list<T>(
    out: &mut dyn Write,
    json: bool,
    items: &[T],
    view: impl Fn(&T) -> serde_json::Result<Value>,
    header: &str,
    row: impl Fn(&T) -> String,
) -> anyhow::Result<()> {
    if json {
        let data = items
            .iter()
            .map(view)
            .collect::<serde_json::Result<Vec<_>>>()?;
        return report(
            out,
            true,
            Ok(serde_json::json!({ "data": data })),
            String::new,
        );
    }
    writeln!(out, "{header}")?;
    for item in items {
        writeln!(out, "{}", row(item))?;
    }
    Ok(())
}

/// Every item of a paged list, read `PageRequest::MAX_LIMIT` at a time.
pub(crate) fn all_pages<T>(
    mut fetch: impl FnMut(&PageRequest) -> DomainResult<Page<T>>,
) -> anyhow::Result<Vec<T>> {
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let request = PageRequest::new(Some(PageRequest::MAX_LIMIT), cursor).map_err(domain)?;
        let page = fetch(&request).map_err(domain)?;
        all.extend(page.items);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(all),
        }
    }
}

/// Creates an account through the domain (the password from `GC_ADMIN_PASSWORD` or stdin).
fn create_user(
    inv: &Invocation<'_>,
    email: &str,
    name: &str,
    tenant: Option<Uuid>,
    platform_admin: bool,
) -> anyhow::Result<User> {
    let Invocation {
        config,
        store,
        operator,
        ..
    } = *inv;
    let hasher = crate::hasher(config)?;
    let password = read_password()?;
    let signup = Signup::parse(email, password, name).map_err(domain)?;
    let role = if platform_admin {
        Role::PlatformAdmin
    } else {
        Role::Member
    };
    admin::create_user(store, &hasher, operator, &signup, role, tenant, Utc::now()).map_err(domain)
}

/// Reports a changed account: its view, or the line `said` makes of its shown email.
fn report_user(
    out: &mut dyn Write,
    json: bool,
    user: User,
    said: impl FnOnce(&str) -> String,
) -> anyhow::Result<()> {
    let line = said(&shown(user.email.as_str()));
    report(
        out,
        json,
        serde_json::to_value(UserView::from(user)),
        || line,
    )
}

/// An account command that sets one field: the account's status or its role.
#[derive(Debug, Clone, Copy)]
enum AccountChange {
    SetStatus(Status),
    SetRole(Role),
}
use AccountChange::{SetRole, SetStatus};

impl AccountChange {
    fn patch(self) -> UserPatch {
        let (status, role) = match self {
            SetStatus(status) => (Some(status), None),
            SetRole(role) => (None, Some(role)),
        };
        UserPatch {
            status,
            role,
            ..UserPatch::default()
        }
    }

    /// The line said of the changed account `e`.
    fn said(self, e: &str) -> String {
        match self {
            SetStatus(Status::Suspended) => format!("suspended {e}"),
            SetStatus(Status::Active) => format!("activated {e}"),
            SetRole(Role::PlatformAdmin) => format!("{e} is a platform admin"),
            SetRole(Role::Member) => format!("{e} is a member"),
        }
    }
}

fn users(inv: &Invocation, command: UserCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    let (config, store, operator, json) = (inv.config, inv.store, inv.operator, inv.json);
    let by_email = |email: &str| admin::find_user_by_email(store, operator, email).map_err(domain);
    // Makes the change in the account `email` names and reports it.
    let changed = |out: &mut dyn Write, email: &str, change: AccountChange| {
        let user = by_email(email)?;
        let user = admin::update_user(store, operator, user.id, &change.patch()).map_err(domain)?;
        report_user(out, json, user, |e| change.said(e))
    };
    match command {
        UserCommand::List { tenant } => {
            let tenant = tenant.as_deref().map(tenant_id).transpose()?;
            let users = all_pages(|page| admin::list_users(store, operator, tenant, page))?;
            report_list(
                out,
                json,
                &users,
                |u| serde_json::to_value(UserView::from(u.clone())),
                "email\tname\trole\tstatus\ttenant_id\tcreated_at",
                |u| {
                    format!(
                        "{}\t{}\t{}\t{}\t{}\t{}",
                        shown(u.email.as_str()),
                        shown(&u.name),
                        u.role.as_str(),
                        member_status(u),
                        u.tenant_id
                            .map_or_else(|| "-".to_owned(), |t| t.to_string()),
                        u.created_at.to_rfc3339_opts(SecondsFormat::Secs, true)
                    )
                },
            )?;
        }
        UserCommand::Suspend { email } => changed(out, &email, SetStatus(Status::Suspended))?,
        UserCommand::Activate { email } => changed(out, &email, SetStatus(Status::Active))?,
        UserCommand::Promote { email } => changed(out, &email, SetRole(Role::PlatformAdmin))?,
        UserCommand::Demote { email } => changed(out, &email, SetRole(Role::Member))?,
        UserCommand::ResetPassword { email } => {
            let user = by_email(&email)?;
            let hasher = crate::hasher(config)?;
            let password = read_password()?;
            let hasher: &dyn PasswordHasher = &hasher;
            admin::reset_password(store, hasher, operator, user.id, password).map_err(domain)?;
            report_user(out, json, user, |e| {
                format!("reset the password of {e}; its sessions are revoked")
            })?;
        }
        UserCommand::Assign { email, tenant } => {
            let target = if tenant.eq_ignore_ascii_case("none") {
                None
            } else {
                Some(tenant_id(&tenant)?)
            };
            let user = by_email(&email)?;
            let user = admin::assign_tenant(store, operator, user.id, target, Utc::now())
                .map_err(domain)?;
            let tenant = user.tenant_id;
            report_user(out, json, user, |e| match tenant {
                Some(t) => format!("{e} is in tenant {t}"),
                None => format!("{e} is unassigned"),
            })?;
        }
    }
    Ok(())
}

/// Reports a changed tenant: its view, or the line `said` makes of it.
fn report_tenant(
    out: &mut dyn Write,
    json: bool,
    (t, access): (Tenant, AiAccess),
    said: impl FnOnce(&Tenant, AiAccess) -> String,
) -> anyhow::Result<()> {
    let view = serde_json::to_value(TenantView::new(&t, access));
    report(out, json, view, || said(&t, access))
}

fn tenants(inv: &Invocation, command: TenantCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    let (store, operator, json) = (inv.store, inv.operator, inv.json);
    let set_status = |id: &str, status: Status| {
        let id = tenant_id(id)?;
        let patch = TenantPatch {
            status: Some(status),
            ..TenantPatch::default()
        };
        admin::update_tenant(store, operator, id, &patch).map_err(domain)
    };
    match command {
        TenantCommand::List => {
            let tenants = all_pages(|page| admin::list_tenants(store, operator, page))?;
            report_list(
                out,
                json,
                &tenants,
                |(t, a)| serde_json::to_value(TenantView::new(t, *a)),
                "id\tname\tregion\tstatus\tai_access\tcreated_at",
                |(t, access)| {
                    format!(
                        "{}\t{}\t{}\t{}\t{}\t{}",
                        t.id,
                        shown(&t.name),
                        t.region.as_str(),
                        t.status.as_str(),
                        ai_access(*access),
                        t.created_at.to_rfc3339_opts(SecondsFormat::Secs, true)
                    )
                },
            )?;
        }
        TenantCommand::Create {
            name,
            region,
            ai_enabled,
        } => {
            let region = Region::parse("region", &region).map_err(domain)?;
            let created =
                admin::create_tenant(store, operator, &name, region, ai_enabled, Utc::now())
                    .map_err(domain)?;
            report_tenant(out, json, created, |t, _| t.id.to_string())?;
        }
        TenantCommand::Update {
            id,
            name,
            region,
            ai_enabled,
        } => {
            let id = tenant_id(&id)?;
            let patch = TenantPatch {
                name: name
                    .as_deref()
                    .map(tenant_name)
                    .transpose()
                    .map_err(domain)?,
                region: region
                    .as_deref()
                    .map(|r| Region::parse("region", r))
                    .transpose()
                    .map_err(domain)?,
                ai_enabled,
                ..TenantPatch::default()
            };
            let updated = admin::update_tenant(store, operator, id, &patch).map_err(domain)?;
            report_tenant(out, json, updated, |t, access| {
                format!(
                    "tenant {} ({}): region {}, ai_access {}",
                    shown(&t.name),
                    t.id,
                    t.region.as_str(),
                    ai_access(access)
                )
            })?;
        }
        TenantCommand::Suspend { id } => {
            report_tenant(out, json, set_status(&id, Status::Suspended)?, |t, _| {
                format!("suspended tenant {} ({})", shown(&t.name), t.id)
            })?;
        }
        TenantCommand::Activate { id } => {
            report_tenant(out, json, set_status(&id, Status::Active)?, |t, _| {
                format!("activated tenant {} ({})", shown(&t.name), t.id)
            })?;
        }
    }
    Ok(())
}

/// `text` as one inert cell of a tab-separated line: a backslash, tab, newline, carriage
/// return, any other C0 or C1 control character (ESC among them), DEL, a Unicode line or
/// paragraph separator, and the direction marks and overrides (U+200E, U+200F, U+061C,
/// U+202A–U+202E, U+2066–U+2069) are written as escapes (`\\`, `\t`, `\n`, `\r`,
/// `\x1b`, `\u{202e}`), so a stored name can neither forge rows or columns nor move the
/// cursor, recolour the terminal or reorder what is printed after it.
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    fn inert(c: char) -> bool {
        !(c == '\\'
            || c.is_control()
            || matches!(
                c,
                '\u{061c}'
                    | '\u{200e}'
                    | '\u{200f}'
                    | '\u{2028}'
                    | '\u{2029}'
                    | '\u{202a}'..='\u{202e}'
                    | '\u{2066}'..='\u{2069}'
            ))
    }
    if text.chars().all(inert) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if inert(c) => out.push(c),
            c if u32::from(c) < 0x80 => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => out.push_str(&format!("\\u{{{:04x}}}", u32::from(c))),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A domain refusal as a one-line message (`not_found: user not found`).
pub(crate) fn domain(e: DomainError) -> anyhow::Error {
    match e {
        DomainError::NotFound(what) => anyhow!("no such {what}"),
        other => anyhow!("{} ({})", other, other.code()),
    }
}

pub(crate) fn tenant_id(raw: &str) -> anyhow::Result<Uuid> {
    Uuid::parse_str(raw.trim()).map_err(|_| anyhow!("{raw:?} is not a tenant id (a UUID)"))
}

fn member_status(u: &User) -> &'static str {
    match u.member_status() {
        gc_domain::model::MemberStatus::Active => "active",
        gc_domain::model::MemberStatus::Unassigned => "unassigned",
        gc_domain::model::MemberStatus::Suspended => "suspended",
    }
}

fn ai_access(a: AiAccess) -> &'static str {
    match a {
        AiAccess::Ready => "ready",
        AiAccess::Disabled => "disabled",
        AiAccess::NotReady => "not_ready",
    }
}

/// The operator's login name, for activity lines.
fn login_name() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_default()
}

/// The new password: `GC_ADMIN_PASSWORD`, else standard input (one line).
fn read_password() -> anyhow::Result<String> {
    if let Ok(p) = std::env::var("GC_ADMIN_PASSWORD") {
        return Ok(p);
    }
    let mut p = String::new();
    std::io::stdin()
        .read_to_string(&mut p)
        .context("reading the password from standard input")?;
    let p = p.trim_end_matches(['\r', '\n']).to_owned();
    if p.is_empty() {
        bail!("no password: set GC_ADMIN_PASSWORD or pipe it on standard input");
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::{shown, AccountChange, Role, SetRole, SetStatus, Status};

    #[test]
    fn shown_escapes_what_a_terminal_would_act_on() {
        assert!(matches!(
            shown("Ann Lee é 漢"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(shown("a\tb\nc\rd\\e"), "a\\tb\\nc\\rd\\\\e");
        assert_eq!(shown("\u{1b}[31mred\u{7f}\u{0}"), "\\x1b[31mred\\x7f\\x00");
        assert_eq!(shown("\u{9b}31m"), "\\u{009b}31m");
        for c in [
            '\u{202a}', '\u{202e}', '\u{2066}', '\u{2069}', '\u{200f}', '\u{2028}',
        ] {
            let out = shown(&format!("x{c}y")).into_owned();
            assert!(
                !out.contains(c) && out.starts_with("x\\u{") && out.ends_with('y'),
                "{out}"
            );
        }
    }

    #[test]
    fn an_account_change_patches_its_one_field_and_says_the_new_state() {
        let cases: [(AccountChange, &str); 4] = [
            (SetStatus(Status::Suspended), "suspended a@b.c"),
            (SetStatus(Status::Active), "activated a@b.c"),
            (SetRole(Role::PlatformAdmin), "a@b.c is a platform admin"),
            (SetRole(Role::Member), "a@b.c is a member"),
        ];
        for (change, line) in cases {
            assert_eq!(change.said("a@b.c"), line);
            let patch = change.patch();
            assert_eq!(patch.name, None);
            match change {
                SetStatus(s) => assert_eq!((patch.status, patch.role), (Some(s), None)),
                SetRole(r) => assert_eq!((patch.status, patch.role), (None, Some(r))),
            }
        }
    }
}
