//! The throughput benchmark's input, shared by `cargo bench -p gc-guard --bench scan` and
//! `guard-eval`: a 10 MiB mix of skill-like text and code, and a many-file repository.

/// Size of the benchmark text.
pub const BENCHMARK_BYTES: usize = 10 * 1024 * 1024;

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

/// The 10 MiB benchmark text: skill-like Markdown, Python and JavaScript repeated up to `target`
/// bytes (the same text `cargo bench -p gc-guard` and `guard-eval` measure).
pub fn benchmark_text(target: usize) -> String {
    let parts = [SKILL, PYTHON, JS];
    let mut s = String::with_capacity(target + 4096);
    let mut i = 0;
    while s.len() < target {
        s.push_str(parts[i % parts.len()]);
        i += 1;
    }
    s
}

/// A `count`-file in-memory repository of the same three files (the `repo/files_5000` bench).
pub fn benchmark_files(count: usize) -> Vec<(String, Vec<u8>)> {
    (0..count)
        .map(|i| {
            let (name, body) = match i % 3 {
                0 => (format!("skills/s{i}/SKILL.md"), SKILL),
                1 => (format!("skills/s{i}/scripts/report.py"), PYTHON),
                _ => (format!("skills/s{i}/src/summarize.js"), JS),
            };
            (name, body.as_bytes().to_vec())
        })
        .collect()
}
