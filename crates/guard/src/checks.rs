//! Native checks: the rules that are not a single regex (Unicode hiding and homoglyphs,
//! SKILL.md frontmatter, encoded payloads, loops). Each reports under a catalog rule id.

use crate::model::Severity;
use crate::scanner::{line_bounds, Hit, Scanner};
use unicode_security::MixedScript;

/// Runs every native check on `text`.
pub(crate) fn run(scanner: &Scanner, path: Option<&str>, text: &str, hits: &mut Vec<Hit>) {
    let mut emit = |id: &str,
                    start: usize,
                    end: usize,
                    severity: Option<Severity>,
                    message: Option<String>| {
        if let Some(rule) = scanner.rule_index(id) {
            hits.push(Hit {
                rule,
                start,
                end,
                severity: severity.unwrap_or_else(|| scanner.rule_severity(rule)),
                message,
                redact: None,
            });
        }
    };
    if !text.is_ascii() {
        unicode(text, &mut emit);
        // Cyrillic lead bytes: Russian instructions are judged on the original text (the
        // normalised view folds Cyrillic look-alikes into Latin letters).
        if scanner.aux.intent.i18n.cyrillic.is_match(text) {
            russian(scanner, text, &mut emit);
        }
    }
    if is_skill_md(path, text) {
        frontmatter(text, &mut emit);
    }
    if path.is_none_or(|p| p.ends_with(".py")) && text.contains("while") {
        infinite_loops(text, &mut emit);
    }
}

type Emit<'a> = dyn FnMut(&str, usize, usize, Option<Severity>, Option<String>) + 'a;

/// Words of which one is in every Russian match (lowercase).
const RUSSIAN_GATE: &[&str] = &[
    "инструкци",
    "указани",
    "правил",
    "директив",
    "команд",
    "ограничени",
    "установк",
    "промпт",
    "пользовател",
    "юзер",
    "втайне",
    "тайно",
    "незаметно",
    "скрытно",
];

/// The injection families in Russian (`intent_i18n`), one sentence at a time, on lines that
/// hold Cyrillic and one of [`RUSSIAN_GATE`] (at most 4,096 lines per text).
fn russian(scanner: &Scanner, text: &str, emit: &mut Emit<'_>) {
    let langs = &scanner.aux.intent.i18n;
    let mut offset = 0;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let start = offset;
        offset += line.len();
        if n >= 4096 {
            break;
        }
        let lb = line.as_bytes();
        if !(lb.contains(&0xD0) || lb.contains(&0xD1)) {
            continue;
        }
        let lower = line.to_lowercase();
        if !RUSSIAN_GATE.iter().any(|w| lower.contains(w)) {
            continue;
        }
        let same_len = lower.len() == line.len();
        let trimmed = line.trim_end_matches(['\n', '\r']).len();
        for (ss, se) in crate::intent::i18n::sentences(&lower) {
            let Some(s) = lower.get(ss..se) else { continue };
            for (id, lang) in langs.judge_russian(s) {
                let (a, b) = if same_len {
                    (start + ss, start + se.min(trimmed))
                } else {
                    (start, start + trimmed)
                };
                let description = crate::rules::RULES
                    .iter()
                    .find(|r| r.id == id)
                    .map_or("", |r| r.description);
                emit(
                    id,
                    a,
                    b.max(a),
                    None,
                    Some(format!(
                        "{description} Recognised in {lang}: instructions to the model are judged by what they ask in every major language, not only in English."
                    )),
                );
            }
        }
    }
}

fn is_skill_md(path: Option<&str>, text: &str) -> bool {
    match path {
        Some(p) => {
            let name = p.rsplit(['/', '\\']).next().unwrap_or(p);
            name.eq_ignore_ascii_case("skill.md")
        }
        None => text.trim_start_matches('\u{feff}').starts_with("---"),
    }
}

fn is_tag(c: char) -> bool {
    ('\u{E0000}'..='\u{E007F}').contains(&c)
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2060}'..='\u{2064}'
            | '\u{206A}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{180E}'
            | '\u{3164}'
            | '\u{FFA0}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{034F}'
            | '\u{17B4}'
            | '\u{17B5}'
    )
}

fn is_variation_selector(c: char) -> bool {
    matches!(c, '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}')
}

fn is_han(c: char) -> bool {
    matches!(c, '\u{3400}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' | '\u{20000}'..='\u{3FFFF}')
}

