//! Context lowers severity, never hides: a detection inside a fenced example of a Markdown
//! document about security (teaching material that quotes vulnerable code or attack text) is
//! kept as `low`, with the reason appended to its message.
//!
//! A document is about security when it uses at least two distinct words of the security
//! vocabulary; a fence is an example when its info string, its first line or the four
//! non-empty lines before it carry an example marker ("vulnerable", "insecure", "bad",
//! "avoid", "attack", "❌" ...). Secrets, hidden text, look-alikes and skill metadata are never
//! lowered: they are real wherever they appear.

use crate::model::{Category, Severity};
use crate::rules::RULES;
use crate::scanner::Hit;

/// Words that mark a document as being about security.
const SECURITY_VOCABULARY: &[&str] = &[
    "security",
    "vulnerab",
    "exploit",
    "attack",
    "malicious",
    "injection",
    "threat",
    "pentest",
    "penetration test",
    "owasp",
    "cve-",
    "xss",
    "csrf",
    "ssrf",
    "sanitiz",
    "hardening",
    "secure coding",
    "red team",
    "audit",
    "cwe-",
    "untrusted",
    "jailbreak",
    "malware",
    "phishing",
    "adversarial",
    "guardrail",
    "incident",
    "forensic",
];

/// Words that mark a fence as an example of what not to do (or of what to detect).
const EXAMPLE_MARKERS: &[&str] = &[
    "vulnerable",
    "insecure",
    "unsafe",
    "bad",
    "avoid",
    "don't",
    "do not",
    "never",
    "wrong",
    "anti-pattern",
    "antipattern",
    "attack",
    "malicious",
    "payload",
    "exploit",
    "dangerous",
    "detect",
    "red flag",
    "❌",
    "⚠",
    "before:",
    "flagged",
    "suspicious",
    "injection",
    "example of",
    "e.g.",
    "for example",
    "such as",
    "noncompliant",
    "non-compliant",
    "incorrect",
    "indicator",
    "always flag",
    "flag these",
    "patterns to flag",
];

/// Words in the prose of a line that make a code span or a quotation on it an example of an
/// attack being described ("a typical exfiltration attack pipes `cat … | curl …`").
const PROSE_MARKERS: &[&str] = &[
    "attack",
    "attacker",
    "adversar",
    "malicious",
    "malware",
    "exploit",
    "payload",
    "technique",
    "exfiltrat",
    "reverse shell",
    "injection",
    "vulnerable",
    "insecure",
    "dangerous",
    "red flag",
    "for example",
    "e.g.",
    "such as",
    "typical",
    "detect",
    "look for",
    "watch for",
    "never run",
    "do not run",
    "don't run",
    "theft",
    "indicator",
];

