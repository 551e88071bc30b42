//! PowerShell's text pass, the fallback when the file was not parsed (over the size cap or
//! out of time; decision 0034). A line that runs a
//! string (`Invoke-Expression`, `iex`, `Start-Process`, `powershell -EncodedCommand`,
//! `[ScriptBlock]::Create`) and, on that line or in a variable it names, decodes
//! (`FromBase64String`, `-bxor`, `[char]` codes, `-join`, decompression) is obfuscated code
//! that runs.

use super::Ctx;
use crate::capabilities::Kind;
use std::collections::HashSet;

const RUNS: &[&str] = &[
    "invoke-expression",
    "iex ",
    "iex(",
    "| iex",
    "|iex",
    "scriptblock]::create",
    "-encodedcommand",
    "-enc ",
    "start-process",
    "invoke-command",
    ".invoke(",
];

const DECODES: &[(&str, &str)] = &[
    ("frombase64string", "base64-decoded"),
    ("-bxor", "XOR-decoded"),
    ("[char]", "built from character codes"),
    ("gzipstream", "decompressed"),
    ("deflatestream", "decompressed"),
    ("securestringtoglobalallocunicode", "decrypted"),
    ("[array]::reverse", "reversed"),
];

pub(super) fn scan(cx: &mut Ctx<'_>) {
    let src = cx.src;
    // Variables assigned a decoded value: `$p = [Text.Encoding]::UTF8.GetString([Convert]::FromBase64String(...))`.
    let mut decoded_vars: HashSet<String> = HashSet::new();
    let mut how_of: Vec<(String, &'static str)> = Vec::new();
    for (i, line) in src.lines().enumerate().take(100_000) {
        if line.len() > 64 * 1024 {
            continue;
        }
        let lower = line.to_ascii_lowercase();
        let trimmed = lower.trim_start();
        if trimmed.starts_with('#') {
            continue;
        }
        let how = DECODES
            .iter()
            .find(|(w, _)| lower.contains(w))
            .map(|(_, h)| *h)
            .or_else(|| {
                (lower.contains("-join") && lower.contains("[char]"))
                    .then_some("built from character codes")
            });
        if let Some(how) = how {
            if let Some(var) = trimmed
                .strip_prefix('$')
                .and_then(|r| r.split(['=', ' ']).next())
            {
                if trimmed.contains('=') && decoded_vars.len() < 256 {
                    decoded_vars.insert(var.to_string());
                    how_of.push((var.to_string(), how));
                }
            }
        }
        let runs = RUNS.iter().any(|w| lower.contains(w))
            || trimmed.starts_with("iex ")
            || trimmed.starts_with("& ($");
        if !runs {
            continue;
        }
        let via_var = how_of
            .iter()
            .find(|(v, _)| lower.contains(&format!("${v}")))
            .map(|(_, h)| *h);
        let Some(how) = how.or(via_var) else {
            continue;
        };
        let row = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let d = format!("{} ({how} data run by PowerShell)", (cx.excerpt)(line));
        cx.push(
            Kind::Obfuscates,
            "runs decoded or decrypted data",
            d,
            row,
            true,
        );
    }
}
