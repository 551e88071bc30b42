//! Scans the 10 MiB benchmark text once, for instruction counts under callgrind (issue 29):
//!
//! ```text
//! cargo build --release -p gc-guard --example bench_once
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*bench_once*scan_once*' \
//!     target/release/examples/bench_once
//! ```
//!
//! Only `scan_once` is counted (compiling the rules and building the text are not).

use gc_guard::eval::{benchmark_text, BENCHMARK_BYTES};
use gc_guard::Scanner;
use std::hint::black_box;

#[inline(never)]
fn scan_once(scanner: &Scanner, text: &str) -> usize {
    scanner.scan_text(None, black_box(text)).len()
}

fn main() {
    let scanner = match Scanner::new() {
        Ok(s) => s,
        Err(e) => panic!("rules must compile: {e}"),
    };
    // Rule regexes compile at their first use: compile them all here, outside the count.
    if let Err(e) = scanner.compile_all() {
        panic!("rules must compile: {e}");
    }
    let text = benchmark_text(BENCHMARK_BYTES);
    let findings = scan_once(&scanner, &text);
    println!("{} bytes, {findings} findings", text.len());
}
