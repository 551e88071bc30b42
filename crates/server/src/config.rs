//! Configuration, read once at start from the environment (flags mirror the variables).
//!
//! | Variable | Default | Meaning |
//! |---|---|---|
//! | `GC_DATABASE_URL` | `sqlite://data/gc.db` | `sqlite://PATH` or `postgres://...` |
//! | `GC_BIND` | `127.0.0.1:8080` | listen address |
//! | `GC_PUBLIC_ORIGIN` | `http://127.0.0.1:8080` | Origin checks, cookie `Secure` flag |
//! | `GC_MASTER_KEY` | generated into the data folder (0600) on first start | 32 bytes, base64; seals tenant AI keys |
//! | `GC_MASTER_KEY_PREVIOUS` | unset | comma-separated older master keys, still accepted for opening |
//! | `GC_BOOTSTRAP_ADMIN_EMAIL`, `GC_BOOTSTRAP_ADMIN_PASSWORD` | unset | create this platform admin at start if missing |
//! | `GC_TRUSTED_PROXIES` | unset | comma-separated CIDRs whose `X-Forwarded-For` is believed |
//! | `GC_BCRYPT_COST` | `12` | below 10 only with a warning (tests) |
//! | `GC_SIGNUP` | `open` | `open` or `closed` |
//! | `GC_CHAT_COMPLETIONS` | `false` | mount `/chat/completions` |
//! | `GC_GATEWAY_AIHK_URL`, `GC_GATEWAY_AICA_URL` | unset (region not configured) | OpenAI-compatible base URL, e.g. `https://host/v1` |
//! | `GC_GATEWAY_AIHK_MODEL`, `GC_GATEWAY_AICA_MODEL` | `gpt-4o-mini` | what `auto` resolves to |
//! | `GC_GATEWAY_AIHK_MODELS`, `GC_GATEWAY_AICA_MODELS` | the region's default model | comma-separated models listed by `GET /models` (after `auto`) |
//! | `GC_METRICS` | `true` | serve `GET /metrics` (Prometheus text); `false` turns it off |
//! | `GC_METRICS_BIND` | unset (the main listener) | serve `/metrics` on this address only, e.g. `127.0.0.1:9090` |
//! | `GC_GATEWAY_TIMEOUT_S` | `60` | no upstream response (or a silent stream) this long → 504 / an in-band error |
//! | `GC_GATEWAY_CONNECT_TIMEOUT_S` | `10` | upstream connect time-out |
//! | `GC_PRICES` | unset (the shipped prices, USD) | a JSON file of model prices per million tokens, one currency (decision 0038, `docs/gateway.md`) |
//! | `GC_RESERVE_COMPLETION_TOKENS` | `1024` | completion tokens a run under a token limit reserves when it names no `max_tokens` (decision 0025) |
//! | `GC_GITHUB_API_URL`, `GC_GITHUB_CODELOAD_URL` | `https://api.github.com`, `https://codeload.github.com` | Guard repository fetch |
//! | `GC_GITHUB_TOKEN` | unset | optional read-only token for the GitHub API rate limit |
//! | `GC_GUARD_ANON_PER_MIN` | `30` | anonymous Guard scans per minute per client IP |
//! | `GC_GUARD_CONCURRENCY` | number of cores | Guard scans running at once (its own threads) |
//! | `GC_GUARD_QUEUE` | twice the concurrency | Guard scans waiting for a slot; beyond that 503 `scanner_busy` |
//! | `GC_GUARD_PER_CALLER` | `4` | Guard scans in flight per tenant (or account without one); beyond that 429 |
//! | `GC_GUARD_PER_ANON_IP` | `2` | Guard scans in flight per anonymous client IP; beyond that 429 |
//! | `GC_GUARD_ANON_SHARE` | `50` | percent of the Guard's running slots, waiting places and memory anonymous scans may take together; the rest is kept for signed-in callers |
//! | `GC_GUARD_MEMORY_MIB` | `256` | memory all Guard scans may hold together; a scan without room → 503 `scanner_busy` |
//! | `GC_GUARD_TIMEOUT_S` | `20` | a Guard scan (queue, download, unpacking, scanning) is stopped after this long → 504 |
//! | `GC_AUTH_PER_IP_PER_MIN` | `20` | sign-ins and sign-ups per client IP per minute; beyond that 429 `rate_limited` |
//! | `GC_AUTH_PER_IP_IN_FLIGHT` | `1` | sign-in and sign-up password checks in flight per client IP; beyond that 429 `rate_limited` at once |
//! | `GC_PER_IP_CLIENTS_MAX` | `100000` | client IPs remembered by each per-IP limit (sign-in/sign-up, anonymous Guard scans); when full, newcomers share one overflow allowance |
//! | `GC_HASH_QUEUE` | `4` | password checks waiting for a hashing thread; beyond that 503 `busy` |
//! | `GC_USAGE_REPORTS_PER_TENANT` | `2` | usage reports running at once for one tenant (admins' reports count as one tenant); beyond that 429 `rate_limited` at once |
//! | `GC_USAGE_REPORTS_MAX` | a quarter of `GC_DB_POOL_SIZE` (2 SQLite, 4 PostgreSQL), at most half | usage reports running at once in all; beyond that 503 `busy` at once |
//! | `GC_HASH_RESERVED` | `2` | hashing places (running or waiting) sign-in and sign-up may not take, kept for signed-in callers (change-password) |
//! | `GC_HEADER_TIMEOUT_S` | `5` | request headers must arrive within this long (else 408, connection closed) |
//! | `GC_BODY_TIMEOUT_S` | `10` | a request body must arrive within this long after its headers (else 408, closed) |
//! | `GC_KEEP_ALIVE_S` | `5` | an idle kept-alive connection is closed after this long |
//! | `GC_MAX_CONNECTIONS` | the open-file limit less 256 for files, the database and upstreams | open client connections at most (split across workers) |
//! | `GC_SESSION_IDLE_HOURS`, `GC_SESSION_MAX_DAYS` | `24`, `30` | session idle and absolute lifetime |
//! | `GC_DB_POOL_SIZE` | `8` (SQLite), `16` (PostgreSQL) | database connections per process |
//! | `GC_WORKERS` | number of cores | HTTP worker threads |
//! | `GC_BLOCKING_THREADS` | `4` | threads per worker for database and bcrypt work |
//! | `GC_LOG`, `GC_LOG_FORMAT` | `info`, `text` | tracing filter; `json` for JSON lines |
//! | `GC_ADMIN_PASSWORD` | unset | the password for `admin create` / `admin reset-password` (else stdin) |