/// Inline code spans and quotations (of 8 or more characters) on prose lines, outside fences,
/// whose line carries one of [`PROSE_MARKERS`] outside the quoted parts: (start, end, marker).
fn prose_examples(text: &str) -> Vec<(usize, usize, &'static str)> {
    let mut out = Vec::new();
    let mut in_fence = false;
    let mut pos = 0;
    // The prose of the previous line of the same paragraph (a sentence wraps lines).
    let mut previous = String::new();
    // The header row of the Markdown table the line belongs to: it names every row's columns
    // ("| Expression | Attack vector | Example payload |").
    let mut table_header: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            // A Markdown fence (a report or document template) is prose quoted in the
            // document: its lines are read as prose, not as code.
            if in_fence || !is_markdown_fence(t) {
                in_fence = !in_fence;
            }
            previous.clear();
            table_header = None;
            continue;
        }
        if in_fence {
            continue;
        }
        if t.starts_with('|') {
            if table_header.is_none() {
                table_header = Some(t.to_lowercase());
            }
        } else {
            table_header = None;
        }
        let header = table_header.as_deref().unwrap_or("");
        let carried = std::mem::take(&mut previous);
        // Only a sentence that runs on into this line carries its words over.
        let ends_sentence = t.trim_end().ends_with(['.', '!', '?', ':']);
        if !t.starts_with('#') && !ends_sentence {
            previous = prose_of(line).to_lowercase();
        }
        // A sentence whose subject is the attacker describes an attack: the whole line is the
        // example (never a line that starts with an order: run, execute, paste …).
        let lower_line = line.to_lowercase();
        let lt = lower_line
            .trim_start()
            .trim_start_matches(['-', '*', '>', ' ']);
        let third_party = [
            "attacker",
            "adversar",
            "threat actor",
            "malware",
            "an exploit",
        ]
        .iter()
        .copied()
        .find(|m| prose_of(&lower_line).contains(m));
        let imperative = [
            "run ", "execute ", "paste ", "type ", "copy ", "install ", "call ", "invoke ",
            "then ", "now ", "next ", "first ", "please ",
        ]
        .iter()
        .any(|v| lt.starts_with(v));
        if let (Some(m), false) = (third_party, imperative) {
            out.push((start, start + line.trim_end().len(), m));
            continue;
        }
        if !line.contains(['`', '"', '\u{201C}']) {
            continue;
        }
        // Quoted parts: `code` and "text" / “text”.
        let mut spans = Vec::new();
        let mut prose = String::new();
        let mut open: Option<(usize, char)> = None;
        for (i, c) in line.char_indices() {
            match open {
                Some((s, q)) if c == q || (q == '\u{201C}' && c == '\u{201D}') => {
                    if i - s > 8 {
                        spans.push((start + s, start + i));
                    }
                    open = None;
                }
                Some(_) => {}
                None if c == '`' || c == '"' || c == '\u{201C}' => open = Some((i, c)),
                None => prose.push(c),
            }
        }
        if spans.is_empty() {
            continue;
        }
        let prose = prose.to_lowercase();
        if let Some(m) = PROSE_MARKERS
            .iter()
            .copied()
            .find(|m| prose.contains(m) || carried.contains(m) || header.contains(m))
        {
            out.extend(spans.into_iter().map(|(s, e)| (s, e, m)));
            continue;
        }
        // A file name, branch name or URL with a command substituted into it
        // (`x$(curl … | sh).yml`) is an injection payload shown as data, unless the prose
        // orders it run.
        let ordered = prose.split(|c: char| !c.is_alphanumeric()).any(|w| {
            [
                "run", "execute", "paste", "type", "eval", "source", "invoke", "enter",
            ]
            .contains(&w)
        });
        if !ordered {
            for (s, e) in spans {
                if text.get(s + 1..e).is_some_and(substituted_into_a_name) {
                    out.push((s, e, "a command substituted into a name"));
                }
            }
        }
    }
    out
}

/// A code span whose first word carries a command substitution glued to other characters
/// (`.github/workflows/x$(…).yml`, `https://host/bar$(…)`, `dev$(…)`): a value, not a
/// command line.
fn substituted_into_a_name(code: &str) -> bool {
    let first = code.split_whitespace().next().unwrap_or("");
    first
        .find("$(")
        .is_some_and(|i| i > 0 && !first.starts_with(['$', '(', '\'', '"']))
}

/// A fence opened for Markdown (```` ```markdown ````, ```` ```md ````): a quoted document.
fn is_markdown_fence(t: &str) -> bool {
    let info = t.trim_start_matches(['`', '~']).trim().to_ascii_lowercase();
    let info = info.split_whitespace().next().unwrap_or("");
    matches!(info, "markdown" | "md" | "mdx")
}

/// The text of a line outside its code spans and quotations.
fn prose_of(line: &str) -> String {
    let mut prose = String::new();
    let mut open: Option<char> = None;
    for c in line.chars() {
        match open {
            Some(q) if c == q || (q == '\u{201C}' && c == '\u{201D}') => open = None,
            Some(_) => {}
            None if c == '`' || c == '"' || c == '\u{201C}' => open = Some(c),
            None => prose.push(c),
        }
    }
    prose
}

/// True when the Markdown line that starts at `line_start` holds a code span or quotation
/// that the prose presents as an example of an attack (see [`prose_examples`]), in a document
/// about security. The capability inventory leaves such spans out: teaching material
/// describes what an attack does, it does not do it.
pub(crate) fn prose_example_line(text: &str, line_start: usize) -> bool {
    let end = text
        .get(line_start..)
        .and_then(|r| r.find('\n'))
        .map_or(text.len(), |i| line_start + i);
    prose_example_at(text, line_start, end).is_some() && about_security(text)
}

/// Byte ranges of the lists of examples ([`example_blocks`]) of a Markdown document about
/// security: the capability inventory leaves them out, as it leaves out examples quoted in
/// the prose ("Good indicators:" followed by persistence paths is not a persistence step).
pub(crate) fn example_lists(text: &str) -> Vec<(usize, usize)> {
    if !about_security(text) {
        return Vec::new();
    }
    example_blocks(text)
        .into_iter()
        .filter(|b| b.3 == "list of examples")
        .map(|b| (b.0, b.1))
        .collect()
}

