//! Values followed across files (issue 29, decision 0042).
//!
//! Each file is read alone first ([`super::analyze`]). At the end of a scan the code files of
//! the skill are joined: a Python `from cfg import CMD` / `import cfg` (then `cfg.CMD`), a
//! JavaScript `require('./cfg')` / `import { cmd } from './cfg'` (then `cfg.cmd`, `{ cmd }`,
//! `module.exports`/`exports.x` on the other side) and a shell `source cfg.sh` / `. ./cfg.sh`
//! name another file of the skill. The names that file binds (its module-level values, known
//! or assembled, decoded or fetched) are its exports; the importing file is read again with
//! them bound, so a command spelled in one file and run in another, or a payload kept in one
//! module and decoded into `exec` in another, reaches the sink as a value. The facts that only
//! the joined reading finds are added, saying which file the value came from.
//!
//! The import edges themselves join files for the combinations: a secret read in one module
//! and sent by the module that imports it is one flow (`combo.exfiltration`, critical), not
//! two unrelated capabilities.
//!
//! Bounded like every stage: only files up to [`MAX_LINK_FILE`] bytes are kept for joining,
//! [`MAX_LINK_BYTES`] in all and [`MAX_LINK_FILES`] files; at most [`MAX_IMPORTERS`] files are
//! read again and [`MAX_EXPORTS`] names kept per module; the joined readings share the scan's
//! code time ([`super::MAX_SCAN_CODE_TIME`]). One hop: a module's exports are its own values
//! (a value it imported itself is not followed further).

use super::{
    lang_of, parse_within, walk, worth_parsing, Ctx, Lang, Val, MAX_PARSE_BYTES, PARSE_BUDGET,
};
use crate::capabilities::Fact;
use regex::Regex;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tree_sitter::{Node, Tree};

/// Files larger than this are not kept for joining (they are still read alone).
pub(crate) const MAX_LINK_FILE: usize = 256 * 1024;
/// At most this many bytes of code kept for joining per scan.
pub(crate) const MAX_LINK_BYTES: usize = 4 * 1024 * 1024;
/// At most this many code files kept for joining per scan.
pub(crate) const MAX_LINK_FILES: usize = 512;
/// At most this many importing files read again per scan.
pub(crate) const MAX_IMPORTERS: usize = 64;
/// At most this many names exported per module.
pub(crate) const MAX_EXPORTS: usize = 256;
/// JSON data files larger than this are not read into code.
pub(crate) const MAX_DATA_FILE: usize = 64 * 1024;
/// At most this many JSON data files kept per scan.
pub(crate) const MAX_DATA_FILES: usize = 64;
/// At most this many import edges per scan.
const MAX_EDGES: usize = 2_048;
/// Sourced files whose functions a shell or PowerShell file calls: at most this many hops
/// away and this many files.
const MAX_HOPS: usize = 3;
const MAX_SOURCED: usize = 16;

/// Code files kept during a scan for the joined reading.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    files: Vec<(String, String)>,
    /// The skill's JSON data files (path, text), read into the code that loads them.
    data: Vec<(String, String)>,
    bytes: usize,
    /// Files that could not be kept (over a bound): the joined reading is partial.
    pub dropped: usize,
}

impl Kept {
    /// Keeps a code file (shell, Python, JavaScript) within the bounds, and the files that
    /// invoke others (SKILL.md, manifests, Makefiles), to tell what runs from what is carried.
    pub(crate) fn keep(&mut self, path: &str, text: &str) {
        let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
        let invoker = matches!(
            name.as_str(),
            "skill.md" | "package.json" | "setup.py" | "pyproject.toml" | "makefile" | "setup.cfg"
        );
        // A JSON data file, for the code that loads it by a literal relative path.
        if name.ends_with(".json") && !invoker {
            if text.len() <= MAX_DATA_FILE
                && self.data.len() < MAX_DATA_FILES
                && self.bytes + text.len() <= MAX_LINK_BYTES
            {
                self.bytes += text.len();
                self.data.push((path.to_string(), text.to_string()));
            }
            return;
        }
        if !invoker
            && !matches!(
                lang_of(Some(path), text),
                Some(Lang::Shell | Lang::Python | Lang::Js | Lang::PowerShell)
            )
        {
            return;
        }
        if text.len() > MAX_LINK_FILE
            || self.files.len() >= MAX_LINK_FILES
            || self.bytes + text.len() > MAX_LINK_BYTES
        {
            self.dropped += 1;
            return;
        }
        self.bytes += text.len();
        self.files.push((path.to_string(), text.to_string()));
    }

