//! Code read as code (issue 29, decision 0034).
//!
//! Shell, Python, JavaScript (TypeScript with the JavaScript grammar) and PowerShell files are
//! parsed with tree-sitter grammars, and values are followed within a file: string literals, their
//! concatenation, f-strings and template literals, variables and assignments, command
//! substitution, array joins, `chr()`/`String.fromCharCode` arithmetic, and data decoded,
//! decompressed or decrypted. When such a value reaches a sink (a shell's `eval`, `sh -c`,
//! `source <(...)`, a pipe into an interpreter; Python's `exec`, `eval`, `compile`,
//! `os.system`, `subprocess.*`, `__import__`; JavaScript's `eval`, `Function`,
//! `child_process.*`, `vm.runIn*`), or when the sink itself is named by an assembled value
//! (`getattr(os, "sys"+"tem")`, `c="cu""rl"; $c`), the facts go to the capability
//! inventory ([`crate::capabilities`]) like the lexical ones, so the `combo.*` rules see
//! them. What was assembled is read again by the lexical pass, so `"cu"+"rl … | sh"` is a
//! download and a run.
//!
//! Obfuscation is a capability ([`Kind::Obfuscates`]): decoded, decompressed or decrypted
//! data that runs, strings built from character codes or XOR, and code lines of extreme
//! length or entropy. PowerShell that could not be parsed keeps a text pass
//! ([`powershell`]).
//!
//! Bounds: files over [`MAX_PARSE_BYTES`] are not parsed (the text passes still read them),
//! a parse stops after [`PARSE_BUDGET`] (tree-sitter's progress callback), the walk visits at
//! most [`MAX_NODES`] nodes, values are cut at [`MAX_VALUE`] bytes and evaluation recursion at
//! [`MAX_DEPTH`], calls to the file's own functions are read through at most
//! [`MAX_CALL_DEPTH`] deep and [`MAX_CALL_READS`] times a file (shell and PowerShell calls
//! memoised, at most [`MAX_FULL_READS_PER_FUNCTION`] full reads a function, then its summary:
//! [`Ctx::call_fn`], decision 0051). Parsing runs on the thread that scans the file (the executor's threads).

mod js;
pub(crate) mod link;
mod powershell;
mod pwsh;
mod python;
mod shell;

use crate::capabilities::{Fact, Kind};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};
use tree_sitter::{Language, Node, ParseOptions, ParseState, Parser, Point, Tree};

/// Files larger than this are not parsed (the lexical passes still read them).
pub(crate) const MAX_PARSE_BYTES: usize = 512 * 1024;
/// A parse that takes longer than this is abandoned.
pub(crate) const PARSE_BUDGET: Duration = Duration::from_millis(300);
/// At most this many syntax nodes visited per file.
pub(crate) const MAX_NODES: usize = 400_000;
/// Resolved values are cut at this many bytes.
pub(crate) const MAX_VALUE: usize = 8 * 1024;
/// Evaluation recursion bound.
pub(crate) const MAX_DEPTH: usize = 48;
/// A known list keeps at most this many items, of at most [`MAX_VALUE`] bytes together.
pub(crate) const MAX_ITEMS: usize = 1024;
/// At most this much time reading code as code in one scan; past it, files keep the text
/// passes.
pub(crate) const MAX_SCAN_CODE_TIME: Duration = Duration::from_secs(4);
/// At most this many variables remembered per file.
const MAX_VARS: usize = 4096;
/// At most this many functions per file are read through at their calls.
const MAX_FUNCS: usize = 512;
/// Calls read through inside calls read through, at most this deep.
pub(crate) const MAX_CALL_DEPTH: usize = 3;
/// At most this many statements of a function body are read per call.
pub(crate) const MAX_BODY_STATEMENTS: usize = 64;
/// At most this many calls per file are read through their function's body, nested ones
/// included: without it, functions that each call the next several times in each of their
/// statements multiply the work by the depth (a 66 KB file kept a scan busy for over ten
/// minutes). Later calls give an unknown value.
pub(crate) const MAX_CALL_READS: usize = 256;
/// At most this many facts from the code pass of one file.
const MAX_CODE_FACTS: usize = 24;

/// A language with a grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Lang {
    Shell,
    Python,
    Js,
    PowerShell,
}

/// The language of a file, by extension or shebang.
pub(crate) fn lang_of(path: Option<&str>, text: &str) -> Option<Lang> {
    let name = path?.rsplit('/').next()?.to_ascii_lowercase();
    let ext = name.rsplit_once('.').map(|(_, e)| e);
    match ext {
        Some("sh" | "bash" | "zsh" | "ksh" | "command") => return Some(Lang::Shell),
        Some("py" | "pyw" | "pth") => return Some(Lang::Python),
        Some("js" | "mjs" | "cjs" | "jsx" | "ts" | "mts" | "cts" | "tsx") => return Some(Lang::Js),
        Some("ps1" | "psm1" | "psd1") => return Some(Lang::PowerShell),
        _ => {}
    }
    if ext.is_some() {
        return None;
    }
    let first = text.lines().next().unwrap_or("");
    if let Some(she) = first.strip_prefix("#!") {
        if she.contains("python") {
            return Some(Lang::Python);
        }
        if she.contains("node") || she.contains("deno") || she.contains("bun") {
            return Some(Lang::Js);
        }
        if she.contains("pwsh") || she.contains("powershell") {
            return Some(Lang::PowerShell);
        }
        if she.contains("sh") {
            return Some(Lang::Shell);
        }
    }
    // Git hooks and extension-less scripts without a shebang: not guessed.
    None
}

/// A value followed through the code.
#[derive(Debug, Clone, Default)]
pub(crate) struct Val {
    /// The value when it is known (cut at [`MAX_VALUE`]).
    pub text: Option<String>,
    /// A known list (array literal, `split`), for joins.
    pub items: Option<Vec<String>>,
    /// How many literal pieces were joined to make it (saturating).
    pub pieces: u8,
    /// It went through a variable.
    pub via_var: bool,
    /// How it was decoded, decompressed, decrypted or built from codes.
    pub decoded: Option<&'static str>,
    /// It was downloaded at run time.
    pub fetched: bool,
    /// It names a module (`require('child_process')`, `import os as o`).
    pub module: Option<String>,
    /// The values of a data file of the skill it was loaded from (`json.load(open("x.json"))`,
    /// `require('./x.json')`), or of a part of one: its keys give their values.
    pub data: Option<Data>,
}

/// A part of a data file's values: the file's values, shared, and the JSON pointer of the
/// part, so that taking a key never copies the file (a script may take thousands).
#[derive(Debug, Clone)]
pub(crate) struct Data {
    root: std::rc::Rc<serde_json::Value>,
    at: String,
}

impl Val {
    pub(crate) fn lit(s: &str) -> Val {
        Val {
            text: Some(cut(s)),
            pieces: 1,
            ..Val::default()
        }
    }

    pub(crate) fn unknown() -> Val {
        Val::default()
    }

    /// `a + b`.
    pub(crate) fn concat(self, b: Val) -> Val {
        let text = match (self.text, b.text) {
            (Some(x), Some(y)) => Some(cut(&(x + &y))),
            _ => None,
        };
        Val {
            text,
            items: None,
            pieces: self.pieces.saturating_add(b.pieces),
            via_var: self.via_var || b.via_var,
            decoded: self.decoded.or(b.decoded),
            fetched: self.fetched || b.fetched,
            module: None,
            data: None,
        }
    }

    /// The value at `key` of a data file's values (`cfg["a"]`, `cfg.a`): a string or number
    /// as a literal, a list of them as a list, an object as data again.
    pub(crate) fn key(&self, key: &str) -> Option<Val> {
        let d = self.data.as_ref()?;
        let x = match d.root.pointer(&d.at)? {
            serde_json::Value::Object(m) => m.get(key)?,
            serde_json::Value::Array(a) => a.get(key.parse::<usize>().ok()?)?,
            _ => return None,
        };
        Some(data_val(x).unwrap_or_else(|| Val {
            data: Some(Data {
                root: d.root.clone(),
                at: format!("{}/{}", d.at, key.replace('~', "~0").replace('/', "~1")),
            }),
            ..Val::default()
        }))
    }

    /// Keeps the flags of `self`, with a new text.
    pub(crate) fn with_text(mut self, text: Option<String>) -> Val {
        self.text = text.map(|t| cut(&t));
        self.items = None;
        self
    }