/// Byte ranges of fenced code blocks (a Markdown fence holds prose, not code, and is left
/// out).
pub(crate) fn fenced(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, bool)> = None;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            match open.take() {
                Some((s, code)) => {
                    if code {
                        out.push((s, pos));
                    }
                }
                None => open = Some((start, !is_markdown_fence(t))),
            }
        }
    }
    if let Some((s, true)) = open {
        out.push((s, text.len()));
    }
    out
}

/// The marker of an example in the prose ([`prose_examples`]) of the line that holds `start`
/// which overlaps `start..end`, judged on that line and the one before it (a sentence wraps).
fn prose_example_at(text: &str, start: usize, end: usize) -> Option<&'static str> {
    let line_start = text
        .get(..start)
        .and_then(|b| b.rfind('\n'))
        .map_or(0, |i| i + 1);
    let line_end = text
        .get(line_start..)
        .and_then(|r| r.find('\n'))
        .map_or(text.len(), |i| line_start + i);
    let mut prev_start = text
        .get(..line_start.saturating_sub(1))
        .and_then(|b| b.rfind('\n'))
        .map_or(0, |i| i + 1)
        .min(line_start);
    // A table row is read with its table's header row (at most 200 rows back).
    if text
        .get(line_start..line_end)
        .is_some_and(|l| l.trim_start().starts_with('|'))
    {
        let mut at = line_start;
        for _ in 0..200 {
            if at == 0 {
                break;
            }
            let above = text
                .get(..at - 1)
                .and_then(|b| b.rfind('\n'))
                .map_or(0, |i| i + 1);
            if !text
                .get(above..at)
                .is_some_and(|l| l.trim_start().starts_with('|'))
            {
                break;
            }
            at = above;
        }
        prev_start = prev_start.min(at);
    }
    let chunk = text.get(prev_start..line_end)?;
    let own = line_start - prev_start;
    let (a, b) = (
        start.saturating_sub(prev_start),
        end.saturating_sub(prev_start),
    );
    prose_examples(chunk)
        .into_iter()
        .find(|(s, e, _)| *s >= own && *s < b.max(a + 1) && *e > a)
        .map(|(_, _, m)| m)
}

/// Words in the term a list item or table row defines that name an attack technique.
const ATTACK_TERMS: &[&str] = &[
    "jailbreak",
    "injection",
    "poisoning",
    "exfiltration",
    "leakage",
    "extraction",
    "hijack",
    "spoofing",
    "tampering",
    "escalation",
    "misuse",
    "manipulation",
    "attack",
    "exploit",
    "phishing",
    "backdoor",
];

/// The attack word of the term that the line at `at` defines, when the line is a definition:
/// a list item `- **Term** — what it is` or a table row `| **Term** | what it is |` whose bold
/// term names an attack technique ("**Jailbreaking** — attempts to bypass the guardrails").
/// The rest of the line describes the technique to the reader; it does not ask anything of
/// the model.
fn attack_definition_at(text: &str, at: usize) -> Option<&'static str> {
    let (ls, le) = crate::scanner::line_bounds(text, at);
    let line = text.get(ls..le)?.trim();
    let body = if let Some(row) = line.strip_prefix('|') {
        row.trim_start()
    } else if is_list_item(line) {
        line.split_once(' ')?.1.trim_start()
    } else {
        return None;
    };
    let term = body.strip_prefix("**")?;
    let (term, rest) = term.split_once("**")?;
    let rest = rest.trim_start();
    if !(rest.starts_with('|')
        || rest.starts_with('—')
        || rest.starts_with('–')
        || rest.starts_with("- ")
        || rest.starts_with(':'))
    {
        return None;
    }
    let term = term.to_lowercase();
    ATTACK_TERMS.iter().copied().find(|w| term.contains(w))
}

pub(crate) fn is_markdown(path: Option<&str>) -> bool {
    path.is_some_and(|p| {
        let p = p.to_ascii_lowercase();
        p.ends_with(".md") || p.ends_with(".mdx") || p.ends_with(".markdown")
    })
}

pub(crate) fn about_security(text: &str) -> bool {
    let lower = text.to_lowercase();
    SECURITY_VOCABULARY
        .iter()
        .filter(|w| lower.contains(*w))
        .take(2)
        .count()
        >= 2
}