    /// The first kept file, other than `path` itself, that `runs` accepts and that names
    /// `path` (by its path in the skill, or by its file name as a word).
    pub(crate) fn naming(&self, path: &str, runs: &dyn Fn(&str) -> bool) -> Option<&str> {
        let name = path.rsplit('/').next().unwrap_or(path);
        if name.len() < 3 {
            return None;
        }
        self.files
            .iter()
            .filter(|(p, _)| p != path && runs(p))
            .find(|(_, t)| t.contains(path) || mentions(t, name))
            .map(|(p, _)| p.as_str())
    }
}

/// Whether `word` occurs in `hay` with no word character or dot on either side.
fn mentions(hay: &str, word: &str) -> bool {
    let bytes = hay.as_bytes();
    let inner = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    hay.match_indices(word).take(4096).any(|(s, _)| {
        let e = s + word.len();
        let before = s.checked_sub(1).and_then(|i| bytes.get(i)).copied();
        let after = bytes.get(e).copied();
        let next = bytes.get(e + 1).copied();
        before.is_none_or(|b| !inner(b))
            && after.is_none_or(|b| !inner(b) && (b != b'.' || next.is_none_or(|n| !inner(n))))
    })
}

/// The values other files export, by `lang:stem` (`py:cfg`, `js:cfg`, `sh:cfg`).
#[derive(Debug, Default)]
pub(crate) struct Links {
    by_key: HashMap<String, (String, HashMap<String, Val>)>,
    /// Paths of the modules a lookup used (for the facts' wording).
    used: std::cell::RefCell<Vec<String>>,
    /// Functions of the sourced shell and PowerShell files: (module, start, end) by name
    /// (PowerShell's lower-cased), read through at their calls in the importing file.
    funcs: HashMap<String, (usize, usize, usize)>,
    /// The sourced files whose functions are read: path, text and syntax tree.
    modules: Vec<(String, Rc<str>, Tree)>,
    /// The importing file itself among [`Links::modules`], so that a function of it passed
    /// to a sourced file's function (`retry_with pull "$u"`, `"$cb" "$@"` there) is read
    /// when that body calls it back.
    home: Option<usize>,
    /// The data files the file names, by file name: their parsed values.
    data: HashMap<String, (String, Rc<serde_json::Value>)>,
}

impl Links {
    /// The value `name` exported by the module `stem` of `lang`.
    pub(crate) fn get(&self, lang: Lang, stem: &str, name: &str) -> Option<Val> {
        let (path, names) = self.by_key.get(&key(lang, stem))?;
        let v = names.get(name)?.clone();
        self.note(path);
        Some(v)
    }

    /// Every value the module `stem` of `lang` exports (a sourced shell file).
    pub(crate) fn all(&self, lang: Lang, stem: &str) -> Vec<(String, Val)> {
        let Some((path, names)) = self.by_key.get(&key(lang, stem)) else {
            return Vec::new();
        };
        self.note(path);
        names.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// The function `name` of a sourced file: (module, start, end).
    pub(crate) fn function(&self, name: &str) -> Option<(usize, usize, usize)> {
        let f = self.funcs.get(name).copied()?;
        if let Some((path, _, _)) = self.modules.get(f.0) {
            self.note(path);
        }
        Some(f)
    }

    /// The values of the data file `name` (its file name), when the file names it.
    pub(crate) fn data(&self, name: &str) -> Option<Rc<serde_json::Value>> {
        let (path, v) = self.data.get(name)?;
        self.note(path);
        Some(v.clone())
    }

    /// The importing file's index among the modules (see [`Links::home`]).
    pub(crate) fn home(&self) -> Option<usize> {
        self.home
    }

    /// The root node of the sourced file `m`.
    pub(crate) fn root(&self, m: usize) -> Option<Node<'_>> {
        self.modules.get(m).map(|(_, _, t)| t.root_node())
    }

    /// The text of the sourced file `m`.
    pub(crate) fn text(&self, m: usize) -> Option<&str> {
        self.modules.get(m).map(|(_, t, _)| &**t)
    }

