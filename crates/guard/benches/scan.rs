//! Scanner throughput: a 10 MiB mix of skill-like text and code on one thread, and a
//! 5,000-file in-memory repository. `cargo bench -p gc-guard --bench scan`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gc_guard::Scanner;
use std::hint::black_box;

const SKILL: &str = r#"---
name: report-builder
description: Builds weekly reports from CSV exports and posts a summary to the team channel.
allowed-tools: [Read, Grep, Bash(python:*)]
---

# Report builder

Use this skill when the user asks for a weekly report. Read the CSV export, compute the
totals per team, and write `report.md`. Install dependencies with `pip install -r requirements.txt`
and check the API with `curl -s https://api.example.com/v1/status | jq .ok`.

## Steps

1. Load the export with pandas and drop empty rows.
2. Group by team and compute the sums; keep two decimals.
3. Render the Markdown table and a short paragraph per team.
4. Clean up with `rm -rf ./build ./dist` when done.

> Tip: the API key is read from the environment (`REPORT_API_KEY`), never from the file.

Résumé en français : le rapport est généré chaque semaine. 日本語の説明：週次レポートを作成します。
"#;

const PYTHON: &str = r#"
import csv
import json
import os
import subprocess
from pathlib import Path

API_KEY = os.environ.get("REPORT_API_KEY", "")


def load(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return [row for row in csv.DictReader(f) if any(row.values())]


def totals(rows: list[dict]) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in rows:
        team = row.get("team", "unknown")
        out[team] = out.get(team, 0.0) + float(row.get("amount") or 0)
    return out


def render(sums: dict[str, float]) -> str:
    lines = ["| team | total |", "|---|---|"]
    for team, total in sorted(sums.items()):
        lines.append(f"| {team} | {total:.2f} |")
    return "\n".join(lines)


def git_revision() -> str:
    result = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return result.stdout.strip()


if __name__ == "__main__":
    rows = load(Path("export.csv"))
    Path("report.md").write_text(render(totals(rows)) + "\n")
    print(json.dumps({"rows": len(rows), "rev": git_revision()}))
"#;

const JS: &str = r#"
import { readFile } from "node:fs/promises";

export async function summarize(path) {
  const text = await readFile(path, "utf8");
  const rows = text.split("\n").filter(Boolean).map((line) => line.split(","));
  const byTeam = new Map();
  for (const [team, amount] of rows.slice(1)) {
    byTeam.set(team, (byTeam.get(team) ?? 0) + Number(amount));
  }
  const res = await fetch("https://api.example.com/v1/teams", { headers: { "User-Agent": "report" } });
  if (!res.ok) throw new Error(`status ${res.status}`);
  return { teams: Object.fromEntries(byTeam), remote: await res.json() };
}
"#;

fn corpus(target: usize) -> String {
    let parts = [SKILL, PYTHON, JS];
    let mut s = String::with_capacity(target + 4096);
    let mut i = 0;
    while s.len() < target {
        s.push_str(parts[i % parts.len()]);
        i += 1;
    }
    s
}

fn bench(c: &mut Criterion) {
    let scanner = match Scanner::new() {
        Ok(s) => s,
        Err(e) => panic!("rules must compile: {e}"),
    };
    let text = corpus(10 * 1024 * 1024);
    let mut g = c.benchmark_group("scan");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("text_10mib", |b| {
        b.iter(|| black_box(scanner.scan_text(None, black_box(&text))))
    });
    g.finish();

    let files: Vec<(String, Vec<u8>)> = (0..5000)
        .map(|i| {
            let (name, body) = match i % 3 {
                0 => (format!("skills/s{i}/SKILL.md"), SKILL),
                1 => (format!("skills/s{i}/scripts/report.py"), PYTHON),
                _ => (format!("skills/s{i}/src/summarize.js"), JS),
            };
            (name, body.as_bytes().to_vec())
        })
        .collect();
    let bytes: usize = files.iter().map(|f| f.1.len()).sum();
    let mut g = c.benchmark_group("repo");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("files_5000", |b| {
        b.iter(|| {
            black_box(scanner.scan_files(files.iter().map(|(p, b)| (p.as_str(), b.as_slice()))))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
