//! Runs the corpus evaluation (the code behind `cargo xtask guard-eval DIR`).
//!
//! `cargo run -p gc-guard --example eval -- ../shared/guard-corpus`

#[path = "../../../xtask/src/guard_eval.rs"]
mod guard_eval;

fn main() -> anyhow::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "../shared/guard-corpus".to_string());
    guard_eval::run(std::path::Path::new(&dir))
}