/// Replaces hidden characters with visible `<U+XXXX>` marks (long runs collapsed) and control
/// characters with spaces.
pub(crate) fn make_visible(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let hidden = |c: char| {
            is_tag(c) || is_bidi_control(c) || is_invisible(c) || is_variation_selector(c)
        };
        if hidden(c) {
            let mut j = i;
            while j < chars.len() && hidden(chars[j]) {
                j += 1;
            }
            if j - i > 3 {
                out.push_str(&format!("<{} hidden chars>", j - i));
            } else {
                for &h in &chars[i..j] {
                    out.push_str(&format!("<U+{:04X}>", u32::from(h)));
                }
            }
            i = j;
            continue;
        }
        if c.is_control() {
            out.push(' ');
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

pub(crate) fn truncate_chars(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().count() > n {
        out.push('…');
    }
    out
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '_' | '-') || is_invisible(c)
}

/// The character at byte offset `i` (a char boundary) and the one before it.
fn char_at(text: &str, i: usize) -> Option<char> {
    text.get(i..).and_then(|t| t.chars().next())
}

fn char_before(text: &str, i: usize) -> Option<char> {
    text.get(..i).and_then(|t| t.chars().next_back())
}

/// End of the run of characters satisfying `pred` starting at `i`.
fn run_end(text: &str, i: usize, pred: impl Fn(char) -> bool) -> (usize, usize) {
    let mut end = i;
    let mut count = 0;
    for c in text.get(i..).unwrap_or("").chars() {
        if !pred(c) {
            break;
        }
        end += c.len_utf8();
        count += 1;
    }
    (end, count)
}

/// One pass over the non-ASCII characters (ASCII stretches are skipped in bulk).
fn unicode(text: &str, emit: &mut Emit<'_>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut words_checked_until = 0;
    while i < bytes.len() {
        match crate::normalize::next_non_ascii(bytes, i) {
            Some(at) => i = at,
            None => break,
        }
        let Some(c) = char_at(text, i) else { break };
        if i >= words_checked_until && is_word_char(c) {
            // The whole word around this character, once.
            let mut ws = i;
            while let Some(p) = char_before(text, ws) {
                if !is_word_char(p) {
                    break;
                }
                ws -= p.len_utf8();
            }
            let (we, _) = run_end(text, i, is_word_char);
            words_checked_until = we;
            if let Some(word) = text.get(ws..we) {
                if word.bytes().any(|b| b.is_ascii_alphabetic()) {
                    homoglyph(text, word, ws, we, emit);
                }
            }
        }
        if is_tag(c) {
            let (end, run_len) = run_end(text, i, is_tag);
            let prev = char_before(text, i);
            let last = char_before(text, end);
            let emoji_flag = prev == Some('\u{1F3F4}') && last == Some('\u{E007F}') && run_len <= 8;
            if !emoji_flag {
                let decoded: String = text
                    .get(i..end)
                    .unwrap_or("")
                    .chars()
                    .filter_map(|c| {
                        let v = u32::from(c) - 0xE0000;
                        (0x20..0x7F)
                            .contains(&v)
                            .then(|| char::from_u32(v))
                            .flatten()
                    })
                    .collect();
                let msg = format!(
                    "{run_len} invisible tag characters encode the hidden text \"{}\"",
                    truncate_chars(&decoded, 160)
                );
                emit("unicode.tag-characters", i, end, None, Some(msg));
            }
            i = end;
            continue;
        }
        if is_bidi_control(c) {
            emit(
                "unicode.bidi-control",
                i,
                i + c.len_utf8(),
                None,
                Some(format!(
                    "Bidirectional control U+{:04X} reorders the displayed text",
                    u32::from(c)
                )),
            );
            i += c.len_utf8();
            continue;
        }
        if is_invisible(c) && !(c == '\u{FEFF}' && i == 0) {
            let (end, run_len) = run_end(text, i, is_invisible);
            let prev = char_before(text, i);
            let next = char_at(text, end);
            let ascii_word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
            let joiner_between_non_ascii = run_len == 1
                && matches!(c, '\u{200C}' | '\u{200D}')
                && !prev.is_some_and(|p| p.is_ascii())
                && !next.is_some_and(|n| n.is_ascii());
            if !joiner_between_non_ascii && (run_len >= 3 || ascii_word(prev) || ascii_word(next)) {
                let severity = if ascii_word(prev) && ascii_word(next) {
                    Severity::High
                } else {
                    Severity::Medium
                };
                let msg = format!(
                    "{run_len} invisible character(s) (U+{:04X}) {}",
                    u32::from(c),
                    if severity == Severity::High {
                        "split a word"
                    } else {
                        "next to text"
                    }
                );
                emit("unicode.zero-width", i, end, Some(severity), Some(msg));
            }
            i = end;
            continue;
        }
        if is_variation_selector(c) {
            let (end, run_len) = run_end(text, i, is_variation_selector);
            let prev = char_before(text, i);
            let supplementary_outside_han = c >= '\u{E0100}' && !prev.is_some_and(is_han);
            if run_len >= 2 || supplementary_outside_han {
                emit(
                    "unicode.variation-selectors",
                    i,
                    end,
                    None,
                    Some(format!(
                        "{run_len} variation selector(s) can carry hidden bytes"
                    )),
                );
            }
            i = end;
            continue;
        }
        i += c.len_utf8();
    }
}

fn homoglyph(text: &str, word: &str, ws: usize, we: usize, emit: &mut Emit<'_>) {
    let word_clean: String = word.chars().filter(|&c| !is_invisible(c)).collect();
    if word_clean.is_single_script() {
        return;
    }
    let is_confusable = |c: char| {
        !c.is_ascii() && c.is_alphabetic() && {
            let s = c.to_string();
            let sk: String = unicode_security::skeleton(&s).collect();
            !sk.is_empty() && sk.chars().all(|x| x.is_ascii_alphanumeric())
        }
    };
    // A look-alike letter counts inside a run of at least three letters that also holds ASCII
    // letters: a lone Greek letter next to a subscript or unit (`μs`, `σx`, `ρ-value`) is
    // notation, not disguise.
    let disguised = word_clean.split(|c: char| !c.is_alphabetic()).any(|run| {
        run.chars().count() >= 3
            && run.chars().any(|c| c.is_ascii_alphabetic())
            && run.chars().any(is_confusable)
    });
    if !disguised {
        return;
    }
    let skeleton: String = unicode_security::skeleton(&word_clean).collect();
    let host_like = word_clean.contains('.') && word_clean.chars().any(|c| c.is_alphabetic());
    let severity = if host_like {
        Severity::High
    } else {
        Severity::Medium
    };
    let mut msg = format!(
        "\"{}\" mixes scripts and reads as \"{}\"",
        truncate_chars(&word_clean, 60),
        truncate_chars(&skeleton, 60)
    );
    let (ls, le) = crate::scanner::line_bounds(text, ws);
    let rest = format!(
        "{} {}",
        text.get(ls..ws).unwrap_or(""),
        text.get(we..le).unwrap_or("")
    );
    let severity = match names_the_disguise(&rest) {
        Some(name) => {
            msg.push_str(&format!(
                "; reported as low instead of {severity}: the line names the disguise (\"{name}\"), an example of it shown to the reader"
            ));
            Severity::Low
        }
        None => severity,
    };
    emit("unicode.homoglyph", ws, we, Some(severity), Some(msg));
}

/// The word of `line` (outside the mixed-script word itself) that names a homoglyph as such:
/// a script's name ("`pаypal.com` (Cyrillic `а`)") or the word for the trick. A disguise meant
/// to pass as the real name does not announce itself.
fn names_the_disguise(line: &str) -> Option<&'static str> {
    const NAMES: &[&str] = &[
        "cyrillic",
        "greek",
        "armenian",
        "cherokee",
        "homoglyph",
        "look-alike",
        "lookalike",
        "confusable",
    ];
    let lower = line.to_lowercase();
    NAMES.iter().copied().find(|n| lower.contains(n))
}