//!
//! At start, `gc-server` reads a `.env` file from the working directory when there is one
//! (see [`load_dotenv`]): variables already set in the environment win, and a flag wins over
//! both. `.env.sample` lists every variable with its default.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};

/// Reads `path` (normally `.env` in the working directory) into the process environment,
/// leaving variables that are already set alone. A missing file is fine (`Ok(false)`); a file
/// that cannot be read or parsed is an error naming the file and the line. Must run before any
/// thread is started.
pub fn load_dotenv(path: &Path) -> anyhow::Result<bool> {
    match dotenvy::from_path(path) {
        Ok(()) => Ok(true),
        Err(dotenvy::Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(dotenvy::Error::LineParse(line, index)) => Err(anyhow::anyhow!(
            "{}: cannot parse `{}` (at character {}); expected NAME=value lines",
            path.display(),
            line.trim_end(),
            index + 1
        )),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Variables `gc-server` reads that are not flags of [`Config`]: `GC_ADMIN_PASSWORD` (admin
/// commands) and the test harness's own.
const OTHER_VARIABLES: &[&str] = &[
    "GC_ADMIN_PASSWORD",
    "GC_TEST_POSTGRES_URL",
    "GC_REQUIRE_POSTGRES",
    "GC_REQUIRE_OPENAI_SDK",
];

/// `GC_*` variables gc-server does not read but the project's own tools do (tests,
/// benchmarks, the API check), or that the README and the console's snippets export for callers
/// (`GC_KEY`, `GC_API_KEY`, `GC_BASE_URL`): they are set in the same shells, CI jobs and `.env`
/// files as gc-server's, so they are never reported as unknown.
const TOOL_VARIABLES: &[&str] = &[
    "GC_API_CHECK_EXAMPLES",
    "GC_API_KEY",
    "GC_BASE_URL",
    "GC_CONSOLE_SCREENSHOTS",
    "GC_HEAD_CHECK_N",
    "GC_KEY",
];

/// Families of the tools' variables: the test harness's requirements (`GC_REQUIRE_*`) and
/// settings (`GC_TEST_*`), the benchmarks' (`GC_BENCH_*`) and a persistence test's child
/// process (`GC_EXIT_RACE_*`). Never reported as unknown, whatever follows the prefix.
const TOOL_PREFIXES: &[&str] = &["GC_REQUIRE_", "GC_TEST_", "GC_BENCH_", "GC_EXIT_RACE_"];

/// A variable of the project's tools rather than gc-server's ([`TOOL_VARIABLES`],
/// [`TOOL_PREFIXES`]).
pub fn is_tool_variable(name: &str) -> bool {
    TOOL_VARIABLES.contains(&name) || TOOL_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Every `GC_*` variable gc-server knows: each flag's variable, and [`OTHER_VARIABLES`].
pub fn known_variables() -> Vec<String> {
    use clap::CommandFactory;
    let mut names: Vec<String> = Cli::command()
        .get_arguments()
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .collect();
    names.extend(OTHER_VARIABLES.iter().map(|s| (*s).to_owned()));
    names.sort();
    names.dedup();
    names
}

/// An unknown `GC_*` variable: its name, where it was set, and the known name closest to it
/// (when one is close enough to be a typo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownVariable {
    pub name: String,
    /// `.env` or `the environment`.
    pub source: &'static str,
    pub closest: Option<String>,
}

/// The `GC_*` names in `names` that gc-server does not know, each with the closest known name
/// (edit distance at most a third of the name, so `GC_GATWAY_AIHK_URL` finds
/// `GC_GATEWAY_AIHK_URL` but `GC_FOO` finds nothing). `in_dotenv` tells which came from the
/// `.env` file.
pub fn unknown_variables<'a>(
    names: impl IntoIterator<Item = &'a str>,
    in_dotenv: &[String],
) -> Vec<UnknownVariable> {
    let known = known_variables();
    let mut out: Vec<UnknownVariable> = names
        .into_iter()
        .filter(|n| n.starts_with("GC_") && !known.iter().any(|k| k == n) && !is_tool_variable(n))
        .map(|name| {
            let closest = known
                .iter()
                .map(|k| (edit_distance(name, k), k))
                .min()
                .filter(|(d, _)| *d <= (name.len() / 3).max(1))
                .map(|(_, k)| k.clone());
            UnknownVariable {
                name: name.to_owned(),
                source: if in_dotenv.iter().any(|d| d == name) {
                    ".env"
                } else {
                    "the environment"
                },
                closest,
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup();
    out
}

/// Logs a warning for every unknown `GC_*` variable in the environment (which holds `.env`'s
/// too once [`load_dotenv`] ran), naming the closest known one. Call after tracing is set up.
pub fn warn_unknown_variables(dotenv: &Path) {
    let in_dotenv: Vec<String> = dotenvy::from_path_iter(dotenv)
        .map(|iter| iter.filter_map(Result::ok).map(|(k, _)| k).collect())
        .unwrap_or_default();
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .collect();
    for v in unknown_variables(names.iter().map(String::as_str), &in_dotenv) {
        match &v.closest {
            Some(closest) => tracing::warn!(
                variable = %v.name,
                source = v.source,
                "unknown variable {} (in {}) is ignored; did you mean {}?",
                v.name,
                v.source,
                closest
            ),
            None => tracing::warn!(
                variable = %v.name,
                source = v.source,
                "unknown variable {} (in {}) is ignored",
                v.name,
                v.source
            ),
        }
    }
}

/// The Levenshtein distance between two ASCII-ish names (by characters).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

const AFTER_HELP: &str = "\
Every option can also be set by its environment variable (shown as [env: ...]); a .env file in
the working directory is read at start (variables already set win). See .env.sample.
Without a command, gc-server serves.";

/// gc: a multi-tenant workspace service with an AI gateway.
#[derive(Debug, Parser)]
#[command(name = "gc-server", version, after_help = AFTER_HELP)]
pub struct Cli {
    #[command(flatten)]
    pub config: Config,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API (the default): apply pending migrations, then listen on GC_BIND.
    Serve,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Print the OpenAPI 3.1 document of the API (as served at /api/v1/openapi.json).
    Openapi,
    /// The Guard scanner on the command line, for other projects' CI.
    Guard {
        #[command(subcommand)]
        command: GuardCommand,
    },
    /// Administration from the command line, for an operator who can open the database.
    ///
    /// The commands apply the API's rules (they go through the same domain services) and are
    /// recorded with the operator as the actor. An unknown email or tenant exits with code 1
    /// and a message.
    Admin {
        /// Print the result as JSON (the API's shapes where the API has one) instead of text.
        #[arg(long, global = true)]
        json: bool,
        #[command(subcommand)]
        command: AdminCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum GuardCommand {
    /// Scan a skill: a file, a folder, standard input (-), or a public GitHub repository.
    ///
    /// Exit codes: 0 when the verdict is below --fail-on, 1 when it reaches it, 2 when nothing
    /// could be scanned (bad arguments, an unreadable path, a refused address, a failed fetch).
    Scan(GuardScanArgs),
}

#[derive(Debug, Args)]
pub struct GuardScanArgs {
    /// Output: text (one line per finding and a verdict line), json (the API's result body)
    /// or sarif (SARIF 2.1.0, for code-scanning tools).
    #[arg(long, short, value_enum, default_value_t = ScanFormat::Text)]
    pub format: ScanFormat,
    /// The verdict from which the exit code is 1: warn (warn or fail) or fail (fail only;
    /// `block` is accepted for it).
    #[arg(long, value_enum, default_value_t = FailOnLevel::Fail)]
    pub fail_on: FailOnLevel,
    /// What to scan: a file or folder path, - for standard input, or exactly
    /// https://github.com/OWNER/REPO (fetched like the API does, with GC_GITHUB_API_URL,
    /// GC_GITHUB_CODELOAD_URL and GC_GITHUB_TOKEN). Any other address is refused, never read
    /// as a path.
    #[arg(value_name = "PATH|-|URL")]
    pub target: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScanFormat {
    Text,
    Json,
    Sarif,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOnLevel {
    /// Exit 1 on warn or fail.
    Warn,
    /// Exit 1 on fail only.
    #[value(alias = "block")]
    Fail,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create a platform admin.
    ///
    /// The password (12 to 72 bytes) comes from GC_ADMIN_PASSWORD or, when that is unset, from
    /// standard input.
    Create {
        /// The admin's email (case-insensitive, unique).
        #[arg(long)]
        email: String,
        /// The admin's display name.
        #[arg(long)]
        name: String,
    },
    #[command(flatten)]
    User(UserCommand),
    /// The same user commands, grouped (`admin users list`, `admin users suspend EMAIL` ...),
    /// and `admin users create`.
    Users {
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// Tenants: list, create, update, suspend, activate.
    Tenants {
        #[command(subcommand)]
        command: TenantCommand,
    },
    /// A tenant's upstream AI keys: add (the secret from standard input or a file), list,
    /// remove.
    AiKeys {
        #[command(subcommand)]
        command: crate::cli::AiKeyCommand,
    },
    /// Quotas: a tenant's limits (a workspace key's own limits are set when it is made).
    Limits {
        #[command(subcommand)]
        command: crate::cli::LimitsCommand,
    },
    /// Workspace keys made for a member (the secret is shown once).
    Keys {
        #[command(subcommand)]
        command: crate::cli::KeyCommand,
    },
    /// A platform admin's API tokens (`gca_...`, for scripts on /admin/**): create (shown
    /// once), list, revoke.
    Tokens {
        #[command(subcommand)]
        command: crate::cli::TokenCommand,
    },
    /// Check the region gateways and re-check the AI keys (stores their statuses).
    Diagnostics(crate::cli::DiagnosticsArgs),
    /// Usage per tenant (requests, errors, tokens) over a range of days.
    Usage(crate::cli::UsageArgs),
}

/// `admin users ...`: the user commands, and creating any account.
#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Create a member (or with --admin a platform admin), in a tenant when --tenant is given.
    ///
    /// The password (12 to 72 bytes) comes from GC_ADMIN_PASSWORD or, when that is unset, from
    /// standard input.
    Create {
        /// The account's email (case-insensitive, unique).
        #[arg(long)]
        email: String,
        /// The display name.
        #[arg(long)]
        name: String,
        /// The tenant id the member belongs to.
        #[arg(long)]
        tenant: Option<String>,
        /// Make a platform admin instead of a member.
        #[arg(long, default_value_t = false)]
        admin: bool,
    },
    #[command(flatten)]
    Other(UserCommand),
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// List accounts, newest first: email, name, role, status, tenant, creation time.
    List {
        /// Only the members of this tenant (its id).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Suspend an account: its sessions and keys are refused from the next request.
    Suspend {
        /// The account's email.
        email: String,
    },
    /// Lift a suspension.
    Activate {
        /// The account's email.
        email: String,
    },
    /// Set a new password and revoke every session of the account.
    ///
    /// The password (12 to 72 bytes) comes from GC_ADMIN_PASSWORD or, when that is unset, from
    /// standard input. Failed sign-in attempts are forgotten.
    ResetPassword {
        /// The account's email.
        email: String,
    },
    /// Move an account to a tenant, or with `none` unassign it.
    ///
    /// Keys the member made in the tenant it leaves are revoked, as with the API.
    Assign {
        /// The account's email.
        email: String,
        /// The tenant id, or `none`.
        #[arg(value_name = "TENANT_ID|none")]
        tenant: String,
    },
    /// Make an account a platform admin.
    Promote {
        /// The account's email.
        email: String,
    },
    /// Make a platform admin a plain member again.
    Demote {
        /// The account's email.
        email: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// List tenants, newest first: id, name, region, status, AI access, creation time.
    List,
    /// Create a tenant and print its id.
    Create {
        /// The tenant's name (1 to 100 characters).
        #[arg(long)]
        name: String,
        /// The gateway region: AIHK or AICA.
        #[arg(long)]
        region: String,
        /// Allow AI access (it is ready once the tenant has a usable AI key).
        #[arg(long, default_value_t = false)]
        ai_enabled: bool,
    },
    /// Change a tenant's name, region or AI switch (limits: `admin limits tenant`).
    Update {
        /// The tenant id.
        id: String,
        #[arg(long)]
        name: Option<String>,
        /// AIHK or AICA.
        #[arg(long)]
        region: Option<String>,
        /// true or false.
        #[arg(long)]
        ai_enabled: Option<bool>,
    },
    /// Suspend a tenant: every member's request is refused with tenant_suspended.
    Suspend {
        /// The tenant id.
        id: String,
    },
    /// Lift a tenant's suspension.
    Activate {
        /// The tenant id.
        id: String,
    },
}

/// The service's configuration; every field is a flag and an environment variable.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Database: sqlite://PATH (created if missing) or postgres://USER:PASSWORD@HOST/DB.
    #[arg(
        long,
        env = "GC_DATABASE_URL",
        default_value = "sqlite://data/gc.db",
        hide_env_values = true
    )]
    pub database_url: String,
    /// Address to listen on.
    #[arg(long, env = "GC_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    /// The origin browsers see (scheme://host[:port]): cookie-authenticated writes must send
    /// it as Origin; https makes cookies Secure.
    #[arg(
        long,
        env = "GC_PUBLIC_ORIGIN",
        default_value = "http://127.0.0.1:8080"
    )]
    pub public_origin: String,
    /// 32 random bytes, base64, that seal tenant AI keys. Default: generated into master.key
    /// in the data folder (mode 0600) on first start, with a warning.
    #[arg(long, env = "GC_MASTER_KEY", hide_env_values = true)]
    pub master_key: Option<String>,
    /// Comma-separated older master keys, still accepted for opening sealed keys (rotation).
    #[arg(long, env = "GC_MASTER_KEY_PREVIOUS", hide_env_values = true)]
    pub master_key_previous: Option<String>,
    /// Create this platform admin at start if it does not exist (needs the password too).
    #[arg(long, env = "GC_BOOTSTRAP_ADMIN_EMAIL")]
    pub bootstrap_admin_email: Option<String>,
    /// The bootstrap admin's password (12 to 72 bytes).
    #[arg(long, env = "GC_BOOTSTRAP_ADMIN_PASSWORD", hide_env_values = true)]
    pub bootstrap_admin_password: Option<String>,
    /// Comma-separated CIDRs of reverse proxies whose X-Forwarded-For is believed for the
    /// client IP. Default: none (the peer address is the client).
    #[arg(long, env = "GC_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// bcrypt cost for passwords (4 to 31; below 10 only for tests, with a warning).
    #[arg(long, env = "GC_BCRYPT_COST", default_value_t = 12)]
    pub bcrypt_cost: u32,
    /// Whether anyone may sign up (new accounts wait unassigned for an admin).
    #[arg(long, env = "GC_SIGNUP", default_value = "open", value_parser = ["open", "closed"])]
    pub signup: String,
    /// Mount the OpenAI-compatible /api/v1/chat/completions route.
    #[arg(long, env = "GC_CHAT_COMPLETIONS", default_value_t = false, action = clap::ArgAction::Set)]
    pub chat_completions: bool,
    /// OpenAI-compatible base URL of the AIHK region's gateway (e.g. https://host/v1).
    /// Default: unset, the region is not configured.
    #[arg(long, env = "GC_GATEWAY_AIHK_URL", hide_env_values = true)]
    pub gateway_aihk_url: Option<String>,
    /// OpenAI-compatible base URL of the AICA region's gateway. Default: unset.
    #[arg(long, env = "GC_GATEWAY_AICA_URL", hide_env_values = true)]
    pub gateway_aica_url: Option<String>,
    /// The model `auto` resolves to in the AIHK region.
    #[arg(long, env = "GC_GATEWAY_AIHK_MODEL", default_value = "gpt-4o-mini")]
    pub gateway_aihk_model: String,
    /// The model `auto` resolves to in the AICA region.
    #[arg(long, env = "GC_GATEWAY_AICA_MODEL", default_value = "gpt-4o-mini")]
    pub gateway_aica_model: String,
    /// Models `GET /models` lists for AIHK after `auto` (comma-separated). Default: the
    /// region's model.
    #[arg(long, env = "GC_GATEWAY_AIHK_MODELS", value_delimiter = ',')]
    pub gateway_aihk_models: Vec<String>,
    /// Models `GET /models` lists for AICA after `auto` (comma-separated). Default: the
    /// region's model.
    #[arg(long, env = "GC_GATEWAY_AICA_MODELS", value_delimiter = ',')]
    pub gateway_aica_models: Vec<String>,
    /// Serve `GET /metrics` (Prometheus text); `false` turns it off.
    #[arg(long, env = "GC_METRICS", default_value_t = true, action = clap::ArgAction::Set)]
    pub metrics: bool,
    /// Serve `/metrics` only on this address (e.g. `127.0.0.1:9090`). Default: the main
    /// listener.
    #[arg(long, env = "GC_METRICS_BIND")]
    pub metrics_bind: Option<SocketAddr>,
    /// Seconds without an upstream response (504) or, in a stream, without a chunk (an
    /// in-band error event).
    #[arg(long, env = "GC_GATEWAY_TIMEOUT_S", default_value_t = 60)]
    pub gateway_timeout_s: u64,
    /// Seconds to connect to an upstream gateway.
    #[arg(long, env = "GC_GATEWAY_CONNECT_TIMEOUT_S", default_value_t = 10)]
    pub gateway_connect_timeout_s: u64,
    /// Completion tokens a run under a token limit reserves at admission when it names no
    /// `max_tokens` / `max_completion_tokens` (it settles to its true usage when it ends).
    #[arg(long, env = "GC_RESERVE_COMPLETION_TOKENS", default_value_t = 1024,
        value_parser = clap::value_parser!(u64).range(1..=1_000_000_000_000))]
    pub reserve_completion_tokens: u64,
    /// A JSON price table (model → input and output price per million tokens and a
    /// currency) over the shipped prices (decision 0038). Default: the shipped prices, USD.
    #[arg(long, env = "GC_PRICES")]
    pub prices: Option<PathBuf>,
    /// GitHub REST API base for Guard repository scans.
    #[arg(
        long,
        env = "GC_GITHUB_API_URL",
        default_value = "https://api.github.com",
        hide_env_values = true
    )]
    pub github_api_url: String,
    /// GitHub codeload base for Guard repository tarballs.
    #[arg(
        long,
        env = "GC_GITHUB_CODELOAD_URL",
        default_value = "https://codeload.github.com",
        hide_env_values = true
    )]
    pub github_codeload_url: String,
    /// Optional read-only GitHub token, for the API's rate limit (public repositories only,
    /// still). Default: unset.
    #[arg(long, env = "GC_GITHUB_TOKEN", hide_env_values = true)]
    pub github_token: Option<String>,
    /// Anonymous Guard scans per minute per client IP.
    #[arg(long, env = "GC_GUARD_ANON_PER_MIN", default_value_t = 30)]
    pub guard_anon_per_min: u32,
    /// Guard scans running at once, on the Guard's own threads. Default: the number of cores.
    #[arg(long, env = "GC_GUARD_CONCURRENCY")]
    pub guard_concurrency: Option<usize>,
    /// Guard scans waiting for a slot; beyond that 503 `scanner_busy`. Default: twice the
    /// concurrency.
    #[arg(long, env = "GC_GUARD_QUEUE")]
    pub guard_queue: Option<usize>,
    /// Guard scans in flight per tenant (or account without one); beyond that 429.
    #[arg(long, env = "GC_GUARD_PER_CALLER", default_value_t = 4)]
    pub guard_per_caller: usize,
    /// Guard scans in flight per anonymous client IP; beyond that 429.
    #[arg(long, env = "GC_GUARD_PER_ANON_IP", default_value_t = 2)]
    pub guard_per_anon_ip: usize,
    /// Percent of the Guard's running slots, waiting places and memory that anonymous scans
    /// may take together; the rest is kept for signed-in callers (503 `scanner_busy` for an
    /// anonymous scan beyond it).
    #[arg(long, env = "GC_GUARD_ANON_SHARE", default_value_t = 50)]
    pub guard_anon_share: u8,
    /// MiB all Guard scans may hold together; a scan without room gets 503 `scanner_busy`.
    #[arg(long, env = "GC_GUARD_MEMORY_MIB", default_value_t = 256)]
    pub guard_memory_mib: u64,
    /// Seconds a Guard scan (queue, download, unpacking, scanning) may take; then it is
    /// stopped and answered 504.
    #[arg(long, env = "GC_GUARD_TIMEOUT_S", default_value_t = 20)]
    pub guard_timeout_s: u64,
    /// Sign-ins and sign-ups per client IP per minute; beyond that 429 `rate_limited`.
    #[arg(long, env = "GC_AUTH_PER_IP_PER_MIN", default_value_t = 20)]
    pub auth_per_ip_per_min: u32,
    /// Sign-in and sign-up password checks in flight per client IP; beyond that 429
    /// `rate_limited` at once, so one client cannot fill the shared hashing queue.
    #[arg(long, env = "GC_AUTH_PER_IP_IN_FLIGHT", default_value_t = 1)]
    pub auth_per_ip_in_flight: u32,
    /// Client IPs remembered by each per-IP limit (sign-in/sign-up, anonymous Guard scans);
    /// when a table is full of active clients, newcomers share one overflow allowance.
    #[arg(long, env = "GC_PER_IP_CLIENTS_MAX", default_value_t = 100_000)]
    pub per_ip_clients_max: usize,
    /// Password checks waiting for a hashing thread; beyond that 503 `busy`.
    #[arg(long, env = "GC_HASH_QUEUE", default_value_t = 4)]
    pub hash_queue: usize,
    /// Usage reports running at once for one tenant (admins' reports count as one tenant);
    /// beyond that 429 `rate_limited` at once.
    #[arg(long, env = "GC_USAGE_REPORTS_PER_TENANT", default_value_t = 2)]
    pub usage_reports_per_tenant: usize,
    /// Usage reports running at once in all; beyond that 503 `busy` at once. Default: a
    /// quarter of the database pool (2 on SQLite, 4 on PostgreSQL); never more than half.
    #[arg(long, env = "GC_USAGE_REPORTS_MAX")]
    pub usage_reports_max: Option<usize>,
    /// Tests only (no flag, no variable): milliseconds each usage report holds its place
    /// before it runs, so the bounds can be tested without millions of rows.
    #[arg(skip)]
    pub usage_report_test_hold_ms: u64,
    /// Tests only (no flag, no variable): places in the run-record queue instead of
    /// `RUN_QUEUE`, and milliseconds the writer waits before each batch, so a writer that is
    /// behind can be tested without hundreds of thousands of runs (decision 0033).
    #[arg(skip)]
    pub run_queue_test_size: Option<usize>,
    #[arg(skip)]
    pub run_writer_test_hold_ms: u64,
    /// Hashing places (running or waiting) that sign-in and sign-up may not take, kept for
    /// signed-in callers' checks (change-password); anonymous checks keep at least one.
    #[arg(long, env = "GC_HASH_RESERVED", default_value_t = 2)]
    pub hash_reserved: usize,
    /// Seconds for the request headers to arrive (else 408 and the connection is closed).
    #[arg(long, env = "GC_HEADER_TIMEOUT_S", default_value_t = 5)]
    pub header_timeout_s: u64,
    /// Seconds for a request body to arrive after its headers (else 408, closed).
    #[arg(long, env = "GC_BODY_TIMEOUT_S", default_value_t = 10)]
    pub body_timeout_s: u64,
    /// Seconds an idle kept-alive connection stays open.
    #[arg(long, env = "GC_KEEP_ALIVE_S", default_value_t = 5)]
    pub keep_alive_s: u64,
    /// Open client connections at most, split across workers. Default: the open-file limit
    /// less 256 (kept for files, the database and upstreams).
    #[arg(long, env = "GC_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Hours a session may stay unused before it expires.
    #[arg(long, env = "GC_SESSION_IDLE_HOURS", default_value_t = 24)]
    pub session_idle_hours: i64,
    /// Days after which a session expires however much it is used.
    #[arg(long, env = "GC_SESSION_MAX_DAYS", default_value_t = 30)]
    pub session_max_days: i64,
    /// Database connections per process. Default: 8 on SQLite, 16 on PostgreSQL.
    #[arg(long, env = "GC_DB_POOL_SIZE")]
    pub db_pool_size: Option<u32>,
    /// HTTP worker threads. Default: the number of cores.
    #[arg(long, env = "GC_WORKERS")]
    pub workers: Option<usize>,
    /// Threads per worker for database and bcrypt work.
    #[arg(long, env = "GC_BLOCKING_THREADS", default_value_t = 4)]
    pub blocking_threads: usize,
    /// Log filter (tracing syntax, e.g. info or gc_http_api=debug,info).
    #[arg(long, env = "GC_LOG", default_value = "info")]
    pub log: String,
    /// Log format: text, or json for one JSON object per line.
    #[arg(long, env = "GC_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

impl Config {
    /// Defaults for everything, on this database: for tests and tools.
    pub fn with_database(database_url: impl Into<String>) -> Self {
        Self {
            database_url: database_url.into(),
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            public_origin: "http://127.0.0.1:8080".into(),
            master_key: None,
            master_key_previous: None,
            bootstrap_admin_email: None,
            bootstrap_admin_password: None,
            trusted_proxies: Vec::new(),
            bcrypt_cost: 12,
            signup: "open".into(),
            chat_completions: false,
            gateway_aihk_url: None,
            gateway_aica_url: None,
            gateway_aihk_model: "gpt-4o-mini".into(),
            gateway_aica_model: "gpt-4o-mini".into(),
            gateway_aihk_models: Vec::new(),
            gateway_aica_models: Vec::new(),
            metrics: true,
            metrics_bind: None,
            gateway_timeout_s: 60,
            gateway_connect_timeout_s: 10,
            reserve_completion_tokens: 1024,
            prices: None,
            github_api_url: "https://api.github.com".into(),
            github_codeload_url: "https://codeload.github.com".into(),
            github_token: None,
            guard_anon_per_min: 30,
            guard_concurrency: None,
            guard_queue: None,
            guard_per_caller: 4,
            guard_per_anon_ip: 2,
            guard_anon_share: 50,
            guard_memory_mib: 256,
            guard_timeout_s: 20,
            auth_per_ip_per_min: 20,
            auth_per_ip_in_flight: 1,
            per_ip_clients_max: 100_000,
            hash_queue: 4,
            usage_reports_per_tenant: 2,
            usage_reports_max: None,
            usage_report_test_hold_ms: 0,
            run_queue_test_size: None,
            run_writer_test_hold_ms: 0,
            hash_reserved: 2,
            header_timeout_s: 5,
            body_timeout_s: 10,
            keep_alive_s: 5,
            max_connections: None,
            session_idle_hours: 24,
            session_max_days: 30,
            db_pool_size: None,
            workers: None,
            blocking_threads: 4,
            log: "info".into(),
            log_format: "text".into(),
        }
    }

    /// Each region's models (`auto`'s model and, when `GC_GATEWAY_<REGION>_MODELS` is set, the
    /// allow-list: that model and the listed ones) and the price table of `GC_PRICES` (a file
    /// that cannot be read or mixes currencies stops the start).
    pub fn model_catalog(&self) -> anyhow::Result<gc_domain::policy::models::Catalog> {
        use gc_domain::policy::models::{Catalog, RegionModels};
        use gc_domain::values::Region;
        let mut regions = std::collections::HashMap::new();
        for (region, default, models) in [
            (
                Region::Aihk,
                &self.gateway_aihk_model,
                &self.gateway_aihk_models,
            ),
            (
                Region::Aica,
                &self.gateway_aica_model,
                &self.gateway_aica_models,
            ),
        ] {
            let default = default.trim().to_owned();
            let listed: Vec<String> = models
                .iter()
                .map(|m| m.trim().to_owned())
                .filter(|m| !m.is_empty() && m != "auto")
                .collect();
            let allowed = (!listed.is_empty()).then(|| {
                let mut all = vec![default.clone()];
                for m in listed {
                    if !all.contains(&m) {
                        all.push(m);
                    }
                }
                all
            });
            regions.insert(
                region,
                RegionModels {
                    default_model: default,
                    allowed,
                },
            );
        }
        let prices = match &self.prices {
            None => gc_domain::policy::prices::Prices::shipped(),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("GC_PRICES: {}: {e}", path.display()))?;
                gc_domain::policy::prices::Prices::from_json(&text)
                    .map_err(|e| anyhow::anyhow!(e))?
            }
        };
        Ok(Catalog::new(regions, prices))
    }

    /// The folder for local state (the SQLite file, a generated master key).
    pub fn data_dir(&self) -> PathBuf {
        self.database_url
            .strip_prefix("sqlite://")
            .map(PathBuf::from)
            .and_then(|p| p.parent().map(PathBuf::from))
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("data"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mistyped_variable_is_named_with_the_closest_known_one() {
        let dotenv = vec!["GC_GATWAY_AIHK_URL".to_owned()];
        let got = unknown_variables(
            [
                "GC_GATWAY_AIHK_URL",
                "GC_BCRYPT_COTS",
                "GC_BIND",
                "GC_SOMETHING_ELSE_ENTIRELY",
                "PATH",
            ],
            &dotenv,
        );
        assert_eq!(
            got,
            vec![
                UnknownVariable {
                    name: "GC_BCRYPT_COTS".into(),
                    source: "the environment",
                    closest: Some("GC_BCRYPT_COST".into()),
                },
                UnknownVariable {
                    name: "GC_GATWAY_AIHK_URL".into(),
                    source: ".env",
                    closest: Some("GC_GATEWAY_AIHK_URL".into()),
                },
                UnknownVariable {
                    name: "GC_SOMETHING_ELSE_ENTIRELY".into(),
                    source: "the environment",
                    closest: None,
                },
            ]
        );
        assert!(known_variables().contains(&"GC_CHAT_COMPLETIONS".to_owned()));
        assert!(known_variables().contains(&"GC_ADMIN_PASSWORD".to_owned()));
    }

    #[test]
    fn the_project_s_own_variables_are_never_reported() {
        let got = unknown_variables(
            [
                "GC_REQUIRE_BROWSER",
                "GC_REQUIRE_SOMETHING_NEW",
                "GC_TEST_PYTHON",
                "GC_BENCH_ONLY",
                "GC_KEY",
                "GC_API_KEY",
                "GC_CONSOLE_SCREENSHOTS",
                "GC_BIND",
                "GC_BINDD",
            ],
            &[],
        );
        assert_eq!(
            got.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(),
            vec!["GC_BINDD"]
        );
    }

    /// Every `GC_*` name written anywhere in the repository (code, tests, CI, docs, samples) is
    /// one gc-server reads or one of the tools': none would be reported as unknown, except the
    /// mistyped names the warning's own tests and docs use as examples. A new variable must be
    /// a flag of [`Config`] or listed in [`OTHER_VARIABLES`] or [`TOOL_VARIABLES`].
    #[test]
    fn no_variable_the_project_uses_is_reported_as_unknown() {
        const MISTYPED_EXAMPLES: &[&str] = &[
            "GC_BCRYPT_COTS",
            "GC_BINDD",
            "GC_FOO",
            "GC_GATWAY_AIHK_URL",
            "GC_SOMETHING_ELSE_ENTIRELY",
        ];
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut names = std::collections::BTreeSet::new();
        let mut files = 0;
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                if path.is_dir() {
                    // Build output, history, and the Guard's evaluation corpus (third-party
                    // samples, not the project's variables).
                    if !matches!(name.as_str(), "target" | ".git" | "node_modules" | "eval") {
                        dirs.push(path);
                    }
                    continue;
                }
                let Ok(text) = std::fs::read_to_string(&path) else {
                    continue;
                };
                files += 1;
                let bytes = text.as_bytes();
                for (at, _) in text.match_indices("GC_") {
                    if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                        continue;
                    }
                    let end = text[at..]
                        .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                        .map_or(text.len(), |n| at + n);
                    let name = &text[at..end];
                    // `GC_GATEWAY_<REGION>_URL`-style families are written with a placeholder.
                    if !name.ends_with('_') && !MISTYPED_EXAMPLES.contains(&name) {
                        names.insert(name.to_owned());
                    }
                }
            }
        }
        assert!(files > 100, "the repository was not found ({files} files)");
        assert!(names.contains("GC_REQUIRE_POSTGRES"), "{names:?}");
        let unknown = unknown_variables(names.iter().map(String::as_str), &[]);
        assert!(
            unknown.is_empty(),
            "GC_* names used in the repository that gc-server would report as unknown: {unknown:?}"
        );
    }
}
