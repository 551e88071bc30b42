//! The `gc-server` binary: `serve` (default), `migrate`, `openapi`, `guard scan`, `admin ...`.
//!
//! Start-up reads `.env` from the working directory first (variables already set win), then
//! the flags and environment.

use std::io::Write;
use std::path::Path;

use clap::Parser;
use gc_guard::cli::{FailOn, OutputFormat, EXIT_ERROR};
use gc_server::config::{Cli, Command, FailOnLevel, GuardCommand, GuardScanArgs, ScanFormat};

/// jemalloc, not glibc's malloc: about a tenth fewer instructions per `/run` and per record
/// list, and less CPU per run under load, for about 3 MiB more idle RSS (decision 0020). Its
/// settings are built in (`.cargo/config.toml`, `JEMALLOC_SYS_WITH_MALLOC_CONF`); an operator
/// may override them with `_RJEM_MALLOC_CONF`. Built without the `jemalloc` feature, the binary
/// uses the system allocator (for heap profilers that replace malloc).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    // Before clap reads the environment, and before any thread exists.
    gc_server::config::load_dotenv(Path::new(".env"))?;
    let cli = Cli::parse();
    gc_server::init_tracing(&cli.config);
    // Mistyped variables (in .env or the environment) would otherwise be silently ignored.
    gc_server::config::warn_unknown_variables(Path::new(".env"));
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(cli.config),
        Command::Guard {
            command: GuardCommand::Scan(args),
        } => std::process::exit(guard_scan(&cli.config, &args)),
        Command::Migrate => {
            let store = gc_server::open_store(&cli.config)?;
            println!("database at the current schema ({})", store.backend());
            Ok(())
        }
        Command::Openapi => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", gc_server::openapi_document())?;
            Ok(())
        }
        Command::Admin { json, command } => {
            gc_server::admin_cli::run(&cli.config, command, json, &mut std::io::stdout().lock())
        }
    }
}

/// `guard scan`: the exit code of [`gc_guard::cli`] (0 below `--fail-on`, 1 at or above it, 2
/// when nothing could be scanned).
fn guard_scan(config: &gc_server::Config, args: &GuardScanArgs) -> i32 {
    let format = match args.format {
        ScanFormat::Text => OutputFormat::Text,
        ScanFormat::Json => OutputFormat::Json,
        ScanFormat::Sarif => OutputFormat::Sarif,
    };
    let fail_on = match args.fail_on {
        FailOnLevel::Warn => FailOn::Warn,
        FailOnLevel::Fail => FailOn::Fail,
    };
    let fetch = gc_server::fetch_config(config);
    let mut out = std::io::stdout().lock();
    match gc_guard::cli::run_fetching(&args.target, format, &fetch, &mut out) {
        Ok(verdict) => fail_on.exit_code(verdict),
        Err(e) => {
            eprintln!("guard scan: {}: {e}", args.target);
            EXIT_ERROR
        }
    }
}

fn serve(config: gc_server::Config) -> anyhow::Result<()> {
    let system = actix_web::rt::System::new();
    system.block_on(async move {
        let state = gc_server::build_state(&config)?;
        let running = gc_server::start(&config, state, true)?;
        tracing::info!(addr = %running.addr, "gc-server listening");
        running.wait().await?;
        tracing::info!("gc-server stopped");
        Ok(())
    })
}
