//! Prints the rule catalog as a Markdown table (for docs/guard.md).
//!
//! `cargo run -p gc-guard --example rules_table`

fn main() {
    println!("| id | severity | category | what it catches |");
    println!("|---|---|---|---|");
    for r in gc_guard::rules::RULES {
        println!(
            "| `{}` | {} | {} | {} |",
            r.id,
            r.severity,
            r.category.as_str(),
            r.description.replace('|', "\\|")
        );
    }
}
