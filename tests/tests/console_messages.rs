//! The console's error words against the domain's error table (`gc_domain::ErrorCode`).
//!
//! `crates/console/assets/js/messages.js` explains every error code in plain words. It is a
//! copy of the codes in another language, so these tests keep it in step with the one table:
//! every code the API can answer with has non-empty words there, and no console file names a
//! code the API does not have (but the console's own codes, listed in [`CONSOLE_ONLY`]).
//! The JavaScript is read with a small lexer for the subset these declarations use (string
//! literals, identifiers, comments), not with text searches that a reformatting would fool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use gc_domain::ErrorCode;

/// Codes the console makes up itself, never sent by the API, each with where and why.
const CONSOLE_ONLY: &[(&str, &str)] = &[
    // api.js: the request never reached the server (fetch failed).
    ("network_error", "api.js"),
    // app.js: a platform administrator without a tenant (a page state, not a refusal).
    ("admin_without_tenant", "app.js"),
];

fn console_js_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/console/assets/js")
}

fn messages_js() -> String {
    std::fs::read_to_string(console_js_dir().join("messages.js")).unwrap()
}

/// Every `.js` file of the console, with its path relative to `assets/js`.
fn console_js_files() -> Vec<(String, String)> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|e| e == "js") {
                let name = path.strip_prefix(base).unwrap().display().to_string();
                out.push((name, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let dir = console_js_dir();
    let mut out = Vec::new();
    walk(&dir, &dir, &mut out);
    out.sort();
    assert!(out.len() > 1, "no console scripts under {}", dir.display());
    out
}

fn domain_codes() -> BTreeSet<&'static str> {
    ErrorCode::ALL.iter().map(|c| c.as_str()).collect()
}

/// A code the console may name: one of the domain's, or one of its own.
fn known(code: &str) -> bool {
    domain_codes().contains(code) || CONSOLE_ONLY.iter().any(|(c, _)| *c == code)
}

// ---- a lexer for the JavaScript subset of the declarations -------------------------------

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    fn at(src: &'a str, pos: usize) -> Self {
        Self { src, pos }
    }

    fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn line(&self) -> usize {
        line_of(self.src, self.pos)
    }

    fn fail(&self, what: &str) -> String {
        let near: String = self.rest().chars().take(40).collect();
        format!("line {}: expected {what}, found {near:?}", self.line())
    }

    /// Skips white space and `//` and `/* */` comments.
    fn skip(&mut self) {
        loop {
            let rest = self.rest();
            let trimmed = rest.trim_start();
            self.pos += rest.len() - trimmed.len();
            if trimmed.starts_with("//") {
                self.pos += trimmed.find('\n').unwrap_or(trimmed.len());
            } else if let Some(body) = trimmed.strip_prefix("/*") {
                self.pos += 2 + body.find("*/").map_or(body.len(), |i| i + 2);
            } else {
                return;
            }
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip();
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    /// A string literal (`'…'`, `"…"`, or a template without `${}`), with its escapes undone.
    fn string(&mut self) -> Result<String, String> {
        self.skip();
        let quote = match self.peek() {
            Some(q @ ('\'' | '"' | '`')) => q,
            _ => return Err(self.fail("a string literal")),
        };
        let mut out = String::new();
        let mut chars = self.rest().char_indices().skip(1);
        while let Some((i, c)) = chars.next() {
            match c {
                c if c == quote => {
                    self.pos += i + 1;
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, e)) => out.push(e),
                    None => break,
                },
                '$' if quote == '`' && self.rest()[i..].starts_with("${") => {
                    return Err(self.fail("a template without `${}`"));
                }
                '\n' if quote != '`' => break,
                c => out.push(c),
            }
        }
        Err(self.fail("the end of the string literal"))
    }

    /// An identifier or a quoted name (an object key).
    fn key(&mut self) -> Result<String, String> {
        self.skip();
        if matches!(self.peek(), Some('\'' | '"')) {
            return self.string();
        }
        let len = self
            .rest()
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(self.rest().len());
        if len == 0 {
            return Err(self.fail("a key"));
        }
        let key = self.rest()[..len].to_string();
        self.pos += len;
        Ok(key)
    }

    /// The entries of an object literal whose values are all strings; `pos` is at its `{`.
    fn string_object(&mut self) -> Result<Vec<(String, String)>, String> {
        if !self.eat('{') {
            return Err(self.fail("`{`"));
        }
        let mut entries = Vec::new();
        loop {
            if self.eat('}') {
                return Ok(entries);
            }
            let key = self.key()?;
            if !self.eat(':') {
                return Err(self.fail(&format!("`:` after `{key}`")));
            }
            let value = self.string()?;
            entries.push((key, value));
            if !self.eat(',') {
                if self.eat('}') {
                    return Ok(entries);
                }
                return Err(self.fail("`,` or `}`"));
            }
        }
    }

    /// The elements of an array literal of strings; `pos` is at its `[`. `None` when an
    /// element is not a string literal (the array is not a list of codes).
    fn string_array(&mut self) -> Option<Vec<String>> {
        if !self.eat('[') {
            return None;
        }
        let mut items = Vec::new();
        loop {
            if self.eat(']') {
                return Some(items);
            }
            items.push(self.string().ok()?);
            if !self.eat(',') {
                return self.eat(']').then_some(items);
            }
        }
    }
}