    /// Adds a sourced file's functions (the first file to define a name keeps it).
    fn add_functions(&mut self, path: &str, e: &Export) {
        let (Some(tree), Some(text)) = (&e.tree, &e.text) else {
            return;
        };
        if e.funcs.is_empty() {
            return;
        }
        let m = self.modules.len();
        self.modules
            .push((path.to_string(), text.clone(), tree.clone()));
        for (name, &(s, end)) in &e.funcs {
            self.funcs.entry(name.clone()).or_insert((m, s, end));
        }
    }

    fn note(&self, path: &str) {
        let mut used = self.used.borrow_mut();
        if !used.iter().any(|p| p == path) && used.len() < 8 {
            used.push(path.to_string());
        }
    }
}

fn key(lang: Lang, stem: &str) -> String {
    let l = match lang {
        Lang::Shell => "sh",
        Lang::Python => "py",
        Lang::Js => "js",
        Lang::PowerShell => "ps",
    };
    format!("{l}:{stem}")
}

/// The last segment of a module name or path, without its extension: `pkg.cfg` → `cfg`,
/// `./lib/cfg.js` → `cfg`, `"$DIR/cfg.sh"` → `cfg`.
pub(crate) fn stem(spec: &str, lang: Lang) -> String {
    let s = spec.trim_matches(|c| c == '"' || c == '\'' || c == '`');
    let last = s.rsplit('/').next().unwrap_or(s);
    let last = if lang == Lang::Python && !s.contains('/') {
        last.trim_start_matches('.')
            .rsplit('.')
            .next()
            .unwrap_or(last)
    } else {
        match last.rsplit_once('.') {
            Some((a, _)) if !a.is_empty() => a,
            _ => last,
        }
    };
    last.to_string()
}

/// The stem of the file a shell `source`/`.` names, from the rest of its command:
/// `"$(dirname "$0")/env.sh"` → `env`, `./env.sh arg` → `env`.
pub(crate) fn sourced(rest: &str) -> String {
    let last = rest.trim().rsplit(['/', '\\']).next().unwrap_or(rest);
    let word = last
        .trim_start_matches(['"', '\''])
        .split(|c: char| c.is_whitespace() || c == '"' || c == '\'')
        .next()
        .unwrap_or("");
    stem(word, Lang::Shell)
}

/// The stem of the file a PowerShell dot-source or `Import-Module` names, lower-cased (file
/// names are not case-sensitive on Windows): the last `name.ps1`/`name.psm1` in the rest of
/// the command (`$PSScriptRoot\lib.ps1`, `(Join-Path $PSScriptRoot 'lib.ps1')`), else its
/// last path segment (`Import-Module "$PSScriptRoot/modules/Helpers" -Force`).
pub(crate) fn ps_sourced(rest: &str) -> String {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let file = RE
        .get_or_init(|| Regex::new(r"(?i)([\w.-]+)\.psm?1\b").ok())
        .as_ref()
        .and_then(|re| re.captures_iter(rest).last())
        .and_then(|c| c.get(1))
        .map(|m| m.as_str().to_string());
    let stem = file.unwrap_or_else(|| {
        let word = rest
            .split_whitespace()
            .find(|w| !w.starts_with('-'))
            .unwrap_or("");
        let word = word.trim_matches(|c| matches!(c, '"' | '\'' | '(' | ')'));
        word.rsplit(['/', '\\']).next().unwrap_or(word).to_string()
    });
    stem.to_ascii_lowercase()
}

/// The stem a file is imported by: its name without extension, or its folder for a Python
/// `__init__.py` or a JavaScript `index.js`.
fn file_stem(path: &str, lang: Lang) -> String {
    let mut parts = path.rsplit('/');
    let name = parts.next().unwrap_or(path);
    let base = name.rsplit_once('.').map_or(name, |(a, _)| a);
    if (lang == Lang::Python && base == "__init__") || (lang == Lang::Js && base == "index") {
        if let Some(dir) = parts.next() {
            return dir.to_string();
        }
    }
    if lang == Lang::PowerShell {
        return base.to_ascii_lowercase();
    }
    base.to_string()
}