/// A Markdown list item (`- x`, `* x`, `+ x`, `1. x`, `2) x`).
fn is_list_item(t: &str) -> bool {
    if t.starts_with("- ") || t.starts_with("* ") || t.starts_with("+ ") {
        return true;
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0
        && t.get(digits..)
            .is_some_and(|r| r.starts_with(". ") || r.starts_with(") "))
}

/// Blocks that are examples: (start, end, marker, kind) in byte offsets of `text`. A fenced
/// block is one when its info string, first comment line or the four lines before carry an
/// example marker; a list is one when the line that introduces it ends with `:` and carries a
/// marker ("Flag a document when it contains patterns such as:").
fn example_blocks(text: &str) -> Vec<(usize, usize, &'static str, &'static str)> {
    let mut out = Vec::new();
    let mut recent: Vec<&str> = Vec::new();
    let mut open: Option<(usize, String, Option<&'static str>, bool)> = None;
    // An open list of examples: (start, end so far, marker).
    let mut list: Option<(usize, usize, &'static str)> = None;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let start = pos;
        pos += line.len();
        let t = line.trim();
        let fence = t.starts_with("```") || t.starts_with("~~~");
        if open.is_none() {
            if is_list_item(t) {
                if let Some(l) = list.as_mut() {
                    l.1 = pos;
                } else if let Some(lead) = recent
                    .last()
                    .map(|l| l.trim_end_matches(['*', '_']).trim_end())
                    .filter(|l| l.ends_with(':'))
                {
                    // A bold label counts as the plain one ("**Examples:**"), and "examples"
                    // introduces a list as well as a marker does.
                    let lead = lead.to_lowercase();
                    if let Some(m) = EXAMPLE_MARKERS
                        .iter()
                        .copied()
                        .find(|m| lead.contains(m))
                        .or_else(|| lead.contains("examples").then_some("examples"))
                    {
                        list = Some((start, pos, m));
                    }
                }
            } else if !t.is_empty() {
                if let Some((s, e, m)) = list.take() {
                    out.push((s, e, m, "list of examples"));
                }
            }
        }
        match &mut open {
            None if fence => {
                let mut label = t.to_lowercase();
                for r in &recent {
                    label.push('\n');
                    label.push_str(&r.to_lowercase());
                }
                let marker = EXAMPLE_MARKERS.iter().copied().find(|m| label.contains(m));
                let token: String = t.chars().take_while(|&c| c == '`' || c == '~').collect();
                open = Some((start, token, marker, true));
            }
            None => {
                if !t.is_empty() {
                    recent.push(t);
                    if recent.len() > 4 {
                        recent.remove(0);
                    }
                }
            }
            Some((s, token, marker, first)) => {
                if fence
                    && t.starts_with(token.as_str())
                    && t.trim_start_matches(['`', '~']).is_empty()
                {
                    if let Some(m) = *marker {
                        out.push((*s, pos, m, "fenced example"));
                    }
                    open = None;
                    recent.clear();
                } else if *first {
                    *first = false;
                    let lt = t.to_lowercase();
                    if marker.is_none() && (lt.starts_with('#') || lt.starts_with("//")) {
                        *marker = EXAMPLE_MARKERS.iter().copied().find(|m| lt.contains(m));
                    }
                }
            }
        }
    }
    if let Some((s, e, m)) = list {
        out.push((s, e, m, "list of examples"));
    }
    out
}

/// Words in a code comment that make what it quotes an example, not code.
const COMMENT_MARKERS: &[&str] = &[
    "e.g.",
    "eg:",
    "example",
    "such as",
    "like:",
    "attack",
    "malicious",
    "vulnerable",
    "insecure",
    "exploit",
    "payload",
    "detect",
    "matches",
    "never",
    "do not",
    "don't",
    "avoid",
    "instead of",
    "bad:",
];

/// The comment text of a code line (`# …`, `// …`, `/* …`, ` * …`, `rem …`), or `None` when
/// the line is code (a shebang is code; `--` and `;` are left out: a shell continuation line
/// starts with `--data …`).
fn comment_of(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if t.starts_with("#!") {
        return None;
    }
    for p in ["#", "//", "/*", "* "] {
        if let Some(rest) = t.strip_prefix(p) {
            return Some(rest);
        }
    }
    let lower = t.get(..4).map(str::to_ascii_lowercase);
    (lower.as_deref() == Some("rem ")).then(|| t.get(4..).unwrap_or(""))
}

/// The marker of a comment line that quotes what `h` detects as an example (`# Attacker
/// provides: "; cat /etc/passwd #`), for the detections of running code: [`adjust_comments`]
/// lowers them in code files, and in fenced blocks of documents.
fn comment_example_marker(text: &str, h: &Hit) -> Option<&'static str> {
    let def = RULES.get(h.rule)?;
    if !runs_code(def.category) {
        return None;
    }
    let ls = text
        .get(..h.start)
        .and_then(|b| b.rfind('\n'))
        .map_or(0, |i| i + 1);
    let le = text
        .get(h.start..)
        .and_then(|r| r.find('\n'))
        .map_or(text.len(), |i| h.start + i);
    let comment = text.get(ls..le).and_then(comment_of)?;
    let lower = comment.to_lowercase();
    COMMENT_MARKERS.iter().copied().find(|m| lower.contains(m))
}

/// Categories of detections of code that runs (a comment quoting them does not run them).
fn runs_code(c: Category) -> bool {
    matches!(
        c,
        Category::FetchExecute
            | Category::DecodeExecute
            | Category::CodeExecution
            | Category::Destructive
            | Category::ReverseShell
            | Category::Persistence
            | Category::Exfiltration
            | Category::Miner
            | Category::SuspiciousUrl
            | Category::ResourceAbuse
    )
}

/// In code files, detections of running code (downloads piped into shells, reverse shells,
/// destructive commands …) on a comment line that presents them as an example are kept as
/// `low` with the reason: a comment does not run. Words aimed at the model (injection,
/// concealment, tool poisoning) keep their weight: the agent reads comments too.
fn adjust_comments(text: &str, hits: &mut [Hit]) {
    for h in hits.iter_mut() {
        if h.severity <= Severity::Low {
            continue;
        }
        let Some(marker) = comment_example_marker(text, h) else {
            continue;
        };
        let Some(def) = RULES.get(h.rule) else {
            continue;
        };
        let base = h
            .message
            .take()
            .unwrap_or_else(|| def.description.to_string());
        h.message = Some(format!(
            "{base} Lowered from {} to low: inside a code comment that quotes it as an example (\"{marker}\"); a comment does not run.",
            h.severity
        ));
        h.severity = Severity::Low;
    }
}

/// Lowers detections inside fenced examples of security documents to `low`, and examples
/// quoted in code comments.
pub(crate) fn adjust(path: Option<&str>, text: &str, hits: &mut [Hit]) {
    if !is_markdown(path) {
        let code = path.is_some_and(|p| {
            let p = p.to_ascii_lowercase();
            [
                ".sh", ".bash", ".zsh", ".py", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".ps1",
                ".go", ".rs", ".java", ".c", ".h", ".cpp", ".lua", ".sql", ".yml", ".yaml",
                ".toml", ".bat", ".cmd",
            ]
            .iter()
            .any(|e| p.ends_with(e))
        });
        if code && !hits.is_empty() {
            adjust_comments(text, hits);
        }
        return;
    }
    let lowerable = |rule: usize| {
        RULES.get(rule).is_some_and(|r| {
            !matches!(
                r.category,
                Category::Secret | Category::HiddenText | Category::Homoglyph | Category::Skill
            )
        })
    };
    if !hits
        .iter()
        .any(|h| h.severity > Severity::Low && lowerable(h.rule))
    {
        return;
    }
    if !about_security(text) {
        return;
    }
    let blocks = example_blocks(text);
    let fences = fenced(text);
    for h in hits.iter_mut() {
        if h.severity <= Severity::Low || !lowerable(h.rule) {
            continue;
        }
        // A fenced example or a list of examples, else an example in the prose of the line
        // (a detection of a whole line, as data flow reports, counts when it overlaps one).
        let found = blocks
            .iter()
            .find(|(s, e, _, _)| h.start >= *s && h.start < *e)
            .map(|&(_, _, m, k)| (m, k))
            .or_else(|| {
                if fences.iter().any(|&(a, b)| h.start >= a && h.start < b) {
                    // In a fence, a comment that quotes it as an example does not run.
                    return comment_example_marker(text, h)
                        .map(|m| (m, "code comment that quotes it as an example"));
                }
                prose_example_at(text, h.start, h.end)
                    .map(|m| (m, "quoted example in the prose"))
                    .or_else(|| {
                        attack_definition_at(text, h.start)
                            .map(|m| (m, "definition of an attack technique"))
                    })
            });
        let Some((marker, kind)) = found else {
            continue;
        };
        let base = h
            .message
            .take()
            .or_else(|| RULES.get(h.rule).map(|r| r.description.to_string()))
            .unwrap_or_default();
        h.message = Some(format!(
            "{base} Lowered from {} to low: inside a {kind} (\"{marker}\") of a document about security.",
            h.severity
        ));
        h.severity = Severity::Low;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_example_fences() {
        let text = "# Security review\n\nVulnerable example:\n\n```python\neval(x)\n```\n\nFixed:\n```python\nast.literal_eval(x)\n```\n";
        let f = example_blocks(text);
        assert_eq!(f.len(), 1);
        assert!(text[f[0].0..f[0].1].contains("eval(x)"));
        assert!(about_security(text));
        assert!(!about_security("# Weather\nFetches the forecast."));
    }
}