/// A minimal reading of the SKILL.md frontmatter: top-level `key: value` lines.
fn frontmatter(text: &str, emit: &mut Emit<'_>) {
    let body = text.trim_start_matches('\u{feff}');
    let offset = text.len() - body.len();
    let mut lines = body.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        emit("skill.frontmatter-missing", 0, 0, None, None);
        return;
    }
    let mut pos = offset + first.len();
    let mut fields: Vec<(String, String, usize)> = Vec::new();
    let mut closed = false;
    let mut current_list: Option<usize> = None;
    for line in lines {
        let start = pos;
        pos += line.len();
        let t = line.trim_end();
        if t == "---" || t == "..." {
            closed = true;
            break;
        }
        if let Some(item) = t.trim_start().strip_prefix("- ") {
            if t.starts_with(' ') || t.starts_with('\t') || t.starts_with('-') {
                if let Some(i) = current_list {
                    if let Some(f) = fields.get_mut(i) {
                        f.1.push_str(", ");
                        f.1.push_str(item.trim());
                    }
                }
                continue;
            }
        }
        if t.starts_with(' ') || t.starts_with('\t') || t.starts_with('#') || t.is_empty() {
            continue;
        }
        if let Some((k, v)) = t.split_once(':') {
            fields.push((k.trim().to_ascii_lowercase(), v.trim().to_string(), start));
            current_list = Some(fields.len() - 1);
        }
    }
    if !closed {
        emit(
            "skill.frontmatter-missing",
            0,
            0,
            None,
            Some("The frontmatter block is not closed by ---".into()),
        );
        return;
    }
    let get = |k: &str| fields.iter().find(|f| f.0 == k);
    let unquote = |v: &str| v.trim().trim_matches(['"', '\'']).trim().to_string();
    match get("name") {
        Some((_, v, at)) if !unquote(v).is_empty() => {
            let name = unquote(v);
            let ok = name.len() <= 64
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !ok {
                emit("skill.name-invalid", *at, *at, None, None);
            }
        }
        _ => emit("skill.name-missing", 0, 0, None, None),
    }
    let has_description = get("description").is_some_and(|(_, v, _)| !unquote(v).is_empty());
    if !has_description {
        emit("skill.description-missing", 0, 0, None, None);
    }
    if let Some((_, v, at)) = get("allowed-tools").or_else(|| get("allowed_tools")) {
        let broad = v
            .trim_matches(['[', ']'])
            .split([',', ' '])
            .map(|t| t.trim().trim_matches(['"', '\'']).to_ascii_lowercase())
            .find(|t| {
                matches!(
                    t.as_str(),
                    "*" | "all" | "bash(*)" | "bash(*:*)" | "bash(:*)"
                ) || t.starts_with("bash(sudo")
                    || t.starts_with("bash(rm")
                    || t.starts_with("bash(curl")
                    || t.starts_with("bash(wget")
            });
        if let Some(t) = broad {
            // Every tool, an unrestricted shell, root or deletion is medium; a download tool with any
            // arguments (`Bash(curl:*)`) is a scoped grant whose use the capability pass judges.
            let scoped = t.starts_with("bash(curl") || t.starts_with("bash(wget");
            if scoped {
                emit(
                    "skill.allowed-tools-broad",
                    *at,
                    *at,
                    Some(Severity::Low),
                    Some(format!(
                        "allowed-tools grants \"{t}\": one command with any arguments. Reported as low instead of medium: not every tool nor an unrestricted shell; what the skill does with it is judged by the capability inventory."
                    )),
                );
            } else {
                emit(
                    "skill.allowed-tools-broad",
                    *at,
                    *at,
                    None,
                    Some(format!("allowed-tools grants \"{t}\"")),
                );
            }
        }
    }
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t']).len()
}