    pub(crate) fn decoded(mut self, how: &'static str, text: Option<String>) -> Val {
        self.decoded = Some(how);
        self.text = text.map(|t| cut(&t));
        self.items = None;
        // Decoded text counts as assembled.
        self.pieces = self.pieces.max(2);
        self
    }

    /// A value downloaded at run time.
    pub(crate) fn downloaded() -> Val {
        Val {
            fetched: true,
            ..Val::unknown()
        }
    }

    /// An empty text to concatenate pieces onto (strings with interpolations).
    pub(crate) fn empty_text() -> Val {
        Val {
            text: Some(String::new()),
            pieces: 0,
            ..Val::default()
        }
    }

    /// A name bound to a module (`import os as o`, `require('child_process')`).
    pub(crate) fn module(name: String) -> Val {
        Val {
            module: Some(name),
            ..Val::default()
        }
    }

    /// Decoded by `decode` (`unbase64`, `unhex`) when the text is known.
    pub(crate) fn decoded_by(self, how: &'static str, decode: fn(&str) -> Option<String>) -> Val {
        let t = self.text.as_deref().and_then(decode);
        self.decoded(how, t)
    }

    /// A known list joined with `sep` (`sep.join(xs)`, `xs.join(sep)`, `-join`); counts as
    /// assembled from as many pieces as it has items.
    pub(crate) fn joined(self, sep: Option<&str>) -> Val {
        let pieces = self
            .items
            .as_ref()
            .map_or(0, |i| u8::try_from(i.len()).unwrap_or(u8::MAX));
        let text = sep.and_then(|s| self.items.as_ref().map(|i| i.join(s)));
        let mut out = self.with_text(text);
        out.pieces = out.pieces.max(pieces);
        out
    }

    /// Joined from two or more pieces, through a variable or decoded.
    pub(crate) fn assembled(&self) -> bool {
        self.pieces >= 2 || self.decoded.is_some()
    }

    /// Something worth following into a sink.
    fn interesting(&self) -> bool {
        self.assembled() || self.fetched
    }
}

/// The value of a part of a data file, as code sees it; `None` for an object or a list that
/// is not all strings and numbers, which stays data (see [`Val::key`]).
fn data_val(x: &serde_json::Value) -> Option<Val> {
    Some(match x {
        serde_json::Value::String(s) => Val::lit(s),
        serde_json::Value::Number(n) => Val::lit(&n.to_string()),
        serde_json::Value::Bool(b) => Val::lit(if *b { "True" } else { "False" }),
        serde_json::Value::Array(a) if a.iter().all(|i| i.is_string() || i.is_number()) => list_of(
            a.iter()
                .take(MAX_ITEMS)
                .map(|i| Val::lit(&i.as_str().map_or_else(|| i.to_string(), str::to_string))),
        ),
        serde_json::Value::Array(_) | serde_json::Value::Object(_) => return None,
        serde_json::Value::Null => Val::unknown(),
    })
}

/// The values of the data file a loading call names by a literal (`json.load(open(
/// "checks.json"))`, `require('./transport.json')`), when the file is read joined.
pub(crate) fn data_file(cx: &Ctx<'_>, call_text: &str) -> Option<Val> {
    let links = cx.links?;
    let name = call_text
        .split(['"', '\'', '`'])
        .skip(1)
        .step_by(2)
        .find(|s| s.ends_with(".json"))?;
    let name = name.rsplit('/').next().unwrap_or(name);
    let root = links.data(name)?;
    Some(Val {
        data: Some(Data {
            root,
            at: String::new(),
        }),
        ..Val::default()
    })
}

/// A list literal from its items' values: the known texts as items; the list is as assembled
/// as its most assembled item (each item is its own argument), not the sum of its items.
pub(crate) fn list_of(values: impl Iterator<Item = Val>) -> Val {
    let mut items = Vec::new();
    let mut flags = Val::unknown();
    for v in values {
        if let Some(t) = &v.text {
            push_item(&mut items, t);
        }
        let most = flags.pieces.max(v.pieces);
        flags = flags.concat(Val { text: None, ..v });
        flags.pieces = most;
    }
    Val {
        items: Some(items),
        text: None,
        ..flags
    }
}

/// Adds an item to a known list within [`MAX_ITEMS`] and [`MAX_VALUE`] bytes.
pub(crate) fn push_item(items: &mut Vec<String>, t: &str) {
    let total: usize = items.iter().map(String::len).sum();
    if items.len() < MAX_ITEMS && total + t.len() <= MAX_VALUE {
        items.push(t.to_string());
    }
}

fn cut(s: &str) -> String {
    if s.len() <= MAX_VALUE {
        return s.to_string();
    }
    let mut end = MAX_VALUE;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or("").to_string()
}

/// What a sink does with its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sink {
    /// Evaluates code in the interpreter (`exec`, `eval`, `Function`, `vm.runIn*`).
    Eval,
    /// Runs a shell command string (`os.system`, `sh -c`, `child_process.exec`).
    Shell,
    /// Starts a process from an argument list (`subprocess.run([...])`, `spawn`).
    Process,
    /// Imports a module by name (`__import__`, `require`).
    Import,
    /// A command that is no sink itself, spelled with the values of its arguments, read for
    /// what it does (a registry write through `Set-ItemProperty @entry`, a file written at a
    /// path assembled in pieces): its command word is literal.
    Command,
}

/// The state of one file's analysis: variables, aliases, facts.
pub(crate) struct Ctx<'a> {
    pub src: &'a str,
    pub vars: HashMap<String, Val>,
    pub path: Option<&'a str>,
    runs: bool,
    why: &'static str,
    install: bool,
    excerpt: &'a dyn Fn(&str) -> String,
    pub facts: Vec<Fact>,
    seen: HashSet<(u32, &'static str)>,
    /// The values of the skill's other files, when the file is read joined with them
    /// ([`link`]).
    pub links: Option<&'a link::Links>,
    /// Functions defined in the file, by name: the byte range of their definition, so that a
    /// call can be read through its body (at most [`MAX_FUNCS`]).
    pub funcs: HashMap<String, (usize, usize)>,
    /// Local scopes of the calls being read through ([`MAX_CALL_DEPTH`] deep): parameters
    /// bound to the call's arguments, and the body's assignments.
    pub frames: RefCell<Vec<HashMap<String, Val>>>,
    /// Calls read through so far in this file (at most [`MAX_CALL_READS`]).
    calls_read: Cell<usize>,
    /// Sinks met where nothing can be reported (a shell function's body read through from a
    /// command substitution), reported by [`Ctx::flush`] after the node (at most
    /// [`MAX_CODE_FACTS`] kept).
    deferred: RefCell<Vec<Deferred<'a>>>,
    /// Statements of bodies read through so far in this file (each call reads at most
    /// [`MAX_BODY_STATEMENTS`]): a measure of the work, for the bounds' tests.
    statements_read: Cell<usize>,
    /// The text the nodes being read belong to: the file's, or a sourced file's while a
    /// function of it is read through ([`Ctx::call_fn`]).
    cur: Cell<&'a str>,
    /// The linked module whose function body is being read (`None`: the file itself).
    module: Cell<Option<usize>>,
    /// While a body of another file is read: the line of the call in this file, where its
    /// sinks are reported.
    site: Cell<Option<(u32, &'a str)>>,
    /// Shell and PowerShell calls read through, by function: memoised results
    /// ([`Ctx::call_fn`]).
    memo: RefCell<HashMap<String, Reads>>,
    /// The variables of the file read by the bodies being read through (one list per read in
    /// progress), so that a memoised result is used only while they are unchanged.
    deps: RefCell<Vec<Vec<String>>>,
    /// Offsets of blanks read as line breaks by the parse ([`param_breaks`]).
    pub breaks: Vec<usize>,
    /// The version of each variable of the file (the assignment count when it was last
    /// set), so that a memoised read is used only while the variables it read are unchanged.
    versions: HashMap<String, u64>,
    generation: u64,
    /// Reads of a function's summary (its body with its arguments' texts unknown) so far in
    /// this file (at most [`MAX_CALL_READS`], besides the full reads).
    summaries_read: Cell<usize>,
}

/// The reads of one function of a shell or PowerShell file ([`Ctx::call_fn`]): how many read
/// its body with the call's own arguments, and the results kept.
#[derive(Default)]
struct Reads {
    full: usize,
    kept: Vec<Memo>,
}

/// A call's result kept: the arguments' signature (and the depth it was read at) and its
/// hash (a quick test before the signatures are compared), the variables of the file its
/// body read with their versions then, and what it gave.
struct Memo {
    hash: u64,
    key: String,
    deps: Vec<(String, u64)>,
    out: Val,
}

/// A function's body is read with each call's own arguments at most this many times per
/// file; later calls with other arguments take its summary: the body read with the
/// arguments' texts unknown but their flags (downloaded, decoded, assembled) kept, once per
/// such shape (decision 0051). Honest helpers (`log "step $n"` called hundreds of times) thus
/// cost a few reads, not the file's whole budget.
pub(crate) const MAX_FULL_READS_PER_FUNCTION: usize = 16;
/// Results kept per function, and signatures longer than this many bytes are not kept.
const MAX_MEMO_PER_FUNCTION: usize = 64;
const MAX_MEMO_KEY: usize = 2048;

/// The work the code pass did on one file, for the bounds' tests: syntax nodes visited,
/// calls read through their function's body, statements of those bodies read.
#[cfg(test)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Work {
    pub nodes: usize,
    pub calls: usize,
    pub statements: usize,
    /// Summaries read (shell and PowerShell functions, [`MAX_FULL_READS_PER_FUNCTION`]).
    pub summaries: usize,
}

