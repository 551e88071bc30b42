//! `guard-eval [--strict] [--verbose] [DIR | heldout:DIR]...`: the Guard's recall and false
//! positives (overall and per category) on labelled sets, the issue-13 targets, and the
//! throughput on the 10 MiB benchmark text. `cargo xtask guard-eval` runs it on the development
//! corpus (`../shared/guard-corpus`) and the Guard's own sets (`crates/guard/eval/dev` and
//! `crates/guard/eval/heldout`). A set given as `heldout:DIR` is reported by figures only (no
//! per-sample lines), so nobody tunes against it. `--strict` exits 1 when a target is missed;
//! `GUARD_EVAL_VERBOSE=1` (or `--verbose`) lists every finding of the other sets.

use gc_guard::eval::{check_targets, evaluate, targets_for, throughput};
use std::path::Path;
use std::process::ExitCode;

/// The throughput target on the 10 MiB benchmark (MiB/s).
const THROUGHPUT_TARGET: f64 = 100.0;

fn main() -> ExitCode {
    let mut strict = false;
    let mut verbose = std::env::var_os("GUARD_EVAL_VERBOSE").is_some();
    let mut dirs: Vec<(String, bool)> = Vec::new();
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--strict" => strict = true,
            "--verbose" | "-v" => verbose = true,
            _ => match a.strip_prefix("heldout:") {
                Some(d) => dirs.push((d.to_string(), false)),
                None => dirs.push((a, true)),
            },
        }
    }
    if dirs.is_empty() {
        dirs.push(("../shared/guard-corpus".to_string(), true));
    }
    let scanner = match gc_guard::Scanner::new() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("guard-eval: compiling the rules: {e}");
            return ExitCode::from(2);
        }
    };
    let mut summary = Vec::new();
    for (dir, per_sample) in &dirs {
        let path = Path::new(dir);
        let set = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(dir)
            .to_string();
        let set = if set == "dev" || set.starts_with("heldout") {
            format!("guard-eval/{set}")
        } else {
            set
        };
        let eval = match evaluate(&scanner, path) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("guard-eval: reading {dir}: {e}");
                return ExitCode::from(2);
            }
        };
        let label = if *per_sample {
            ""
        } else {
            " (held out: figures only)"
        };
        println!("== {set}{label}: {dir}");
        print!("{}", eval.report_with(verbose, *per_sample));
        let key = match set.as_str() {
            "guard-corpus" => "guard-corpus",
            "cases" => "cases",
            "h9" => "h9",
            _ => "own",
        };
        for (what, v, ok) in check_targets(&eval, &targets_for(key)) {
            summary.push((format!("{set}: {what}"), format!("{:.1}%", v * 100.0), ok));
        }
    }
    let t = throughput(&scanner, 5);
    let cpu = t.cpu.map_or_else(
        || "unknown".to_string(),
        |c| format!("{c:.1} MiB per CPU second"),
    );
    println!(
        "== throughput: 10 MiB benchmark text, one thread, best of 5: {:.1} MiB/s wall clock, {cpu}",
        t.wall
    );
    summary.push((
        format!("throughput >= {THROUGHPUT_TARGET:.0} MiB/s (CPU time when known)"),
        format!("{:.1} MiB/s", t.figure()),
        t.figure() >= THROUGHPUT_TARGET,
    ));
    println!("== targets");
    let mut missed = 0;
    for (what, value, ok) in &summary {
        if !ok {
            missed += 1;
        }
        println!(
            "  {} {what:<60} {value}",
            if *ok { "met   " } else { "MISSED" }
        );
    }
    if strict && missed > 0 {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