fn infinite_loops(text: &str, emit: &mut Emit<'_>) {
    let mut search = 0;
    while let Some(i) = text.get(search..).and_then(|t| t.find("while ")) {
        let at = search + i;
        search = at + 6;
        let (ls, le) = line_bounds(text, at);
        let line = text.get(ls..le).unwrap_or("");
        let t = line.trim();
        if !(t == "while True:" || t == "while 1:") {
            continue;
        }
        let base = indent_of(line);
        // A loop directly inside `try:` usually ends by an exception (EOFError, StopIteration).
        let enclosing = text
            .get(..ls)
            .unwrap_or("")
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty() && indent_of(l) < base);
        if enclosing.is_some_and(|l| l.trim() == "try:") {
            continue;
        }
        let mut exits = false;
        let mut body_lines = 0;
        for l in text.get(le..).unwrap_or("").lines().skip(1) {
            if l.trim().is_empty() {
                continue;
            }
            if indent_of(l) <= base {
                break;
            }
            body_lines += 1;
            let lt = l.trim();
            if [
                "break", "return", "raise", "sys.exit", "exit(", "os._exit", "yield", "await ",
                "sleep(",
            ]
            .iter()
            .any(|w| lt.contains(w))
            {
                exits = true;
                break;
            }
        }
        if body_lines > 0 && !exits {
            emit("resource.infinite-loop", at, le, None, None);
        }
    }
}