/// A sink (or an assembled command word) met while evaluating: its line, the line's text,
/// and what [`Ctx::sink`] (or [`Ctx::assembled_name`]) is given.
enum Deferred<'a> {
    Sink(u32, &'a str, Sink, String, Val),
    Name(u32, &'a str, String),
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        src: &'a str,
        path: Option<&'a str>,
        runs: bool,
        why: &'static str,
        install: bool,
        excerpt: &'a dyn Fn(&str) -> String,
        links: Option<&'a link::Links>,
    ) -> Ctx<'a> {
        Ctx {
            src,
            vars: HashMap::new(),
            path,
            runs,
            why,
            install,
            excerpt,
            facts: Vec::new(),
            seen: HashSet::new(),
            links,
            funcs: HashMap::new(),
            frames: RefCell::new(Vec::new()),
            calls_read: Cell::new(0),
            deferred: RefCell::new(Vec::new()),
            statements_read: Cell::new(0),
            cur: Cell::new(src),
            module: Cell::new(None),
            site: Cell::new(None),
            memo: RefCell::new(HashMap::new()),
            deps: RefCell::new(Vec::new()),
            summaries_read: Cell::new(0),
            breaks: Vec::new(),
            versions: HashMap::new(),
            generation: 0,
        }
    }

    /// The value `name` of the local module `stem`, when the file is read joined.
    pub(crate) fn linked(&self, lang: Lang, stem: &str, name: &str) -> Option<Val> {
        self.links?.get(lang, stem, name)
    }

    /// The text of a node.
    pub(crate) fn text(&self, n: Node<'_>) -> &'a str {
        self.cur.get().get(n.byte_range()).unwrap_or("")
    }

    /// The text after `a` up to the end of `n` (an operator between named children).
    pub(crate) fn src_after(&self, a: Node<'_>, n: Node<'_>) -> &'a str {
        self.cur.get().get(a.end_byte()..n.end_byte()).unwrap_or("")
    }

    /// The name an identifier calls: the module it is bound to (`import os as o`,
    /// `const cp = require('child_process')`), else its own name.
    pub(crate) fn callee_name(&self, n: Node<'_>) -> String {
        let t = self.text(n);
        self.vars
            .get(t)
            .and_then(|v| v.module.clone())
            .unwrap_or_else(|| t.to_string())
    }

    pub(crate) fn set(&mut self, name: &str, mut v: Val) {
        if self.vars.len() >= MAX_VARS && !self.vars.contains_key(name) {
            return;
        }
        v.via_var = true;
        self.generation += 1;
        if self.versions.len() < MAX_VARS || self.versions.contains_key(name) {
            self.versions.insert(name.to_string(), self.generation);
        }
        self.vars.insert(name.to_string(), v);
    }

    /// The version of the file's variable `name`: changed by every assignment (0: never set).
    fn version(&self, name: &str) -> u64 {
        self.versions.get(name).copied().unwrap_or(0)
    }

    pub(crate) fn get(&self, name: &str) -> Val {
        if let Some(v) = self
            .frames
            .borrow()
            .last()
            .and_then(|f| f.get(name).cloned())
        {
            return v;
        }
        self.note_dep(name);
        self.vars.get(name).cloned().unwrap_or_default()
    }

    /// Whether the file (or, read joined, a file it sources) assigns `name`.
    pub(crate) fn is_set(&self, name: &str) -> bool {
        self.frames
            .borrow()
            .last()
            .is_some_and(|f| f.contains_key(name))
            || self.vars.contains_key(name)
    }

    /// Notes that the reads in progress used the file's variable `name`.
    fn note_dep(&self, name: &str) {
        let mut deps = self.deps.borrow_mut();
        for d in deps.iter_mut() {
            if d.len() < 64 && !d.iter().any(|x| x == name) {
                d.push(name.to_string());
            }
        }
    }

    /// Whether a function of this name is defined in the file or, read joined, in a file it
    /// sources or imports (shell, PowerShell).
    pub(crate) fn has_function(&self, name: &str) -> bool {
        self.funcs.contains_key(name) || self.links.is_some_and(|l| l.function(name).is_some())
    }

    /// A call of the function `name` (of the file, or of a file it sources) read through its
    /// body by `read` with `args`, for shell and PowerShell, within the bounds of
    /// [`MAX_CALL_DEPTH`] and [`MAX_CALL_READS`]; memoised (decision 0051): a call with the
    /// same arguments, read at the same depth, while the file's variables its body read are
    /// unchanged, gives the kept result without a read; after
    /// [`MAX_FULL_READS_PER_FUNCTION`] reads of one function with distinct arguments, its
    /// calls take its summary (the arguments' texts unknown, their flags kept), read once per
    /// shape and counted apart ([`Ctx::summaries_read`]). A body of another file is read
    /// with its text, and its sinks are reported at the call's line.
    pub(crate) fn call_fn<'t>(
        &self,
        call: Node<'t>,
        name: &str,
        args: &[Val],
        read: &dyn Fn(Node<'t>, &[Val]) -> Val,
    ) -> Option<Val>
    where
        'a: 't,
    {
        let (module, start, end) = match self.funcs.get(name) {
            Some(&(s, e)) => (None, s, e),
            None => {
                let (m, s, e) = self.links?.function(name)?;
                (Some(m), s, e)
            }
        };
        let depth = self.frames.borrow().len();
        if depth >= MAX_CALL_DEPTH {
            return None;
        }
        let full_key = memo_key(depth, args);
        if let Some(v) = self.memo_hit(name, &full_key) {
            return Some(v);
        }
        let summary = self
            .memo
            .borrow()
            .get(name)
            .is_some_and(|r| r.full >= MAX_FULL_READS_PER_FUNCTION);
        let (key, args): (String, Vec<Val>) = if summary {
            let shaped: Vec<Val> = args.iter().map(shape).collect();
            let key = format!("shape:{}", memo_key(depth, &shaped));
            if let Some(v) = self.memo_hit(name, &key) {
                return Some(v);
            }
            if self.summaries_read.get() >= MAX_CALL_READS {
                return None;
            }
            (key, shaped)
        } else {
            if self.calls_read.get() >= MAX_CALL_READS {
                return None;
            }
            (full_key, args.to_vec())
        };
        // The definition, in the tree it belongs to.
        let here = self.module.get();
        let root = if module == here {
            let mut root = call;
            while let Some(p) = root.parent() {
                root = p;
            }
            root
        } else {
            // A function of the file called back from a body of another file: read in the
            // file's own tree, kept with the links.
            self.links?.root(module.or(self.links?.home())?)?
        };
        let def = root.descendant_for_byte_range(start, end)?;
        if def.start_byte() != start || def.end_byte() != end {
            return None;
        }
        if summary {
            self.summaries_read.set(self.summaries_read.get() + 1);
        } else {
            self.calls_read.set(self.calls_read.get() + 1);
        }
        let saved = (self.cur.get(), self.site.get());
        if module != here {
            if self.site.get().is_none() {
                self.site.set(Some(self.line_of(call)));
            }
            match module.and_then(|m| self.links.and_then(|l| l.text(m))) {
                Some(text) => self.cur.set(text),
                None => self.cur.set(self.src),
            }
            self.module.set(module);
        }
        self.deps.borrow_mut().push(Vec::new());
        let out = read(def, &args);
        let used = self.deps.borrow_mut().pop().unwrap_or_default();
        self.cur.set(saved.0);
        self.site.set(saved.1);
        self.module.set(here);
        let mut memo = self.memo.borrow_mut();
        let reads = memo.entry(name.to_string()).or_default();
        if !summary {
            reads.full += 1;
        }
        if key.len() <= MAX_MEMO_KEY && reads.kept.len() < MAX_MEMO_PER_FUNCTION {
            let deps = used
                .into_iter()
                .map(|d| {
                    let v = self.version(&d);
                    (d, v)
                })
                .collect();
            reads.kept.push(Memo {
                hash: hash_of(&key),
                key,
                deps,
                out: out.clone(),
            });
        }
        Some(out)
    }

    /// The kept result of `name` for `key` whose variables are unchanged; the variables are
    /// noted as used by the reads in progress.
    fn memo_hit(&self, name: &str, key: &str) -> Option<Val> {
        let hash = hash_of(key);
        let memo = self.memo.borrow();
        let m = memo.get(name)?.kept.iter().find(|m| {
            m.hash == hash && m.key == key && m.deps.iter().all(|(d, v)| self.version(d) == *v)
        })?;
        for (d, _) in &m.deps {
            self.note_dep(d);
        }
        Some(m.out.clone())
    }

    /// Records a function's definition (name and byte range), within [`MAX_FUNCS`].
    pub(crate) fn define(&mut self, name: &str, n: Node<'_>) {
        if self.funcs.len() < MAX_FUNCS || self.funcs.contains_key(name) {
            self.funcs
                .insert(name.to_string(), (n.start_byte(), n.end_byte()));
        }
    }

    /// The definition of the function `name` called at `call`, when it is in the file, the
    /// calls being read through are fewer than [`MAX_CALL_DEPTH`] and the file's calls read
    /// through fewer than [`MAX_CALL_READS`] (this one counts).
    pub(crate) fn definition<'t>(&self, call: Node<'t>, name: &str) -> Option<Node<'t>> {
        let &(start, end) = self.funcs.get(name)?;
        if self.frames.borrow().len() >= MAX_CALL_DEPTH || self.calls_read.get() >= MAX_CALL_READS {
            return None;
        }
        self.calls_read.set(self.calls_read.get() + 1);
        let mut root = call;
        while let Some(p) = root.parent() {
            root = p;
        }
        let def = root.descendant_for_byte_range(start, end)?;
        (def.start_byte() == start && def.end_byte() == end).then_some(def)
    }

    /// What a call read through a function of the file returns (shared by the Python and
    /// JavaScript walkers): `frame` (its parameters, bound by the language's walker) is the
    /// innermost scope while `read` reads the body, collecting what its `return`s give; then
    /// the first return whose text (or items) is known, else the flags of all of them.
    pub(crate) fn call_frame(
        &self,
        frame: HashMap<String, Val>,
        read: impl FnOnce(&mut Body),
    ) -> Val {
        self.read_frame(frame, read).first_known()
    }

    /// Reads a body of a call read through with `frame` as its innermost scope, counting its
    /// statements ([`Work::statements`]): what [`Ctx::call_frame`] and the shell's calls
    /// (which keep what the body prints, not what it returns) share.
    pub(crate) fn read_frame(
        &self,
        frame: HashMap<String, Val>,
        read: impl FnOnce(&mut Body),
    ) -> Body {
        self.frames.borrow_mut().push(frame);
        let mut body = Body::new();
        read(&mut body);
        self.frames.borrow_mut().pop();
        self.count_statements(&body);
        body
    }

    /// Adds the statements `body` read to the file's count ([`Work::statements`]).
    fn count_statements(&self, body: &Body) {
        let used = MAX_BODY_STATEMENTS.saturating_sub(body.budget);
        self.statements_read
            .set(self.statements_read.get().saturating_add(used));
    }

    /// Assigns `name` in the innermost scope of a call being read through: `v`, or with
    /// `plus` (`+=`) the name's value joined with `v`; a variable's value.
    pub(crate) fn assign_local(&self, name: String, mut v: Val, plus: bool) {
        if plus {
            v = self.get(&name).concat(v);
        }
        v.via_var = true;
        if let Some(f) = self.frames.borrow_mut().last_mut() {
            f.insert(name, v);
        }
    }

    /// Reads the expression statement `st` of a body being read through when it assigns a
    /// name (an `assign` node) or adds to it (`+=`, an `augmented` node): in the innermost
    /// scope, the value `eval` gives the right side.
    pub(crate) fn read_assignment(
        &self,
        st: Node<'_>,
        assign: &str,
        augmented: &str,
        eval: impl FnOnce(Node<'_>) -> Val,
    ) {
        let Some(e) = st.named_child(0) else {
            return;
        };
        let plus = e.kind() == augmented
            && e.child_by_field_name("operator").map(|o| self.text(o)) == Some("+=");
        if e.kind() != assign && !plus {
            return;
        }
        let Some((left, right)) = sides(e, "left", "right") else {
            return;
        };
        if left.kind() != "identifier" {
            return;
        }
        let v = eval(right);
        self.assign_local(self.text(left).to_string(), v, plus);
    }

    /// The line number of a node and the text of its line (found from the node's offset,
    /// so that it costs the line's length, not the file's).
    fn line_of(&self, n: Node<'_>) -> (u32, &'a str) {
        if let Some(site) = self.site.get() {
            return site;
        }
        let at = n.start_byte().min(self.src.len());
        // Line breaks the parse read in place of blanks ([`param_breaks`]) are not lines.
        let row = n
            .start_position()
            .row
            .saturating_sub(self.breaks.partition_point(|b| *b < at));
        let start = self
            .src
            .get(..at)
            .and_then(|s| s.rfind('\n'))
            .map_or(0, |i| i + 1);
        let end = self
            .src
            .get(at..)
            .and_then(|s| s.find('\n'))
            .map_or(self.src.len(), |i| at + i);
        let line = self
            .src
            .get(start..end)
            .unwrap_or("")
            .trim_end_matches('\r');
        (u32::try_from(row + 1).unwrap_or(u32::MAX), line)
    }

    fn push(&mut self, kind: Kind, what: &'static str, detail: String, line: u32, dynamic: bool) {
        if self.facts.len() >= MAX_CODE_FACTS || !self.seen.insert((line, what)) {
            return;
        }
        let site = crate::capabilities::Site {
            path: self.path,
            runs: self.runs,
            why: self.why,
            install: self.install,
        };
        let fact = site.fact(kind, what, detail, line);
        self.facts.push(Fact {
            dynamic,
            strong: true,
            ..fact
        });
    }

    /// An obfuscation fact that does not run by itself (a blob, codes built into a string).
    pub(crate) fn obfuscated(&mut self, n: Node<'_>, what: &'static str) {
        let (line, text) = self.line_of(n);
        let d = (self.excerpt)(text);
        self.push(Kind::Obfuscates, what, d, line, false);
    }

    /// A sink named by an assembled value (`getattr(os, "sys"+"tem")`, `$c` holding `curl`).
    pub(crate) fn assembled_name(&mut self, n: Node<'_>, word: &str) {
        let (line, text) = self.line_of(n);
        self.assembled_name_at(line, text, word);
    }

    fn assembled_name_at(&mut self, line: u32, text: &str, word: &str) {
        let lower = word.to_ascii_lowercase();
        let base = lower
            .rsplit(['.', '/'])
            .next()
            .unwrap_or(&lower)
            .to_string();
        let kind = if base == "curl" || base == "wget" {
            Kind::Downloads
        } else {
            Kind::Executes
        };
        let d = format!("{} (spells `{base}`)", (self.excerpt)(text));
        self.push(kind, "assembles a command word from pieces", d, line, true);
    }

    /// A value reaches a sink.
    pub(crate) fn sink(&mut self, n: Node<'_>, sink: Sink, name: &str, v: &Val) {
        let (line, text) = self.line_of(n);
        self.sink_at(line, text, sink, name, v);
    }

    /// A file read or written by `name` at `path`: when the path was assembled in pieces, it
    /// is spelled after `verb` (`cat ~/.ssh`, `writes > ~/Library/LaunchAgents/…`) and read by
    /// the lexical pass as a command.
    pub(crate) fn path_access(&mut self, n: Node<'_>, name: &str, verb: &str, path: &Val) {
        if let (true, Some(t)) = (path.assembled(), path.text.as_deref()) {
            let v = Val {
                text: Some(format!("{verb}{t}")),
                pieces: 2,
                ..Val::default()
            };
            self.sink(n, Sink::Command, name, &v);
        }
    }

    /// [`Ctx::sink`] from where nothing can be reported: kept until [`Ctx::flush`].
    pub(crate) fn defer_sink(&self, n: Node<'_>, sink: Sink, name: &str, v: &Val) {
        if !worth_sinking(sink, v) {
            return;
        }
        let (line, text) = self.line_of(n);
        let mut d = self.deferred.borrow_mut();
        if d.len() < MAX_CODE_FACTS {
            d.push(Deferred::Sink(
                line,
                text,
                sink,
                name.to_string(),
                v.clone(),
            ));
        }
    }

    /// [`Ctx::assembled_name`] from where nothing can be reported: kept until [`Ctx::flush`].
    pub(crate) fn defer_name(&self, n: Node<'_>, word: &str) {
        let (line, text) = self.line_of(n);
        let mut d = self.deferred.borrow_mut();
        if d.len() < MAX_CODE_FACTS {
            d.push(Deferred::Name(line, text, word.to_string()));
        }
    }

    /// Reports what [`Ctx::defer_sink`] and [`Ctx::defer_name`] kept.
    pub(crate) fn flush(&mut self) {
        let kept = std::mem::take(&mut *self.deferred.borrow_mut());
        for d in kept {
            match d {
                Deferred::Sink(line, text, sink, name, v) => {
                    self.sink_at(line, text, sink, &name, &v)
                }
                Deferred::Name(line, text, word) => self.assembled_name_at(line, text, &word),
            }
        }
    }

    fn sink_at(&mut self, line: u32, text: &str, sink: Sink, name: &str, v: &Val) {
        if !worth_sinking(sink, v) {
            return;
        }
        let shown = (self.excerpt)(text);
        if v.fetched {
            self.push(
                Kind::Downloads,
                "downloads code at run time",
                shown.clone(),
                line,
                false,
            );
            self.push(Kind::Executes, "evaluates code", shown.clone(), line, true);
        }
        // One character from a code (`chr(10)`) hides nothing.
        let short = v.text.as_ref().is_some_and(|t| t.chars().count() < 4);
        if let Some(how) = v
            .decoded
            .filter(|h| !(short && *h == "built from character codes"))
        {
            let d = format!("{shown} ({how} data run by `{name}`)");
            self.push(
                Kind::Obfuscates,
                "runs decoded or decrypted data",
                d,
                line,
                true,
            );
        }
        let Some(value) = v.text.as_deref() else {
            return;
        };
        // The head word of a command assembled from pieces.
        if matches!(sink, Sink::Shell | Sink::Process | Sink::Import) && v.pieces >= 2 {
            let head = value.split_whitespace().next().unwrap_or("");
            let head = head.rsplit('/').next().unwrap_or(head).to_ascii_lowercase();
            if crate::capabilities::is_split_word(&head) {
                self.assembled_name_at(line, text, &head);
            }
        }
        // What the assembled value does, read by the lexical pass.
        let mut inner = Vec::new();
        let mut refs = HashSet::new();
        let excerpt = self.excerpt;
        crate::capabilities::extract(self.path, value, excerpt, &mut inner, &mut refs);
        let downloads = inner.iter().any(|f| f.kind == Kind::Downloads);
        for mut f in inner.into_iter().take(8) {
            if self.facts.len() >= MAX_CODE_FACTS {
                break;
            }
            f.line = line;
            f.detail = format!("{} (assembled at run time, run by `{name}`)", f.detail);
            // A value assembled from literals of the file is as fixed as a literal; decoded or
            // downloaded, it is not.
            f.dynamic =
                f.dynamic || (f.kind == Kind::Executes && (v.decoded.is_some() || v.fetched));
            f.runs = self.runs;
            f.why = self.why;
            f.install = self.install;
            self.facts.push(f);
        }
        if downloads {
            let d = format!("{shown} (runs `{}`)", (self.excerpt)(value));
            self.push(Kind::Executes, "evaluates code", d, line, true);
        } else if sink == Sink::Eval {
            let d = format!("{shown} (evaluates an assembled value)");
            self.push(Kind::Executes, "evaluates code", d, line, true);
        }
    }
}