/// The 1-based line of byte `pos`.
fn line_of(src: &str, pos: usize) -> usize {
    src[..pos].matches('\n').count() + 1
}

/// The start of each `const NAME = <open>` in `src`, with NAME and the offset of `<open>`.
fn declarations(src: &str, open: char) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = src[from..].find("const ") {
        let start = from + i + "const ".len();
        from = start;
        let mut lexer = Lexer::at(src, start);
        let Ok(name) = lexer.key() else { continue };
        if lexer.eat('=') {
            lexer.skip();
            if lexer.peek() == Some(open) {
                out.push((name, lexer.pos));
            }
        }
    }
    out
}

/// `messages.js`'s `PLAIN` table: code -> words, refusing a code written twice.
fn plain_words(src: &str) -> BTreeMap<String, String> {
    let (_, at) = declarations(src, '{')
        .into_iter()
        .find(|(name, _)| name == "PLAIN")
        .expect("messages.js declares `const PLAIN = { … }`");
    let entries = Lexer::at(src, at)
        .string_object()
        .unwrap_or_else(|e| panic!("messages.js PLAIN: {e}"));
    let mut words = BTreeMap::new();
    for (code, text) in entries {
        assert!(
            words.insert(code.clone(), text).is_none(),
            "messages.js PLAIN has `{code}` twice"
        );
    }
    words
}

/// Codes a console file names outside `PLAIN`: in `messages.js` (`lists_are_codes`) the
/// elements of its `const X = [ … ]` string lists; in every file the keys of its `const X_CODE… = { … }` tables, and the strings compared with or
/// given as an error's `code` (`.code === '…'`, `.code !== '…'`, `code: '…'`).
fn codes_named(src: &str, lists_are_codes: bool) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let line = |pos: usize| line_of(src, pos);
    if lists_are_codes {
        for (_, at) in declarations(src, '[') {
            if let Some(items) = Lexer::at(src, at).string_array() {
                out.extend(items.into_iter().map(|c| (line(at), c)));
            }
        }
    }
    for (name, at) in declarations(src, '{') {
        if name.contains("CODE") {
            let entries = Lexer::at(src, at)
                .string_object()
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            out.extend(entries.into_iter().map(|(c, _)| (line(at), c)));
        }
    }
    for pattern in ["code === ", "code !== ", "code: "] {
        for (i, _) in src.match_indices(pattern) {
            // `code`, not the end of a longer name (`a_code: '…'`).
            if src[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
            {
                continue;
            }
            let mut lexer = Lexer::at(src, i + pattern.len());
            if matches!(lexer.peek(), Some('\'' | '"')) {
                if let Ok(code) = lexer.string() {
                    out.push((line(i), code));
                }
            }
        }
    }
    out
}

