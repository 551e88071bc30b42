//! The `gc-server` binary: `serve` (default), `migrate`, `admin create`.

use std::io::Read;

use anyhow::Context;
use chrono::Utc;
use clap::Parser;
use gc_domain::accounts::{create_account, Signup};
use gc_domain::model::Role;
use gc_server::config::{AdminCommand, Cli, Command};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    gc_server::init_tracing(&cli.config);
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(cli.config),
        Command::Guard { args } => {
            let rest = match args.split_first() {
                Some((first, rest)) if first == "scan" => rest,
                _ => {
                    eprintln!("usage: gc-server guard scan [--format text|json|sarif] PATH|-");
                    std::process::exit(2);
                }
            };
            std::process::exit(gc_guard::cli::main(rest));
        }
        Command::Migrate => {
            let store = gc_server::open_store(&cli.config)?;
            println!("database at the current schema ({})", store.backend());
            Ok(())
        }
        Command::Admin {
            command: AdminCommand::Create { email, name },
        } => {
            let password = match std::env::var("GC_ADMIN_PASSWORD") {
                Ok(p) => p,
                Err(_) => {
                    let mut p = String::new();
                    std::io::stdin()
                        .read_to_string(&mut p)
                        .context("reading the password from stdin")?;
                    p.trim_end_matches(['\r', '\n']).to_owned()
                }
            };
            let store = gc_server::open_store(&cli.config)?;
            let hasher = gc_server::hasher(&cli.config)?;
            let signup =
                Signup::parse(&email, password, &name).map_err(|e| anyhow::anyhow!("{e}"))?;
            let user = create_account(
                &store,
                &hasher,
                &signup,
                Role::PlatformAdmin,
                None,
                Utc::now(),
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!(
                "created platform admin {} ({})",
                user.email.as_str(),
                user.id
            );
            Ok(())
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