/// The signature of a call's arguments read at `depth`, for [`Ctx::call_fn`]'s memo.
fn memo_key(depth: usize, args: &[Val]) -> String {
    let mut k = depth.to_string();
    for a in args {
        k.push('\u{1}');
        k.push_str(&sig(a));
        if k.len() > MAX_MEMO_KEY {
            break;
        }
    }
    k
}

fn hash_of(key: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish()
}

/// A value's signature: all it says (text, items, flags).
fn sig(v: &Val) -> String {
    format!("{v:?}")
}

/// An argument as a summary sees it: its text unknown, its flags kept.
fn shape(v: &Val) -> Val {
    Val {
        text: None,
        items: None,
        module: None,
        ..v.clone()
    }
}

/// Whether a value reaching a sink says anything: assembled, decoded or downloaded, or a
/// process started with a URL that came through a variable (`pip install PKG`).
fn worth_sinking(sink: Sink, v: &Val) -> bool {
    let url_from_var =
        sink == Sink::Process && v.via_var && v.text.as_deref().is_some_and(|t| t.contains("://"));
    v.interesting() || url_from_var
}

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// The body of a function being read through ([`Ctx::call_frame`]): what its `return`s gave
/// so far, and how many statements more it may read.
pub(crate) struct Body {
    pub returns: Vec<Val>,
    budget: usize,
}

