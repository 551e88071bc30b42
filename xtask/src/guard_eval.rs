//! `cargo xtask guard-eval DIR`: runs the Guard over a labelled corpus and prints recall and
//! the false-positive rate.
//!
//! Layout: `DIR/positive/**` and `DIR/negative/**`. A folder that holds a `SKILL.md` is one
//! sample (all files under it, except the `_expected.json` label files); a JSON file with a
//! `samples` array holds one sample per entry (`{id, text}`). A sample counts as flagged when
//! any finding is medium or higher.

use anyhow::{Context, Result};
use gc_guard::{Finding, Limits, Scanner, Severity};
use std::path::{Path, PathBuf};
use std::time::Instant;

struct Sample {
    name: String,
    files: Vec<(String, Vec<u8>)>,
}

struct Outcome {
    name: String,
    flagged: bool,
    findings: Vec<Finding>,
}

/// Evaluates the corpus at `dir` and prints the figures.
pub fn run(dir: &Path) -> Result<()> {
    let scanner = Scanner::new().context("compiling the Guard rules")?;
    let started = Instant::now();
    let mut bytes = 0u64;
    let mut results = Vec::new();
    for label in ["positive", "negative"] {
        let root = dir.join(label);
        let mut samples = Vec::new();
        collect(&root, &root, &mut samples)
            .with_context(|| format!("reading {}", root.display()))?;
        samples.sort_by(|a, b| a.name.cmp(&b.name));
        let mut outcomes = Vec::new();
        for s in samples {
            bytes += s.files.iter().map(|f| f.1.len() as u64).sum::<u64>();
            let report = scanner.scan_files_with(
                s.files.iter().map(|(p, b)| (p.as_str(), b.as_slice())),
                &Limits::CONTRACT,
            );
            let flagged = report
                .findings
                .iter()
                .any(|f| f.severity >= Severity::Medium);
            outcomes.push(Outcome {
                name: s.name,
                flagged,
                findings: report.findings,
            });
        }
        results.push((label, outcomes));
    }
    let elapsed = started.elapsed();
    let verbose = std::env::var_os("GUARD_EVAL_VERBOSE").is_some();
    for (label, outcomes) in &results {
        let flagged = outcomes.iter().filter(|o| o.flagged).count();
        let total = outcomes.len();
        let pct = if total == 0 {
            0.0
        } else {
            100.0 * flagged as f64 / total as f64
        };
        match *label {
            "positive" => println!("positives: {flagged}/{total} flagged, recall {pct:.1}%"),
            _ => println!("negatives: {flagged}/{total} flagged, false-positive rate {pct:.1}%"),
        }
        for o in outcomes {
            let wrong = (*label == "positive") != o.flagged;
            if wrong {
                let kind = if *label == "positive" {
                    "MISS"
                } else {
                    "FALSE POSITIVE"
                };
                println!("  {kind}: {}", o.name);
            }
            if wrong || verbose {
                for f in o
                    .findings
                    .iter()
                    .filter(|f| verbose || f.severity >= Severity::Medium || *label == "positive")
                {
                    println!(
                        "    {} [{}] {}:{} {}",
                        f.rule_id,
                        f.severity,
                        f.path.as_deref().unwrap_or("-"),
                        f.line,
                        f.excerpt.chars().take(100).collect::<String>()
                    );
                }
            }
        }
    }
    let secs = elapsed.as_secs_f64().max(1e-9);
    println!(
        "scanned {:.2} MiB in {:.1} ms ({:.1} MiB/s)",
        bytes as f64 / 1048576.0,
        secs * 1000.0,
        bytes as f64 / 1048576.0 / secs
    );
    Ok(())
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<Sample>) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    entries.sort();
    let is_skill = entries.iter().any(|p| {
        p.is_file()
            && p.file_name()
                .is_some_and(|n| n.eq_ignore_ascii_case("SKILL.md"))
    });
    if is_skill {
        let mut files = Vec::new();
        skill_files(dir, dir, &mut files)?;
        out.push(Sample {
            name: rel(root, dir),
            files,
        });
        return Ok(());
    }
    for p in entries {
        if p.is_dir() {
            collect(root, &p, out)?;
        } else if p.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&p)?;
            let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
                continue;
            };
            let Some(samples) = value.get("samples").and_then(|s| s.as_array()) else {
                continue;
            };
            for (i, s) in samples.iter().enumerate() {
                let id = s
                    .get("id")
                    .and_then(|v| v.as_str())
                    .map_or_else(|| i.to_string(), str::to_string);
                let Some(text) = s.get("text").and_then(|v| v.as_str()) else {
                    continue;
                };
                out.push(Sample {
                    name: format!("{}#{id}", rel(root, &p)),
                    files: vec![(format!("{id}.txt"), text.as_bytes().to_vec())],
                });
            }
        }
    }
    Ok(())
}

fn skill_files(base: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    entries.sort();
    for p in entries {
        let meta = std::fs::symlink_metadata(&p)?;
        if meta.is_dir() {
            skill_files(base, &p, out)?;
        } else if meta.is_file() && p.file_name().is_none_or(|n| n != "_expected.json") {
            out.push((rel(base, &p), std::fs::read(&p)?));
        }
    }
    Ok(())
}

fn rel(base: &Path, p: &Path) -> String {
    p.strip_prefix(base)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}
