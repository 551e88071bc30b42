//! Prints the rule catalog as a Markdown table (for docs/guard.md).
//!
//! `cargo run -p gc-guard --example rules_table`

fn main() {
    print!("{}", gc_guard::rules::markdown_table());
}