impl Body {
    /// A body with the budget of [`MAX_BODY_STATEMENTS`] statements.
    pub(crate) fn new() -> Body {
        Body {
            returns: Vec::new(),
            budget: MAX_BODY_STATEMENTS,
        }
    }

    /// Reads no more statements (`return`, `exit`, `throw`).
    pub(crate) fn stop(&mut self) {
        self.budget = 0;
    }

    /// The first return whose text (or items) is known, else the flags of all of them.
    fn first_known(self) -> Val {
        let mut returns = self.returns;
        let known = returns
            .iter()
            .position(|v| v.text.is_some() || v.items.is_some());
        match known {
            Some(i) => returns.swap_remove(i),
            None => returns
                .into_iter()
                .fold(Val::unknown(), |acc, v| acc.concat(Val { text: None, ..v })),
        }
    }
}

/// Reads the statements of a body being read through in order, each by `statement`, while
/// there are fewer than 8 returns and the budget ([`MAX_BODY_STATEMENTS`] statements in all,
/// nested blocks included) lasts.
pub(crate) fn read_statements<'t>(
    block: Node<'t>,
    body: &mut Body,
    mut statement: impl FnMut(Node<'t>, &mut Body),
) {
    let mut c = block.walk();
    for st in block.named_children(&mut c) {
        if body.budget == 0 || body.returns.len() >= 8 {
            return;
        }
        body.budget -= 1;
        statement(st, body);
    }
}

/// Reads the parts of the statement `st` whose kinds are among `kinds` (its nested blocks and
/// clauses), in order, by `read`.
pub(crate) fn read_parts<'t>(st: Node<'t>, kinds: &[&str], mut read: impl FnMut(Node<'t>)) {
    let mut k = st.walk();
    for part in st.named_children(&mut k) {
        if kinds.contains(&part.kind()) {
            read(part);
        }
    }
}

/// Parses `text` within [`PARSE_BUDGET`]; `None` when the budget ran out or the grammar
/// could not be loaded.
#[cfg(test)]
fn parse(lang: Lang, text: &str) -> Option<Tree> {
    parse_within(lang, text, PARSE_BUDGET)
}

fn parse_within(lang: Lang, text: &str, budget: Duration) -> Option<Tree> {
    let language: Language = match lang {
        Lang::Shell => tree_sitter_bash::LANGUAGE.into(),
        Lang::Python => tree_sitter_python::LANGUAGE.into(),
        Lang::Js => tree_sitter_javascript::LANGUAGE.into(),
        Lang::PowerShell => tree_sitter_powershell::LANGUAGE.into(),
    };
    // tree-sitter-powershell does not parse `param(…)` followed by a statement on its line:
    // the space after it is read as a line break (same offsets; rows are corrected by
    // `Ctx::line_of`).
    let patched = (lang == Lang::PowerShell)
        .then(|| param_breaks(text))
        .filter(|b| !b.is_empty())
        .map(|b| {
            let mut bytes = text.as_bytes().to_vec();
            for i in b {
                if let Some(c) = bytes.get_mut(i) {
                    *c = b'\n';
                }
            }
            bytes
        });
    let text_bytes = patched.as_deref().unwrap_or(text.as_bytes());
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let parser = slot.get_or_insert_with(Parser::new);
        parser.set_language(&language).ok()?;
        let started = Instant::now();
        let mut progress = |_: &ParseState| {
            if started.elapsed() >= budget {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        let bytes = text_bytes;
        let mut read = |at: usize, _: Point| bytes.get(at..).unwrap_or(&[]);
        let tree = parser.parse_with_options(
            &mut read,
            None,
            Some(ParseOptions::new().progress_callback(&mut progress)),
        );
        parser.reset();
        tree
    })
}

