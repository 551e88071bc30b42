//! Prints the findings and the capability inventory of skill folders, for looking at what
//! the capability pass sees:
//!
//! ```text
//! cargo run --release -p gc-guard --example inventory -- DIR...
//! ```

use gc_guard::Scanner;
use std::path::{Path, PathBuf};

fn files(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(root, &p, out);
        } else if let Ok(bytes) = std::fs::read(&p) {
            let rel = p
                .strip_prefix(root)
                .unwrap_or(&p)
                .to_string_lossy()
                .to_string();
            out.push((rel, bytes));
        }
    }
}

fn main() {
    let scanner = match Scanner::new() {
        Ok(s) => s,
        Err(e) => panic!("rules must compile: {e}"),
    };
    for dir in std::env::args().skip(1) {
        let root = Path::new(&dir);
        let mut all = Vec::new();
        files(root, root, &mut all);
        let report = scanner.scan_files(all.iter().map(|(p, b)| (p.as_str(), b.as_slice())));
        println!("== {dir}");
        for f in &report.findings {
            println!(
                "  {} [{}] {}:{} {}",
                f.rule_id,
                f.severity,
                f.path.as_deref().unwrap_or("-"),
                f.line,
                f.excerpt.chars().take(110).collect::<String>()
            );
        }
        let inv = &report.stats.inventory;
        for (name, list) in [
            ("executes", &inv.executes),
            ("reads", &inv.reads),
            ("sends", &inv.sends),
            ("downloads", &inv.downloads),
            ("persists", &inv.persists),
            ("supply_chain", &inv.supply_chain),
            ("obfuscation", &inv.obfuscation),
        ] {
            for c in list {
                println!(
                    "  {name:<12} {:?} {}:{} {}",
                    c.role,
                    c.path.as_deref().unwrap_or("-"),
                    c.line,
                    c.what
                );
            }
        }
    }
}
