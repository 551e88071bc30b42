//! `guard-eval [DIR]`: the Guard's recall, false positives (overall and per category) and
//! throughput on a labelled corpus (default `../shared/guard-corpus`). `cargo xtask guard-eval`
//! runs it; set `GUARD_EVAL_VERBOSE=1` to list every finding.

use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "../shared/guard-corpus".to_string());
    let scanner = match gc_guard::Scanner::new() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("guard-eval: compiling the rules: {e}");
            return ExitCode::from(2);
        }
    };
    match gc_guard::eval::evaluate(&scanner, std::path::Path::new(&dir)) {
        Ok(eval) => {
            let verbose = std::env::var_os("GUARD_EVAL_VERBOSE").is_some();
            print!("{}", eval.report(verbose));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("guard-eval: reading {dir}: {e}");
            ExitCode::from(2)
        }
    }
}