/// The offsets of the blanks after a PowerShell `param(…)` that opens a script block and is
/// followed by a statement on its line (`function f { param($u) iex $u }`), at most 256.
pub(crate) fn param_breaks(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let lower = text.to_ascii_lowercase();
    for (i, _) in lower.match_indices("param").take(4096) {
        if out.len() >= 256 {
            break;
        }
        // Opens a block: `{` (blanks between) before it.
        let before = text.get(..i).unwrap_or("").trim_end_matches([' ', '\t']);
        if !before.ends_with('{') {
            continue;
        }
        let mut j = i + 5;
        while bytes.get(j).is_some_and(|b| *b == b' ' || *b == b'\t') {
            j += 1;
        }
        if bytes.get(j) != Some(&b'(') {
            continue;
        }
        // The matching parenthesis (quotes skipped), within 4 KiB.
        let (mut depth, mut quote) = (0usize, None::<u8>);
        let mut end = None;
        for (k, b) in bytes.iter().enumerate().skip(j).take(4096) {
            match (quote, *b) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, b'\'' | b'"') => quote = Some(*b),
                (None, b'(') => depth += 1,
                (None, b')') => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(k);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(end) = end else { continue };
        let blank = end + 1;
        let next = bytes
            .iter()
            .skip(blank)
            .find(|b| **b != b' ' && **b != b'\t');
        if matches!(bytes.get(blank), Some(b' ' | b'\t'))
            && next.is_some_and(|b| !matches!(b, b'\n' | b'\r' | b'#'))
        {
            out.push(blank);
        }
    }
    out
}

/// What the code pass did with a file (for tests and the cost harness).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Not a language read here.
    NotCode,
    /// Over [`MAX_PARSE_BYTES`]: the text passes only.
    TooLarge,
    /// The parse ran out of time: the text passes only.
    TimedOut,
    /// No sink that a followed value could change the meaning of: not parsed.
    NothingToFollow,
    /// The scan's time for code ([`MAX_SCAN_CODE_TIME`]) is spent: the text passes only.
    OutOfBudget,
    Parsed,
}

/// The code facts of one file, appended to `out` (bounded by the inventory's caps).
#[allow(clippy::too_many_arguments)]
pub(crate) fn analyze(
    path: Option<&str>,
    text: &str,
    runs: bool,
    why: &'static str,
    install: bool,
    excerpt: &dyn Fn(&str) -> String,
    out: &mut Vec<Fact>,
    budget: Duration,
) -> Outcome {
    let Some(lang) = lang_of(path, text) else {
        return Outcome::NotCode;
    };
    let mut cx = Ctx::new(text, path, runs, why, install, excerpt, None);
    let outcome = if text.len() > MAX_PARSE_BYTES {
        Outcome::TooLarge
    } else if !worth_parsing(lang, text) {
        Outcome::NothingToFollow
    } else if budget.is_zero() {
        Outcome::OutOfBudget
    } else {
        match parse_within(lang, text, budget.min(PARSE_BUDGET)) {
            None => Outcome::TimedOut,
            Some(tree) => {
                if lang == Lang::PowerShell {
                    cx.breaks = param_breaks(text);
                }
                walk(&mut cx, lang, tree.root_node());
                Outcome::Parsed
            }
        }
    };
    // PowerShell that was not parsed keeps a text pass for its decode-then-run idioms.
    if lang == Lang::PowerShell && outcome != Outcome::Parsed {
        powershell::scan(&mut cx);
    }
    long_lines(&mut cx, path);
    let room = crate::capabilities::MAX_FACTS.saturating_sub(out.len());
    out.extend(cx.facts.into_iter().take(room));
    outcome
}

/// Sinks that evaluate or run what they are given, or name what they run by a value.
const STRONG: &[&str] = &[
    "exec(",
    "eval(",
    "compile(",
    "os.system",
    "popen",
    "getattr(",
    "__import__",
    "import_module",
    "pty.spawn",
    "runpy",
    "execfile",
    "vm.run",
    "runinnewcontext",
    "runinthiscontext",
    "vm.script",
    "compilefunction",
    "settimeout(\"",
    "settimeout('",
    "setinterval(\"",
    "setinterval('",
    "execsync",
    "execfile",
    "new function",
    "eval ",
    "eval\t",
    "source ",
    "<(",
    "| sh",
    "|sh",
    "| bash",
    "|bash",
    "| zsh",
    "| python",
    "|python",
    "| node",
    "| perl",
    "sh -c",
    "bash -c",
    "-c \"$",
    "-c '$",
    "iex",
    "invoke-expression",
    "scriptblock",
    "start-process",
    "-encodedcommand",
];
/// Sinks that start a process from an argument list: followed only next to a decoding.
const WEAK: &[&str] = &["subprocess", "child_process", "spawn", "os.exec", "system("];
/// Decoding, decompression, decryption, character codes, downloads.
const INDICATORS: &[&str] = &[
    "b64decode",
    "base64",
    "atob(",
    "buffer.from",
    "fromcharcode",
    "fromcodepoint",
    "chr(",
    "decompress",
    "inflate",
    "gunzip",
    "marshal",
    "pickle",
    "decrypt",
    "decipher",
    "fromhex",
    "unhexlify",
    "codecs",
    "rot13",
    "rot_13",
    "^",
    "''.join",
    "\"\".join",
    "join('')",
    "join(\"\")",
    "shell=true",
    "reverse()",
    "[::-1]",
    "urlopen",
    "requests.",
    "fetch(",
    "https.get",
    "http.get",
    "downloadstring",
    "frombase64string",
    "xxd",
    "openssl",
    // Two literals joined: `"cu" + "rl"`.
    "\"+\"",
    "\" + \"",
    "'+'",
    "' + '",
];
/// Shell: quoting tricks and decoders that assemble a command word.
const SHELL: &[&str] = &[
    "\"\"", "''", "$'", "+=", "printf", "rev", "base64", "xxd", "openssl", "gunzip", "zcat",
];

/// Whether a file has a sink whose meaning a followed value could change: parsing costs
/// about a millisecond per small file, so a file without one keeps the text passes only.
fn worth_parsing(lang: Lang, text: &str) -> bool {
    struct Gate {
        strong: aho_corasick::AhoCorasick,
        weak: aho_corasick::AhoCorasick,
        indicators: aho_corasick::AhoCorasick,
        shell: aho_corasick::AhoCorasick,
    }
    static G: std::sync::OnceLock<Option<Gate>> = std::sync::OnceLock::new();
    let build = |words: &[&str]| {
        aho_corasick::AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .build(words)
            .ok()
    };
    let Some(g) = G
        .get_or_init(|| {
            Some(Gate {
                strong: build(STRONG)?,
                weak: build(WEAK)?,
                indicators: build(INDICATORS)?,
                shell: build(SHELL)?,
            })
        })
        .as_ref()
    else {
        return true;
    };
    if lang == Lang::PowerShell || g.strong.is_match(text) || text.contains("Function(") {
        return true;
    }
    if g.weak.is_match(text) && g.indicators.is_match(text) {
        return true;
    }
    // An HTTP request whose body may sit on another line than the call.
    if lang == Lang::Python
        && text.contains("data=")
        && (text.contains("Request(") || text.contains("urlopen("))
    {
        return true;
    }
    // A file written under the home folder at a path built in pieces (a start-up folder
    // spelled `Path.home() / "Library" / ("Launch" + "Agents")`).
    if lang == Lang::Python
        && (text.contains("Path.home()") || text.contains("expanduser("))
        && (text.contains("write_") || text.contains("plistlib.dump") || text.contains("open("))
    {
        return true;
    }
    // A file read under the home folder at a path joined in pieces (`path.join(home, ...parts)`).
    if lang == Lang::Js
        && text.contains("homedir(")
        && text.contains("path.join(")
        && text.contains("fs.")
    {
        return true;
    }
    // `require('child_' + 'process')`, `require(name)`: a module named by a value.
    if text.match_indices("require(").take(512).any(|(i, _)| {
        let arg = text.get(i + 8..).unwrap_or("");
        let arg = arg
            .get(..arg.find(')').unwrap_or(arg.len()).min(80))
            .unwrap_or("");
        !(arg.starts_with('\'') || arg.starts_with('"')) || arg.contains('+')
    }) {
        return true;
    }
    lang == Lang::Shell
        && (g.shell.is_match(text) || text.lines().any(crate::capabilities::variable_command))
}

