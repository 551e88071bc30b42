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
//! | `GC_GITHUB_API_URL`, `GC_GITHUB_CODELOAD_URL` | `https://api.github.com`, `https://codeload.github.com` | Guard repository fetch |
//! | `GC_GITHUB_TOKEN` | unset | optional read-only token for the GitHub API rate limit |
//! | `GC_GUARD_ANON_PER_MIN` | `30` | anonymous Guard scans per minute per client IP |
//! | `GC_SESSION_IDLE_HOURS`, `GC_SESSION_MAX_DAYS` | `24`, `30` | session idle and absolute lifetime |
//! | `GC_DB_POOL_SIZE` | `8` (SQLite), `16` (PostgreSQL) | database connections per process |
//! | `GC_WORKERS` | number of cores | HTTP worker threads |
//! | `GC_BLOCKING_THREADS` | `4` | threads per worker for database and bcrypt work |
//! | `GC_LOG` | `info` | tracing filter; `GC_LOG_FORMAT=json` for JSON lines |

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "gc-server",
    version,
    about = "gc: a multi-tenant workspace service with an AI gateway"
)]
pub struct Cli {
    #[command(flatten)]
    pub config: Config,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API (the default).
    Serve,
    /// Apply pending database migrations and exit.
    Migrate,
    /// The Guard scanner on local files: `guard scan [--format text|json|sarif] PATH|-`.
    Guard {
        /// `scan`, then its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Administration from the command line.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create a platform admin; the password comes from stdin or GC_ADMIN_PASSWORD.
    Create {
        #[arg(long)]
        email: String,
        #[arg(long)]
        name: String,
    },
}

#[derive(Debug, Clone, Args)]
pub struct Config {
    #[arg(long, env = "GC_DATABASE_URL", default_value = "sqlite://data/gc.db")]
    pub database_url: String,
    #[arg(long, env = "GC_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    #[arg(
        long,
        env = "GC_PUBLIC_ORIGIN",
        default_value = "http://127.0.0.1:8080"
    )]
    pub public_origin: String,
    #[arg(long, env = "GC_MASTER_KEY", hide_env_values = true)]
    pub master_key: Option<String>,
    #[arg(long, env = "GC_MASTER_KEY_PREVIOUS", hide_env_values = true)]
    pub master_key_previous: Option<String>,
    #[arg(long, env = "GC_BOOTSTRAP_ADMIN_EMAIL")]
    pub bootstrap_admin_email: Option<String>,
    #[arg(long, env = "GC_BOOTSTRAP_ADMIN_PASSWORD", hide_env_values = true)]
    pub bootstrap_admin_password: Option<String>,
    #[arg(long, env = "GC_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    #[arg(long, env = "GC_BCRYPT_COST", default_value_t = 12)]
    pub bcrypt_cost: u32,
    #[arg(long, env = "GC_SIGNUP", default_value = "open", value_parser = ["open", "closed"])]
    pub signup: String,
    #[arg(long, env = "GC_CHAT_COMPLETIONS", default_value_t = false, action = clap::ArgAction::Set)]
    pub chat_completions: bool,
    #[arg(long, env = "GC_GATEWAY_AIHK_URL")]
    pub gateway_aihk_url: Option<String>,
    #[arg(long, env = "GC_GATEWAY_AICA_URL")]
    pub gateway_aica_url: Option<String>,
    #[arg(long, env = "GC_GATEWAY_AIHK_MODEL", default_value = "gpt-4o-mini")]
    pub gateway_aihk_model: String,
    #[arg(long, env = "GC_GATEWAY_AICA_MODEL", default_value = "gpt-4o-mini")]
    pub gateway_aica_model: String,
    #[arg(long, env = "GC_GATEWAY_AIHK_MODELS", value_delimiter = ',')]
    pub gateway_aihk_models: Vec<String>,
    #[arg(long, env = "GC_GATEWAY_AICA_MODELS", value_delimiter = ',')]
    pub gateway_aica_models: Vec<String>,
    #[arg(long, env = "GC_METRICS", default_value_t = true, action = clap::ArgAction::Set)]
    pub metrics: bool,
    #[arg(long, env = "GC_METRICS_BIND")]
    pub metrics_bind: Option<SocketAddr>,
    #[arg(long, env = "GC_GATEWAY_TIMEOUT_S", default_value_t = 60)]
    pub gateway_timeout_s: u64,
    #[arg(long, env = "GC_GATEWAY_CONNECT_TIMEOUT_S", default_value_t = 10)]
    pub gateway_connect_timeout_s: u64,
    #[arg(
        long,
        env = "GC_GITHUB_API_URL",
        default_value = "https://api.github.com"
    )]
    pub github_api_url: String,
    #[arg(
        long,
        env = "GC_GITHUB_CODELOAD_URL",
        default_value = "https://codeload.github.com"
    )]
    pub github_codeload_url: String,
    #[arg(long, env = "GC_GITHUB_TOKEN", hide_env_values = true)]
    pub github_token: Option<String>,
    #[arg(long, env = "GC_GUARD_ANON_PER_MIN", default_value_t = 30)]
    pub guard_anon_per_min: u32,
    #[arg(long, env = "GC_SESSION_IDLE_HOURS", default_value_t = 24)]
    pub session_idle_hours: i64,
    #[arg(long, env = "GC_SESSION_MAX_DAYS", default_value_t = 30)]
    pub session_max_days: i64,
    #[arg(long, env = "GC_DB_POOL_SIZE")]
    pub db_pool_size: Option<u32>,
    #[arg(long, env = "GC_WORKERS")]
    pub workers: Option<usize>,
    #[arg(long, env = "GC_BLOCKING_THREADS", default_value_t = 4)]
    pub blocking_threads: usize,
    #[arg(long, env = "GC_LOG", default_value = "info")]
    pub log: String,
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
            github_api_url: "https://api.github.com".into(),
            github_codeload_url: "https://codeload.github.com".into(),
            github_token: None,
            guard_anon_per_min: 30,
            session_idle_hours: 24,
            session_max_days: 30,
            db_pool_size: None,
            workers: None,
            blocking_threads: 4,
            log: "info".into(),
            log_format: "text".into(),
        }
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