// ---- the checks ---------------------------------------------------------------------------

#[test]
fn every_domain_error_code_has_plain_words_in_the_console() {
    let words = plain_words(&messages_js());
    let missing: Vec<&str> = ErrorCode::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !words.contains_key(*c))
        .collect();
    assert!(
        missing.is_empty(),
        "crates/console/assets/js/messages.js has no words for {missing:?}: add them to PLAIN"
    );
}

#[test]
fn the_console_words_name_no_code_the_domain_does_not_have() {
    let words = plain_words(&messages_js());
    let unknown: Vec<&String> = words.keys().filter(|c| !known(c)).collect();
    assert!(
        unknown.is_empty(),
        "messages.js PLAIN explains codes the API never answers with: {unknown:?}"
    );
}

#[test]
fn the_console_words_are_sentences() {
    for (code, text) in plain_words(&messages_js()) {
        let text = text.trim();
        assert!(!text.is_empty(), "`{code}` has empty words");
        assert!(
            text.chars().next().is_some_and(char::is_uppercase) && text.ends_with(['.', '!', '?']),
            "`{code}`: {text:?} is not a sentence"
        );
    }
}

#[test]
fn no_console_script_names_an_unknown_code() {
    let mut unknown = Vec::new();
    let mut named = BTreeSet::new();
    for (file, src) in console_js_files() {
        for (line, code) in codes_named(&src, file == "messages.js") {
            if !known(&code) {
                unknown.push(format!("{file}:{line}: `{code}`"));
            }
            named.insert(code);
        }
    }
    assert!(
        unknown.is_empty(),
        "console scripts name codes that are neither the domain's nor in CONSOLE_ONLY: {unknown:?}"
    );
    // The scan sees the lists it is meant to see (a lexer that found nothing would pass).
    for code in ["member_unassigned", "rate_limited", "validation_failed"] {
        assert!(named.contains(code), "the scan missed `{code}`");
    }
}

#[test]
fn the_console_only_codes_are_the_consoles_own() {
    let domain = domain_codes();
    let files = console_js_files();
    for (code, file) in CONSOLE_ONLY {
        assert!(
            !domain.contains(code),
            "`{code}` is now a domain code: drop it from CONSOLE_ONLY"
        );
        let (_, src) = files
            .iter()
            .find(|(name, _)| name == file)
            .unwrap_or_else(|| panic!("no console script {file}"));
        assert!(
            src.contains(&format!("'{code}'")) || src.contains(&format!("\"{code}\"")),
            "{file} no longer makes up `{code}`: drop it from CONSOLE_ONLY"
        );
    }
}

#[test]
fn the_lexer_reads_what_the_declarations_use() {
    let src = r#"
        // A comment with a { brace and a 'quote.
        const PLAIN = {
          a_code: 'It\'s done.', /* a block comment } */
          "quoted_key":
            "Two \"words\".",
          templ: `Back ticks.`,
        };
        const LIST = ['x_y', "z"];
        const MIXED = [1, 'a'];
        if (err.code === 'one_code' || e.code !== "two_code") f({ code: 'three_code' });
    "#;
    let words = plain_words(src);
    assert_eq!(words["a_code"], "It's done.");
    assert_eq!(words["quoted_key"], "Two \"words\".");
    assert_eq!(words["templ"], "Back ticks.");
    assert_eq!(words.len(), 3);
    let named: Vec<String> = codes_named(src, true).into_iter().map(|(_, c)| c).collect();
    assert_eq!(
        named,
        ["x_y", "z", "one_code", "two_code", "three_code"].map(String::from)
    );
    // A value that is not a plain string is refused, not skipped.
    for bad in [
        "const PLAIN = { a: 'ok', b: `${x}` };",
        "const PLAIN = { a: 'ok' b: 'no comma' };",
        "const PLAIN = { a: 'ok', b: words };",
        "const PLAIN = { a: 'unterminated };",
    ] {
        let at = bad.find('{').unwrap();
        assert!(Lexer::at(bad, at).string_object().is_err(), "{bad}");
    }
}