/// Visits the nodes in document order (bounded), handing each to its language.
fn walk(cx: &mut Ctx<'_>, lang: Lang, root: Node<'_>) -> usize {
    let mut cursor = root.walk();
    let mut visited = 0usize;
    loop {
        let node = cursor.node();
        visited += 1;
        if visited > MAX_NODES {
            return MAX_NODES;
        }
        match lang {
            Lang::Shell => shell::visit(cx, node),
            Lang::Python => python::visit(cx, node),
            Lang::Js => js::visit(cx, node),
            Lang::PowerShell => pwsh::visit(cx, node),
        }
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return visited;
            }
        }
    }
}

/// The work of the code pass on one file that runs ([`Work`]); `None` when it is not
/// parsed.
#[cfg(test)]
pub(crate) fn work_of(path: &str, text: &str) -> Option<Work> {
    let lang = lang_of(Some(path), text)?;
    let none = |_: &str| String::new();
    let mut cx = Ctx::new(text, Some(path), true, "w", false, &none, None);
    // The work is counted, not timed: a parse of a large file in a debug build on a busy
    // host may take longer than the scan's budget.
    let tree = parse_within(lang, text, Duration::from_secs(20))?;
    let nodes = walk(&mut cx, lang, tree.root_node());
    Some(Work {
        nodes,
        calls: cx.calls_read.get(),
        statements: cx.statements_read.get(),
        summaries: cx.summaries_read.get(),
    })
}

/// Code lines of extreme length or entropy: a long run of encoded data in a code file. A
/// minified bundle is long too, so length alone needs a long string of encoded characters.
fn long_lines(cx: &mut Ctx<'_>, path: Option<&str>) {
    let lower = path.unwrap_or("").to_ascii_lowercase();
    if lower.contains(".min.") || lower.ends_with(".map") {
        return;
    }
    let mut row = 0u32;
    for line in cx.src.lines() {
        row = row.saturating_add(1);
        if line.len() < 1024 {
            continue;
        }
        if let Some(blob) = encoded_run(line) {
            let d = format!(
                "{} ({} characters of encoded data, entropy {:.1} bits per character)",
                (cx.excerpt)(line),
                blob.0,
                blob.1
            );
            cx.push(
                Kind::Obfuscates,
                "carries a long encoded blob in code",
                d,
                row,
                false,
            );
            return;
        }
    }
}

/// The longest run of base64/hex characters in `line` (no `data:` URI), when it is at least
/// 800 characters and its entropy is that of encoded data: `(length, bits per character)`.
pub(crate) fn encoded_run(line: &str) -> Option<(usize, f64)> {
    let bytes = line.as_bytes();
    let (mut best, mut best_at, mut start) = (0usize, 0usize, 0usize);
    for (i, b) in bytes.iter().enumerate() {
        let ok = b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\\' | b'_' | b'-');
        if !ok {
            start = i + 1;
        } else if i + 1 - start > best {
            best = i + 1 - start;
            best_at = start;
        }
    }
    if best < 800 {
        return None;
    }
    let before = line.get(best_at.saturating_sub(40)..best_at).unwrap_or("");
    if before.contains("data:") || before.contains("base64,") && before.contains("url(") {
        return None;
    }
    let run = bytes.get(best_at..best_at + best)?;
    let mut counts = [0u32; 256];
    for b in run {
        if let Some(c) = counts.get_mut(usize::from(*b)) {
            *c += 1;
        }
    }
    let n = run.len() as f64;
    let h: f64 = counts
        .iter()
        .filter(|c| **c > 0)
        .map(|c| {
            let p = f64::from(*c) / n;
            -p * p.log2()
        })
        .sum();
    // Hex is at most 4 bits a character, base64 up to 6; English words in identifiers stay
    // lower, and a run of one repeated character is near 0.
    (h >= 3.7).then_some((best, h))
}

/// A string built from character codes or XOR and kept in a variable: obfuscation (it runs
/// only if a sink takes it, which [`Ctx::sink`] reports).
pub(crate) fn note_codes(cx: &mut Ctx<'_>, n: Node<'_>, v: &Val) {
    let long = v.text.as_ref().is_none_or(|t| t.chars().count() >= 4);
    if long
        && matches!(
            v.decoded,
            Some("built from character codes" | "XOR-decoded")
        )
    {
        cx.obfuscated(n, "builds strings from character codes or XOR");
    }
}

/// How a language spells a method call on a list, for [`grow`].
pub(crate) struct Grow {
    /// The node kind of `obj.method` (`attribute`, `member_expression`).
    pub member: &'static str,
    /// The field of the method's name (`attribute`, `property`).
    pub name_field: &'static str,
    /// Methods that add to the list (`append`, `push`).
    pub methods: &'static [&'static str],
    /// Calls that build a character from a code (`chr(`, `fromCharCode`).
    pub codes: &'static [&'static str],
}

/// `out.append(b ^ key)`, `out.push(String.fromCharCode(c))`: a list grown in a loop from XOR
/// or character codes is decoded data.
pub(crate) fn grow(cx: &mut Ctx<'_>, n: Node<'_>, g: &Grow) {
    let Some(f) = n
        .child_by_field_name("function")
        .filter(|f| f.kind() == g.member)
    else {
        return;
    };
    let method = f
        .child_by_field_name(g.name_field)
        .map_or("", |m| cx.text(m));
    if !g.methods.contains(&method) {
        return;
    }
    let Some(obj) = f
        .child_by_field_name("object")
        .filter(|o| o.kind() == "identifier")
    else {
        return;
    };
    let Some(arg) = n.child_by_field_name("arguments") else {
        return;
    };
    let how = if has_xor(cx, arg) {
        "XOR-decoded"
    } else if has_op(cx, arg, g.codes) {
        "built from character codes"
    } else {
        return;
    };
    let name = cx.text(obj).to_string();
    let v = cx.get(&name).decoded(how, None);
    note_codes(cx, n, &v);
    cx.set(&name, v);
}

/// A language's evaluator (`python::eval`, `js::eval` …).
pub(crate) type Eval = fn(&Ctx<'_>, Node<'_>, usize) -> Val;

/// A language's reading of a call as a callee, given the callee of the called function
/// (`require('child_process')` names the module, `getattr(os, 'system')` the function).
pub(crate) type CallCallee = fn(&Ctx<'_>, Node<'_>, usize, (String, bool)) -> (String, bool);

/// The callee name of an optional node one level deeper, empty when there is none.
pub(crate) fn callee_of(
    cx: &Ctx<'_>,
    n: Option<Node<'_>>,
    depth: usize,
    g: &CalleeSyntax,
) -> (String, bool) {
    n.map_or((String::new(), false), |x| callee(cx, x, depth + 1, g))
}