/// Local modules a file names, by stem (textually: cheap, and a file that is not parsed still
/// joins files for the combinations).
fn imported_stems(lang: Lang, text: &str) -> Vec<String> {
    static RE: OnceLock<Option<[Regex; 4]>> = OnceLock::new();
    let Some(re) = RE
        .get_or_init(|| {
            Some([
                // Python: `from a.b import c, d` / `import a.b as c, e`.
                Regex::new(r"(?m)^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import[ \t]+\(?([\w ,\t]+)|import[ \t]+([\w., \t]+))").ok()?,
                // JavaScript: `require('./x')`, `from './x'`, `import './x'`, `import('./x')`.
                Regex::new(r#"(?:require\s*\(\s*|from\s+|import\s*\(?\s*)['"](\.{1,2}/[^'"\n]{1,200})['"]"#).ok()?,
                // Shell: `source x.sh`, `. ./x.sh`.
                Regex::new(r"(?m)(?:^[ \t]*|[;&|][ \t]*|\bthen[ \t]+|\bdo[ \t]+)(?:source|\.)[ \t]+([^;&|\n]{1,200})").ok()?,
                // PowerShell: `. $PSScriptRoot\lib.ps1`, `Import-Module ./x.psm1`.
                Regex::new(r"(?mi)(?:^[ \t]*|[;{(|][ \t]*)(?:\.|import-module)[ \t]+([^;|\n]{1,200})").ok()?,
            ])
        })
        .as_ref()
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    match lang {
        Lang::Python => {
            for c in re[0].captures_iter(text).take(256) {
                if let Some(from) = c.get(1) {
                    let from = from.as_str();
                    if from.trim_start_matches('.').is_empty() {
                        // `from . import cfg, util`.
                        if let Some(names) = c.get(2) {
                            for n in names.as_str().split(',') {
                                let n = n.split_whitespace().next().unwrap_or("");
                                if !n.is_empty() {
                                    out.push(n.to_string());
                                }
                            }
                        }
                    } else {
                        out.push(stem(from, Lang::Python));
                    }
                } else if let Some(list) = c.get(3) {
                    for m in list.as_str().split(',') {
                        let m = m.split_whitespace().next().unwrap_or("");
                        if !m.is_empty() {
                            out.push(stem(m, Lang::Python));
                        }
                    }
                }
            }
        }
        Lang::Js => {
            for c in re[1].captures_iter(text).take(256) {
                if let Some(m) = c.get(1) {
                    out.push(stem(m.as_str(), Lang::Js));
                }
            }
        }
        Lang::Shell => {
            if push_sourced(&re[2], text, sourced, &mut out) {
                out.extend(named_files(text, &["sh", "bash"]));
            }
        }
        Lang::PowerShell => {
            if push_sourced(&re[3], text, ps_sourced, &mut out) {
                out.extend(
                    named_files(text, &["ps1", "psm1"])
                        .into_iter()
                        .map(|s| s.to_ascii_lowercase()),
                );
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Pushes the stem of every file `source_re` finds sourced in `text` (at most 256), as
/// `stem_of` reads it; answers whether one was named through a variable (or not at all), so
/// that the caller joins the files the text names instead.
fn push_sourced(
    source_re: &Regex,
    text: &str,
    stem_of: fn(&str) -> String,
    out: &mut Vec<String>,
) -> bool {
    let mut by_value = false;
    for c in source_re.captures_iter(text).take(256) {
        if let Some(m) = c.get(1) {
            let stem = stem_of(m.as_str());
            by_value |= stem.is_empty() || stem.contains('$');
            out.push(stem);
        }
    }
    by_value
}

/// The stems of the files with these extensions that a file names anywhere (at most 32): a
/// file sourced through a variable (`LIB="$DIR/lib/net.sh"; source "$LIB"`) is one of them
/// (more joining, never less reading).
fn named_files(text: &str, exts: &[&str]) -> Vec<String> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(re) = RE
        .get_or_init(|| Regex::new(r"([\w.-]+)\.(sh|bash|ps1|psm1)\b").ok())
        .as_ref()
    else {
        return Vec::new();
    };
    re.captures_iter(text)
        .filter(|c| c.get(2).is_some_and(|e| exts.contains(&e.as_str())))
        .filter_map(|c| c.get(1).map(|m| m.as_str().to_string()))
        .take(32)
        .collect()
}

/// What the joined reading adds: facts, and the import edges (importer, module) by path.
#[derive(Debug, Default)]
pub(crate) struct Joined {
    pub facts: Vec<Fact>,
    pub edges: HashSet<(String, String)>,
}

/// Joins the kept files. `existing` are the facts of the files read alone (a fact the joined
/// reading finds again is not repeated); `role` says whether a path runs, why, and at install
/// time; `budget` is what is left of the scan's code time.
pub(crate) fn join(
    kept: &Kept,
    existing: &[Fact],
    role: &dyn Fn(&str) -> (bool, &'static str, bool),
    excerpt: &dyn Fn(&str) -> String,
    budget: Duration,
) -> Joined {
    let mut out = Joined::default();
    let started = Instant::now();
    // Files by language and stem.
    let mut by_stem: HashMap<(u8, String), Vec<usize>> = HashMap::new();
    let langs: Vec<Option<Lang>> = kept
        .files
        .iter()
        .map(|(p, t)| lang_of(Some(p), t))
        .collect();
    for (i, ((p, _), l)) in kept.files.iter().zip(&langs).enumerate() {
        if let Some(l) = l {
            by_stem
                .entry((*l as u8, file_stem(p, *l)))
                .or_default()
                .push(i);
        }
    }
    // Import edges.
    let mut importers: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, ((path, text), l)) in kept.files.iter().zip(&langs).enumerate() {
        let Some(l) = *l else { continue };
        let mut mods = Vec::new();
        for s in imported_stems(l, text) {
            for &j in by_stem.get(&(l as u8, s)).map_or(&[][..], Vec::as_slice) {
                if j != i && !mods.contains(&j) {
                    mods.push(j);
                    if out.edges.len() < MAX_EDGES {
                        if let Some((mp, _)) = kept.files.get(j) {
                            out.edges.insert((path.clone(), mp.clone()));
                        }
                    }
                }
            }
        }
        // Only a file with a sink can do anything with the values it imports (the edges
        // above still join it for the combinations).
        // A file that names a data file of the skill (`json.load(open("checks.json"))`,
        // `require('./transport.json')`) is read again with its values.
        let names_data = kept.data.iter().any(|(p, _)| text.contains(data_name(p)));
        if (!mods.is_empty() || names_data) && may_sink(l, text) {
            importers.push((i, mods));
        }
    }
    // A shell or PowerShell file also calls the functions of the files its sourced files
    // source (`main.sh` → `lib/all.sh` → `lib/net.sh`), [`MAX_HOPS`] deep and
    // [`MAX_SOURCED`] files at most.
    let direct: HashMap<usize, Vec<usize>> = importers.iter().cloned().collect();
    for (i, mods) in importers.iter_mut() {
        if !matches!(
            langs.get(*i).copied().flatten(),
            Some(Lang::Shell | Lang::PowerShell)
        ) {
            continue;
        }
        let mut frontier = mods.clone();
        for _ in 1..MAX_HOPS {
            let mut next = Vec::new();
            for m in &frontier {
                for &k in direct.get(m).map_or(&[][..], Vec::as_slice) {
                    if k != *i && !mods.contains(&k) && mods.len() < MAX_SOURCED {
                        mods.push(k);
                        next.push(k);
                    }
                }
            }
            frontier = next;
        }
    }
    // Exports of every imported module (each parsed once), then the importers read again.
    let mut exports: HashMap<usize, Export> = HashMap::new();
    for (i, mods) in importers.iter().take(MAX_IMPORTERS) {
        let Some((path, text)) = kept.files.get(*i) else {
            continue;
        };
        let Some(lang) = langs.get(*i).copied().flatten() else {
            continue;
        };
        let mut links = Links::default();
        for &j in mods {
            let Some((mp, mt)) = kept.files.get(j) else {
                continue;
            };
            let e = exports.entry(j).or_insert_with(|| {
                let left = budget.saturating_sub(started.elapsed());
                module_exports(lang, mp, mt, left).unwrap_or_default()
            });
            links.add_functions(mp, e);
            if e.names.is_empty() {
                continue;
            }
            links.by_key.insert(
                key(lang, &file_stem(mp, lang)),
                (mp.clone(), e.names.clone()),
            );
        }
        for (dp, dt) in &kept.data {
            let name = data_name(dp);
            if links.data.len() >= 8 || links.data.contains_key(name) || !text.contains(name) {
                continue;
            }
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(dt) {
                links
                    .data
                    .insert(name.to_string(), (dp.clone(), Rc::new(v)));
            }
        }
        if links.by_key.is_empty() && links.funcs.is_empty() && links.data.is_empty() {
            continue;
        }
        let left = budget.saturating_sub(started.elapsed());
        if left.is_zero() {
            break;
        }
        let (runs, why, install) = role(path);
        let facts = read_linked(
            lang, path, text, runs, why, install, excerpt, &mut links, left,
        );
        let already: HashSet<(crate::capabilities::Kind, &str, u32)> = existing
            .iter()
            .filter(|f| f.path.as_deref() == Some(path.as_str()))
            .map(|f| (f.kind, f.what, f.line))
            .collect();
        let from = links.used.borrow().join(", ");
        for mut f in facts {
            if already.contains(&(f.kind, f.what, f.line)) {
                continue;
            }
            if !from.is_empty() {
                f.detail = format!("{} (with values from {from})", f.detail);
            }
            out.facts.push(f);
        }
    }
    out
}

/// A data file's name (the last part of its path).
fn data_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether a file has a sink an imported value could reach: the parse gate of the file read
/// alone, or a process started from an argument list (`subprocess.run(cfg.CMD)`).
fn may_sink(lang: Lang, text: &str) -> bool {
    // A sourced file's functions, read at their calls, may hold the sink.
    if matches!(lang, Lang::Shell | Lang::PowerShell) || worth_parsing(lang, text) {
        return true;
    }
    let lower = text.to_ascii_lowercase();
    super::WEAK.iter().any(|w| lower.contains(w))
}

/// What a module gives the files that import it: its module-level values and, for shell and
/// PowerShell, its functions (with its text and tree, to read them at their calls).
#[derive(Default)]
struct Export {
    names: HashMap<String, Val>,
    funcs: HashMap<String, (usize, usize)>,
    text: Option<Rc<str>>,
    tree: Option<Tree>,
}

/// The module-level values (and functions) of a file (`None` when it could not be parsed in
/// time).
fn module_exports(lang: Lang, path: &str, text: &str, budget: Duration) -> Option<Export> {
    if budget.is_zero() || text.len() > MAX_PARSE_BYTES {
        return None;
    }
    let tree = parse_within(lang, text, budget.min(PARSE_BUDGET))?;
    let none = |l: &str| l.to_string();
    let mut cx = Ctx::new(text, Some(path), true, "", false, &none, None);
    walk(&mut cx, lang, tree.root_node());
    let names = cx
        .vars
        .into_iter()
        .filter(|(_, v)| v.module.is_none() && (v.text.is_some() || v.interesting()))
        .take(MAX_EXPORTS)
        .collect();
    let funcs: HashMap<String, (usize, usize)> = if matches!(lang, Lang::Shell | Lang::PowerShell) {
        cx.funcs.into_iter().take(MAX_EXPORTS).collect()
    } else {
        HashMap::new()
    };
    let keep = !funcs.is_empty();
    Some(Export {
        names,
        funcs,
        text: keep.then(|| Rc::from(text)),
        tree: keep.then_some(tree),
    })
}

/// The facts of `text` read with the values of the modules it imports bound.
#[allow(clippy::too_many_arguments)]
fn read_linked(
    lang: Lang,
    path: &str,
    text: &str,
    runs: bool,
    why: &'static str,
    install: bool,
    excerpt: &dyn Fn(&str) -> String,
    links: &mut Links,
    budget: Duration,
) -> Vec<Fact> {
    if text.len() > MAX_PARSE_BYTES {
        return Vec::new();
    }
    let Some(tree) = parse_within(lang, text, budget.min(PARSE_BUDGET)) else {
        return Vec::new();
    };
    // The file itself, for its functions called back from a sourced body.
    if !links.funcs.is_empty() {
        links.home = Some(links.modules.len());
        links
            .modules
            .push((path.to_string(), Rc::from(text), tree.clone()));
    }
    let links: &Links = links;
    let mut cx = Ctx::new(text, Some(path), runs, why, install, excerpt, Some(links));
    if lang == Lang::PowerShell {
        cx.breaks = super::param_breaks(text);
    }
    walk(&mut cx, lang, tree.root_node());
    cx.facts
}