/// How a grammar spells the parts of a callee, for [`callee`].
pub(crate) struct CalleeSyntax {
    /// `obj.name`: the node kind and the field of the name (the object is in `object`).
    pub member: (&'static str, &'static str),
    /// `obj[key]`: the node kind, the field of the object and the field of the key.
    pub subscript: (&'static str, &'static str, &'static str),
    /// A call, and the language's reading of it (`require(...)`, `getattr(...)`).
    pub call: (&'static str, CallCallee),
    /// Wrappers whose first child is the callee (`(f)`, `await f`).
    pub wrappers: &'static [&'static str],
    /// How a name is joined to its object's (`global.x` is `x` in JavaScript).
    pub join: fn(&str, &str) -> String,
    pub eval: Eval,
}

/// The dotted name a callee resolves to (`require('child_process').exec` ->
/// `child_process.exec`, `getattr(os, 'sys' + 'tem')` -> `os.system`), and whether a part of
/// it was assembled.
pub(crate) fn callee(cx: &Ctx<'_>, n: Node<'_>, depth: usize, g: &CalleeSyntax) -> (String, bool) {
    if depth > MAX_DEPTH {
        return (String::new(), false);
    }
    let inner = |x: Option<Node<'_>>| callee_of(cx, x, depth, g);
    let kind = n.kind();
    if kind == "identifier" {
        (cx.callee_name(n), false)
    } else if kind == g.member.0 {
        let (obj, a) = inner(n.child_by_field_name("object"));
        let name = n.child_by_field_name(g.member.1).map_or("", |x| cx.text(x));
        ((g.join)(&obj, name), a)
    } else if kind == g.subscript.0 {
        let obj = inner(n.child_by_field_name(g.subscript.1));
        keyed(obj, field_val(cx, n, g.subscript.2, depth, g.eval), g.join)
    } else if kind == g.call.0 {
        (g.call.1)(cx, n, depth, inner(n.child_by_field_name("function")))
    } else if g.wrappers.contains(&kind) {
        inner(n.named_child(0))
    } else {
        (String::new(), false)
    }
}

/// `obj[key]`: the object's name joined with the key's value when it is known (assembled when
/// the key is), else the object's name.
pub(crate) fn keyed(
    obj: (String, bool),
    key: Val,
    join: fn(&str, &str) -> String,
) -> (String, bool) {
    let assembled = key.assembled();
    match key.text {
        Some(k) => (join(&obj.0, &k), obj.1 || assembled),
        None => obj,
    }
}

/// The value of an optional node one level deeper, unknown when there is none.
pub(crate) fn val_of(cx: &Ctx<'_>, n: Option<Node<'_>>, depth: usize, eval: Eval) -> Val {
    n.map(|x| eval(cx, x, depth + 1)).unwrap_or_default()
}

/// The value of a node's field (`left`, `object` …).
pub(crate) fn field_val(cx: &Ctx<'_>, n: Node<'_>, field: &str, depth: usize, eval: Eval) -> Val {
    val_of(cx, n.child_by_field_name(field), depth, eval)
}

/// A binary operation on text: `+` joins, `^` is XOR-decoding, `%` (when `percent_formats`,
/// Python's formatting) keeps the flags but not the text; anything else is unknown.
pub(crate) fn binary(
    cx: &Ctx<'_>,
    n: Node<'_>,
    depth: usize,
    eval: Eval,
    percent_formats: bool,
) -> Val {
    let op = n.child_by_field_name("operator").map_or("", |o| cx.text(o));
    let l = field_val(cx, n, "left", depth, eval);
    let r = field_val(cx, n, "right", depth, eval);
    match op {
        "+" => l.concat(r),
        "%" if percent_formats => l.concat(r).with_text(None),
        "^" => l.concat(r).decoded("XOR-decoded", None),
        _ => Val::unknown(),
    }
}

/// The two fields of an assignment-like node (`left`, `right`), when both are there.
pub(crate) fn sides<'t>(n: Node<'t>, a: &str, b: &str) -> Option<(Node<'t>, Node<'t>)> {
    Some((n.child_by_field_name(a)?, n.child_by_field_name(b)?))
}

/// A call's arguments (comments left out, at most 16).
pub(crate) fn args_of(call: Node<'_>) -> Vec<Node<'_>> {
    let Some(a) = call.child_by_field_name("arguments") else {
        return Vec::new();
    };
    let mut c = a.walk();
    a.named_children(&mut c)
        .filter(|x| x.kind() != "comment")
        .take(16)
        .collect()
}

/// `t` without its quotes (`open` before, `close` after), or whole when it lacks either.
pub(crate) fn unquoted<'t>(t: &'t str, open: &str, close: char) -> &'t str {
    t.strip_prefix(open)
        .and_then(|t| t.strip_suffix(close))
        .unwrap_or(t)
}

/// The last part of a dotted name.
pub(crate) fn last(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

/// The character of the digits in `radix` at the start of `s` (at most `max`), and how many
/// were read.
pub(crate) fn code_char(s: &str, radix: u32, max: usize) -> (Option<char>, usize) {
    let digits: String = s
        .chars()
        .take_while(|c| c.is_digit(radix))
        .take(max)
        .collect();
    (
        u32::from_str_radix(&digits, radix)
            .ok()
            .and_then(char::from_u32),
        digits.len(),
    )
}

/// The children of `n` concatenated (a string's parts, adjacent literals).
pub(crate) fn concat_children(cx: &Ctx<'_>, n: Node<'_>, depth: usize, eval: Eval) -> Val {
    let mut c = n.walk();
    let mut v = Val::empty_text();
    for p in n.named_children(&mut c) {
        v = v.concat(eval(cx, p, depth + 1));
    }
    v
}

/// The text of a string literal's escape sequence (`\n`, `\t`, `\xNN`, `\uNNNN`, `\u{N…}`,
/// and octal `\NNN` when `octal`).
pub(crate) fn unescape(e: &str, octal: bool) -> String {
    let body = e.strip_prefix('\\').unwrap_or(e);
    let code = |c: Option<char>| c.map_or_else(String::new, String::from);
    match body.chars().next() {
        Some('n') => "\n".into(),
        Some('t') => "\t".into(),
        Some('x') => code(
            u32::from_str_radix(body.get(1..3).unwrap_or(""), 16)
                .ok()
                .and_then(char::from_u32),
        ),
        Some('u') => code(code_char(body.get(1..).unwrap_or("").trim_start_matches('{'), 16, 6).0),
        Some(c) if octal && c.is_ascii_digit() => {
            code(u32::from_str_radix(body, 8).ok().and_then(char::from_u32))
        }
        Some(c) => c.to_string(),
        None => String::new(),
    }
}

/// Base64 decoded leniently (standard or URL-safe, padding optional), as text.
pub(crate) fn unbase64(s: &str) -> Option<String> {
    use base64::Engine;
    let clean: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let cfg = base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent);
    let std = base64::engine::GeneralPurpose::new(&base64::alphabet::STANDARD, cfg);
    let url = base64::engine::GeneralPurpose::new(&base64::alphabet::URL_SAFE, cfg);
    let bytes = std.decode(&clean).or_else(|_| url.decode(&clean)).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Hex decoded, as text.
pub(crate) fn unhex(s: &str) -> Option<String> {
    let clean: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if clean.len() % 2 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(clean.len() / 2);
    for pair in clean.chunks(2) {
        let hi = (*pair.first()? as char).to_digit(16)?;
        let lo = (*pair.get(1)? as char).to_digit(16)?;
        out.push(u8::try_from(hi * 16 + lo).ok()?);
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// ROT13.
pub(crate) fn rot13(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            'a'..='z' => char::from(b'a' + (c as u8 - b'a' + 13) % 26),
            'A'..='Z' => char::from(b'A' + (c as u8 - b'A' + 13) % 26),
            _ => c,
        })
        .collect()
}

/// A character code to a character.
pub(crate) fn from_code(n: i64) -> Option<char> {
    u32::try_from(n).ok().and_then(char::from_u32)
}

/// An integer literal (decimal, hex, octal, binary).
pub(crate) fn int_lit(s: &str) -> Option<i64> {
    let s = s.trim().replace('_', "");
    let lower = s.to_ascii_lowercase();
    if let Some(h) = lower.strip_prefix("0x") {
        i64::from_str_radix(h, 16).ok()
    } else if let Some(o) = lower.strip_prefix("0o") {
        i64::from_str_radix(o, 8).ok()
    } else if let Some(b) = lower.strip_prefix("0b") {
        i64::from_str_radix(b, 2).ok()
    } else {
        lower.parse().ok()
    }
}

/// Whether the text of the subtree holds one of `ops` (a call such as `chr(`).
pub(crate) fn has_op(cx: &Ctx<'_>, n: Node<'_>, ops: &[&str]) -> bool {
    let t = cx.text(n);
    t.len() < 4096 && ops.iter().any(|o| t.contains(o))
}

/// Whether the subtree holds an XOR (`a ^ b`, `x ^= k`): an operator, not a `^` in a string
/// or a regular expression.
pub(crate) fn has_xor(cx: &Ctx<'_>, n: Node<'_>) -> bool {
    if cx.text(n).len() >= 4096 {
        return false;
    }
    let mut stack = vec![n];
    let mut budget = 512;
    while let Some(x) = stack.pop() {
        budget -= 1;
        if budget == 0 {
            return false;
        }
        if matches!(
            x.kind(),
            "binary_operator"
                | "binary_expression"
                | "augmented_assignment"
                | "augmented_assignment_expression"
        ) {
            let op = x.child_by_field_name("operator").map_or("", |o| cx.text(o));
            if op == "^" || op == "^=" {
                return true;
            }
        }
        let mut c = x.walk();
        stack.extend(x.named_children(&mut c));
    }
    false
}

#[cfg(test)]
mod cap_fp_tests;
#[cfg(test)]
mod function_tests;
#[cfg(test)]
mod link_tests;
#[cfg(test)]
mod round10_tests;
#[cfg(test)]
mod round9_tests;
#[cfg(test)]
mod shell_tests;
#[cfg(test)]
pub(crate) mod tests;
