//! Shell (bash/sh): variables, quoting, command substitution and pipelines followed into
//! the command word, `eval`, `sh -c`, `source <(...)` and pipes into an interpreter
//! (tree-sitter-bash).

use super::{code_char, unquoted, Body, Ctx, Sink, Val, MAX_DEPTH};
use std::collections::HashMap;
use tree_sitter::Node;

const INTERPRETERS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "python", "python3", "perl", "ruby", "node", "php", "pwsh",
];

pub(super) fn visit(cx: &mut Ctx<'_>, n: Node<'_>) {
    match n.kind() {
        "variable_assignment" => {
            let Some(name) = n.child_by_field_name("name") else {
                return;
            };
            let v = n
                .child_by_field_name("value")
                .map(|x| eval(cx, x, 0))
                .unwrap_or_else(|| Val::lit(""));
            let key = cx.text(name).to_string();
            let v = if plus_assign(cx, n, &key) {
                cx.get(&key).concat(v)
            } else {
                v
            };
            cx.set(&key, v);
        }
        "function_definition" => {
            if let Some(name) = n.child_by_field_name("name") {
                let name = cx.text(name).to_string();
                cx.define(&name, n);
            }
        }
        "command" => {
            sourced_vars(cx, n);
            assign_defaults(cx, n);
            set_aliases(cx, n);
            // A call in a substitution or a pipeline is read by it, for what it prints.
            let read_by_parent = n.parent().is_some_and(|p| {
                matches!(
                    p.kind(),
                    "command_substitution" | "process_substitution" | "pipeline"
                )
            });
            if !read_by_parent || !is_call(cx, n) {
                command(cx, n);
            }
        }
        "pipeline" => {
            pipeline(cx, n);
        }
        _ => {}
    }
    cx.flush();
}

/// `x+=piece`.
fn plus_assign(cx: &Ctx<'_>, n: Node<'_>, key: &str) -> bool {
    cx.text(n)
        .get(key.len()..)
        .is_some_and(|rest| rest.starts_with("+="))
}

/// `source ./cfg.sh`, read joined with the skill's `cfg.sh`: its variables.
fn sourced_vars(cx: &mut Ctx<'_>, n: Node<'_>) {
    let word = n
        .child_by_field_name("name")
        .map_or("", |x| cx.text(x))
        .to_string();
    if word != "source" && word != "." {
        return;
    }
    let text = cx.text(n);
    let rest = text.split_once(char::is_whitespace).map_or("", |(_, r)| r);
    if !rest.is_empty() {
        let stem = super::link::sourced(rest);
        let names = cx.links.map(|l| l.all(super::Lang::Shell, &stem));
        for (k, v) in names.unwrap_or_default() {
            cx.set(&k, v);
        }
    }
}

/// Whether a command calls a function of the file (or of a file it sources), by its word as
/// written or through a variable (`cmd=fetch; $cmd …`).
fn is_call(cx: &Ctx<'_>, n: Node<'_>) -> bool {
    n.child_by_field_name("name").is_some_and(|x| {
        cx.has_function(cx.text(x)) || file_function(cx, &eval(cx, x, 0)).is_some()
    })
}

/// The function a command word calls, by its value (shell function names are
/// case-sensitive: not the lower-cased [`base`]): as written, through a variable
/// (`cmd=fetch; $cmd "$u"`, `"$handler" "$@"`) or assembled, a function of the file or of a
/// file it sources ([`Ctx::has_function`]).
fn file_function<'v>(cx: &Ctx<'_>, name: &'v Val) -> Option<&'v str> {
    name.text.as_deref().filter(|t| cx.has_function(t))
}

/// A call of a function of the file, read through its body (within the bounds of
/// [`Ctx::definition`]): `$1`…`$9`, `$@`, `$*` and `$#` bound to the call's arguments, `local`
/// and other assignments in a scope of its own, the sinks of the body reported (deferred,
/// [`Ctx::defer_sink`]) with those values; gives what the body prints (`echo`, `printf`, a
/// download to standard output, what the functions it calls print), in order.
fn call_through(cx: &Ctx<'_>, n: Node<'_>, word: &str, args: &[Val]) -> Option<Val> {
    cx.call_fn(n, word, args, &|def, args| {
        let Some(block) = def.child_by_field_name("body") else {
            return Val::unknown();
        };
        let mut frame = HashMap::new();
        for (i, a) in args.iter().take(9).enumerate() {
            frame.insert((i + 1).to_string(), a.clone());
        }
        let all = joined(args);
        frame.insert("@".to_string(), all.clone());
        frame.insert("*".to_string(), all);
        frame.insert("#".to_string(), Val::lit(&args.len().to_string()));
        let body = cx.read_frame(frame, |body| read_body(cx, block, body));
        printed(body.returns)
    })
}

/// What a function printed ([`emit`]); unknown when it printed nothing known.
fn printed(outputs: Vec<Val>) -> Val {
    let mut out = outputs.into_iter().next().unwrap_or_default();
    out.via_var = true;
    out
}

/// Adds what a statement prints to what the body printed so far, in order (one value: a
/// body's outputs never fill [`Body::returns`]); unknown text when any output's is.
fn emit(body: &mut Body, v: Val) {
    match body.returns.pop() {
        Some(before) => body.returns.push(before.concat(v)),
        None => body.returns.push(v),
    }
}

/// Commands that print nothing on standard output.
const SILENT: &[&str] = &[
    "cd", "mkdir", "export", "set", "shift", "return", "exit", "test", "[", "[[", "true", "false",
    "rm", "cp", "mv", "chmod", "chown", "touch", ":", "trap", "unset", "local", "declare",
    "readonly", "sleep", "wait", "source", ".", "read", "ln", "umask",
];

/// What a command statement of a body prints: [`command`]'s value, else nothing for a
/// [`SILENT`] command and an unknown text for any other.
fn command_output(cx: &Ctx<'_>, st: Node<'_>) -> Option<Val> {
    let out = command(cx, st);
    if out.is_some() {
        return out;
    }
    let word = st
        .child_by_field_name("name")
        .map_or("", |x| cx.text(x))
        .to_string();
    (!SILENT.contains(&base(&Val::lit(&word)).as_str())).then(Val::unknown)
}

/// Statements that hold statements: read as blocks.
const BLOCKS: &[&str] = &[
    "compound_statement",
    "subshell",
    "if_statement",
    "elif_clause",
    "else_clause",
    "for_statement",
    "c_style_for_statement",
    "while_statement",
    "do_group",
    "case_statement",
    "case_item",
    "list",
    "negated_command",
];

/// Reads a function body's statements in order: assignments into the innermost scope,
/// commands and pipelines for their sinks, and what they print into `body.returns`.
fn read_body(cx: &Ctx<'_>, block: Node<'_>, body: &mut Body) {
    super::read_statements(block, body, |st, body| match st.kind() {
        "variable_assignment" => assign(cx, st),
        "declaration_command" => {
            let mut c = st.walk();
            for a in st.named_children(&mut c).take(16) {
                match a.kind() {
                    "variable_assignment" => assign(cx, a),
                    "variable_name" => {
                        cx.assign_local(cx.text(a).to_string(), Val::unknown(), false)
                    }
                    _ => {}
                }
            }
        }
        "command" => {
            if let Some(v) = command_output(cx, st) {
                emit(body, v);
            }
        }
        "pipeline" => emit(body, pipeline(cx, st).unwrap_or_default()),
        "redirected_statement" => {
            // Printed into a file (`> f`, `>> f`, `&> f`), it is not printed.
            let to_file = {
                let mut c = st.walk();
                let r = st.children_by_field_name("redirect", &mut c).any(|r| {
                    let t = cx.text(r).trim_start();
                    t.starts_with('>') || t.starts_with("1>") || t.starts_with("&>")
                });
                r
            };
            if let Some(inner) = st.child_by_field_name("body") {
                let before = body.returns.clone();
                read_body_one(cx, inner, body);
                if to_file {
                    body.returns = before;
                }
            }
        }
        k if BLOCKS.contains(&k) => read_body(cx, st, body),
        _ => {}
    });
}

/// Reads one statement as a body of its own (a redirected statement's inner one).
fn read_body_one(cx: &Ctx<'_>, st: Node<'_>, body: &mut Body) {
    match st.kind() {
        "command" => {
            if let Some(v) = command_output(cx, st) {
                emit(body, v);
            }
        }
        "pipeline" => emit(body, pipeline(cx, st).unwrap_or_default()),
        _ => read_body(cx, st, body),
    }
}

/// `name=value` (or `+=`) in the innermost scope of a call read through.
fn assign(cx: &Ctx<'_>, n: Node<'_>) {
    let Some(name) = n.child_by_field_name("name") else {
        return;
    };
    let key = cx.text(name).to_string();
    let v = n
        .child_by_field_name("value")
        .map(|x| eval(cx, x, 0))
        .unwrap_or_else(|| Val::lit(""));
    let plus = plus_assign(cx, n, &key);
    cx.assign_local(key, v, plus);
}

/// The arguments joined with spaces (`$@`, a command's whole text; PowerShell's
/// `Write-Output a b`).
pub(super) fn joined<'v>(args: impl IntoIterator<Item = &'v Val>) -> Val {
    let mut v = Val::empty_text();
    for (i, a) in args.into_iter().enumerate() {
        if i > 0 {
            v = v.concat(Val {
                text: Some(" ".into()),
                ..Val::default()
            });
        }
        v = v.concat(a.clone());
    }
    v
}

/// The resolved command word and arguments of a command. Inside a function read through,
/// a command word of `"$@"` (or `$*`) runs the call's arguments: the first is the command
/// word and the others come before the command's own (`run() { "$@"; }`, dispatch tables).
fn words(cx: &Ctx<'_>, n: Node<'_>) -> (Val, Vec<Val>) {
    let name_node = n.child_by_field_name("name");
    let mut c = n.walk();
    let args: Vec<Val> = n
        .children_by_field_name("argument", &mut c)
        .take(32)
        .map(|a| eval(cx, a, 0))
        .collect();
    let spread = name_node.is_some_and(|x| {
        matches!(
            cx.text(x),
            "\"$@\"" | "$@" | "\"${@}\"" | "${@}" | "$*" | "\"$*\""
        )
    });
    if spread && !cx.frames.borrow().is_empty() {
        let count = cx
            .get("#")
            .text
            .and_then(|t| t.parse::<usize>().ok())
            .unwrap_or(0)
            .min(9);
        if count > 0 {
            let mut given: Vec<Val> = (1..=count).map(|i| cx.get(&i.to_string())).collect();
            let name = given.remove(0);
            given.extend(args);
            return (name, given);
        }
    }
    let name = name_node.map(|x| eval(cx, x, 0)).unwrap_or_default();
    // An alias of the file (`alias get='curl -fsSL'`): its words come first.
    if !name.via_var && !name.assembled() {
        if let Some(word) = name.text.as_deref() {
            let key = format!("alias:{word}");
            if cx.is_set(&key) {
                let alias = cx.get(&key);
                let text = alias.text.clone().unwrap_or_default();
                let mut parts = text.split_whitespace();
                let head = parts.next().unwrap_or("");
                let mut head_val = alias.clone().with_text(Some(head.to_string()));
                head_val.via_var = true;
                let mut all: Vec<Val> = parts.take(16).map(Val::lit).collect();
                all.extend(args);
                return (head_val, all);
            }
        }
    }
    (name, args)
}

/// `alias get='curl -fsSL'`: the alias's text kept as a variable of the file.
fn set_aliases(cx: &mut Ctx<'_>, n: Node<'_>) {
    if n.child_by_field_name("name").map(|x| cx.text(x)) != Some("alias") {
        return;
    }
    let mut c = n.walk();
    let args: Vec<Node<'_>> = n
        .children_by_field_name("argument", &mut c)
        .take(16)
        .collect();
    for a in args {
        let v = eval(cx, a, 0);
        let Some((name, body)) = v.text.as_deref().and_then(|t| t.split_once('=')) else {
            continue;
        };
        if name.is_empty() || name.starts_with('-') {
            continue;
        }
        let key = format!("alias:{name}");
        let mut value = v.clone().with_text(Some(body.to_string()));
        // `alias g='cu''rl'`: the pieces of the body, not of the name.
        value.pieces = value.pieces.max(1);
        cx.set(&key, value);
    }
}

fn base(v: &Val) -> String {
    let t = v.text.as_deref().unwrap_or("");
    t.rsplit('/').next().unwrap_or(t).to_ascii_lowercase()
}

/// Reports the sinks of a command (deferred, [`Ctx::defer_sink`]) and gives what it prints
/// when that is known or matters: `echo`/`printf` text, a download to standard output, a
/// decoder's output, what a function of the file prints (read through, [`call_through`]).
fn command(cx: &Ctx<'_>, n: Node<'_>) -> Option<Val> {
    let (name, args) = words(cx, n);
    let word = base(&name);
    let function = file_function(cx, &name);
    // A command word assembled from pieces or decoded (one literal held by a variable,
    // `PY=${PYTHON:-python3}`, spells the word whole where it is set).
    if (name.pieces >= 2 || name.decoded.is_some()) && crate::capabilities::is_split_word(&word) {
        cx.defer_name(n, &word);
    }
    let texts: Vec<&str> = args
        .iter()
        .map(|a| a.text.as_deref().unwrap_or(""))
        .collect();
    match word.as_str() {
        "eval" => {
            cx.defer_sink(n, Sink::Shell, "eval", &joined(&args));
            None
        }
        "source" | "." => {
            // `source <(curl ...)`: the substitution is fetched.
            if let Some(a) = args.first() {
                cx.defer_sink(n, Sink::Shell, "source", a);
            }
            None
        }
        w if INTERPRETERS.contains(&w) => {
            // `bash <(curl …)`, `sh <(echo … | base64 -d)`: the script is fetched or decoded.
            if let Some(v) = args.iter().find(|a| a.fetched || a.decoded.is_some()) {
                cx.defer_sink(n, Sink::Shell, w, v);
                return None;
            }
            // `sh -c "$cmd"`, `python -c "$code"`.
            if let Some(i) = texts.iter().position(|t| *t == "-c" || *t == "-e") {
                if let Some(v) = args.get(i + 1) {
                    let sink = if matches!(w, "sh" | "bash" | "zsh" | "dash" | "ksh") {
                        Sink::Shell
                    } else {
                        Sink::Eval
                    };
                    cx.defer_sink(n, sink, &format!("{w} -c"), v);
                }
            }
            None
        }
        "echo" => {
            let mut rest = args.as_slice();
            let mut newline = true;
            while let Some((first, more)) = rest.split_first() {
                match first.text.as_deref() {
                    Some("-n") => newline = false,
                    Some("-e" | "-E" | "-ne" | "-en") => {}
                    _ => break,
                }
                rest = more;
            }
            let mut v = joined(rest);
            if newline {
                v = v.concat(Val {
                    text: Some("\n".into()),
                    ..Val::default()
                });
            }
            Some(v)
        }
        "printf" => Some(printf(&args)),
        "curl" | "wget" => to_stdout(&word, &texts).then(Val::downloaded),
        _ if function.is_some() => call_through(cx, n, function?, &args),
        _ => {
            // The whole command, when its word was assembled: read what it does.
            if name.assembled() || name.via_var {
                let mut all = vec![name.clone()];
                all.extend(args);
                let v = joined(&all);
                if v.text.is_some() && v.assembled() {
                    cx.defer_sink(n, Sink::Process, &word, &v);
                }
            }
            None
        }
    }
}

/// Whether `curl`/`wget` with these arguments prints what it downloads (no `-o FILE`, `-O`,
/// `--output`; `wget` only with `-O -`).
fn to_stdout(word: &str, args: &[&str]) -> bool {
    let short = |t: &str, c: char| t.starts_with('-') && !t.starts_with("--") && t.contains(c);
    if word == "curl" {
        !args.iter().any(|t| {
            short(t, 'o') || short(t, 'O') || t.starts_with("--output") || *t == "--remote-name"
        })
    } else {
        args.windows(2)
            .any(|w| w.first().is_some_and(|t| short(t, 'O')) && w.get(1) == Some(&"-"))
            || args
                .iter()
                .any(|t| (short(t, 'O') && t.ends_with("O-")) || *t == "--output-document=-")
    }
}

/// What `printf FORMAT ARGS…` prints: `%s` and `%b` take the arguments in order, `\n`,
/// `\t` and `\xHH` escapes are read; other conversions make the text unknown.
fn printf(args: &[Val]) -> Val {
    let Some((fmt, rest)) = args.split_first() else {
        return Val::unknown();
    };
    let Some(f) = fmt.text.as_deref() else {
        return Val {
            text: None,
            ..joined(args)
        };
    };
    let mut out = Val::empty_text();
    let mut rest = rest.iter();
    let mut lit = String::new();
    // The format, one conversion at a time: the text before its `%`, then what it takes.
    let mut left = f;
    while let Some(at) = left.find('%') {
        lit.push_str(left.get(..at).unwrap_or(""));
        let conversion = left.get(at + 1..).and_then(|t| t.chars().next());
        left = left
            .get(at + 1 + conversion.map_or(0, char::len_utf8)..)
            .unwrap_or("");
        if conversion == Some('%') {
            lit.push('%');
        } else if matches!(conversion, Some('s' | 'b')) {
            out = out.concat(Val::lit(&ansi_c(&lit)));
            lit.clear();
            out = out.concat(rest.next().cloned().unwrap_or_else(|| Val::lit("")));
        } else {
            return Val {
                text: None,
                ..joined(args)
            };
        }
    }
    lit.push_str(left);
    out = out.concat(Val::lit(&ansi_c(&lit)));
    if f.contains("\\x") || f.contains("\\0") {
        let t = out.text.clone();
        out = out.decoded("built from character codes", t);
    }
    out
}

/// `... | sh`: what feeds the interpreter. Reports the sink (deferred) and gives what the
/// pipeline prints: its last command's output, or the feeders' download or decoding when
/// the last command only filters.
fn pipeline(cx: &Ctx<'_>, n: Node<'_>) -> Option<Val> {
    let mut c = n.walk();
    let cmds: Vec<Node<'_>> = n
        .named_children(&mut c)
        .filter(|x| x.kind() == "command")
        .take(16)
        .collect();
    let last = cmds.last()?;
    let (name, args) = words(cx, *last);
    let word = base(&name);
    let mut v = Val::unknown();
    // Inside a call read through, the walk does not visit the feeders: their sinks here.
    let in_call = !cx.frames.borrow().is_empty();
    for feeder in cmds.iter().take(cmds.len().saturating_sub(1)) {
        let (fname, fargs) = words(cx, *feeder);
        let w = base(&fname);
        let function = file_function(cx, &fname);
        if in_call && function.is_none() {
            command(cx, *feeder);
        }
        let texts: Vec<String> = fargs.iter().filter_map(|a| a.text.clone()).collect();
        let has = |flags: &[&str]| texts.iter().any(|t| flags.contains(&t.as_str()));
        match w.as_str() {
            "curl" | "wget" | "nc" | "ncat" if fname.assembled() || fname.via_var => {
                v.fetched = true;
            }
            "base64" if has(&["-d", "--decode", "-D"]) => v.decoded = Some("base64-decoded"),
            "xxd" if has(&["-r", "-r -p", "-p"]) => v.decoded = Some("hex-decoded"),
            "openssl" if has(&["-d", "enc", "base64"]) => v.decoded = Some("decrypted"),
            "gunzip" | "zcat" | "xz" | "bunzip2" | "gzip" => v.decoded = Some("decompressed"),
            "rev" => v.decoded = Some("reversed"),
            "tr" if texts
                .iter()
                .any(|t| t.contains("N-ZA-M") || t.contains("n-za-m")) =>
            {
                v.decoded = Some("rot13-decoded")
            }
            "printf" if texts.iter().any(|t| t.contains("\\x") || t.contains("\\0")) => {
                v.decoded = Some("built from character codes")
            }
            // A function of the file that prints a download or decoded data.
            _ if function.is_some() => {
                if let Some(out) = call_through(cx, *feeder, function.unwrap_or_default(), &fargs) {
                    v.fetched |= out.fetched;
                    v.decoded = v.decoded.or(out.decoded);
                }
            }
            _ => {}
        }
        if fname.decoded.is_some() || fargs.iter().any(|a| a.decoded.is_some()) {
            v.decoded = v
                .decoded
                .or(fname.decoded)
                .or(fargs.iter().find_map(|a| a.decoded));
        }
    }
    if !INTERPRETERS.contains(&word.as_str()) {
        // What the pipeline prints, for a function read through.
        let out = if file_function(cx, &name).is_some()
            || matches!(word.as_str(), "echo" | "printf" | "curl" | "wget")
        {
            command(cx, *last)
        } else {
            None
        };
        return out.or_else(|| (v.fetched || v.decoded.is_some()).then_some(v));
    }
    // `python script.py` reads its script, not the pipe.
    if args.iter().any(|a| {
        a.text
            .as_deref()
            .is_some_and(|t| !t.starts_with('-') && t != "-")
    }) {
        return None;
    }
    if v.fetched || v.decoded.is_some() {
        cx.defer_sink(*last, Sink::Shell, &format!("| {word}"), &v);
    }
    None
}

pub(super) fn eval(cx: &Ctx<'_>, n: Node<'_>, depth: usize) -> Val {
    if depth > MAX_DEPTH {
        return Val::unknown();
    }
    match n.kind() {
        "command_name" => super::val_of(cx, n.named_child(0), depth, eval),
        "word" | "number" => Val::lit(&unquote_word(cx.text(n))),
        "raw_string" => Val::lit(unquoted(cx.text(n), "'", '\'')),
        "ansi_c_string" => {
            let body = unquoted(cx.text(n), "$'", '\'');
            if body.contains("\\x") || body.contains("\\0") || body.contains("\\u") {
                let s = ansi_c(body);
                Val::lit(&s).decoded("built from character codes", Some(s))
            } else {
                Val::lit(body)
            }
        }
        "string" => {
            let mut v = super::concat_children(cx, n, depth, eval);
            v.pieces = v.pieces.max(1);
            v
        }
        "string_content" => Val::lit(cx.text(n)),
        "concatenation" => super::concat_children(cx, n, depth, eval),
        "simple_expansion" | "expansion" => {
            let mut c = n.walk();
            let var = n
                .named_children(&mut c)
                .find(|x| matches!(x.kind(), "variable_name" | "special_variable_name"))
                .map(|x| cx.text(x));
            // `${x:offset}` and other operators: unknown but through a variable.
            let plain = n.named_child_count() == 1;
            match var {
                Some(name) if plain => {
                    let mut v = cx.get(name);
                    v.via_var = true;
                    v
                }
                Some(name) => default_expansion(cx, n, name, depth).unwrap_or(Val {
                    via_var: true,
                    ..Val::unknown()
                }),
                _ => Val {
                    via_var: true,
                    ..Val::unknown()
                },
            }
        }
        "command_substitution" | "process_substitution" => substitution(cx, n),
        _ => Val::unknown(),
    }
}

/// `${x:-default}`, `${x-default}`, `${x:=default}`, `${x=default}`: the variable's value
/// when the file sets it to a known, non-empty text; else the default's (with the flags of
/// both: `${URL:-$(curl …)}` is fetched). `${x:+alt}` is the alternative when the variable
/// is set, else empty. `None` for other operators.
fn default_expansion(cx: &Ctx<'_>, n: Node<'_>, name: &str, depth: usize) -> Option<Val> {
    let op = expansion_op(cx, n)?;
    let mut c = n.walk();
    let rest: Vec<Node<'_>> = n.named_children(&mut c).skip(1).take(16).collect();
    let mut default = Val::empty_text();
    for p in &rest {
        default = default.concat(eval(cx, *p, depth + 1));
    }
    let current = cx.get(name);
    let known = current.text.as_deref().is_some_and(|t| !t.is_empty());
    let mut v = if op.ends_with('+') {
        if known || cx.is_set(name) {
            default
        } else {
            Val::lit("")
        }
    } else if known {
        current
    } else {
        let flags = Val {
            text: Some(String::new()),
            items: None,
            pieces: 0,
            module: None,
            ..current
        };
        flags.concat(default)
    };
    v.via_var = true;
    Some(v)
}

/// The operator of `${x:-d}`, `${x-d}`, `${x:=d}`, `${x=d}`, `${x:+a}`, `${x+a}`.
fn expansion_op(cx: &Ctx<'_>, n: Node<'_>) -> Option<String> {
    let var = n.named_child(0)?;
    let op: String = cx
        .src_after(var, n)
        .trim_start()
        .chars()
        .take_while(|c| matches!(c, ':' | '-' | '=' | '+'))
        .collect();
    matches!(op.as_str(), ":-" | "-" | ":=" | "=" | ":+" | "+").then_some(op)
}

/// `: "${DIR:=/opt/x}"`, `cd "${DIR:=/opt/x}"`: a `:=`/`=` expansion in a command assigns
/// the default to a variable the file has not set to a known text.
fn assign_defaults(cx: &mut Ctx<'_>, n: Node<'_>) {
    let mut stack = vec![n];
    let mut budget = 64;
    let mut found = Vec::new();
    while let Some(x) = stack.pop() {
        budget -= 1;
        if budget == 0 {
            break;
        }
        if x.kind() == "expansion" {
            if let (Some(op), Some(var)) = (expansion_op(cx, x), x.named_child(0)) {
                if op.ends_with('=') {
                    found.push((cx.text(var).to_string(), x));
                }
            }
            continue;
        }
        if matches!(x.kind(), "command_substitution" | "process_substitution") {
            continue;
        }
        let mut c = x.walk();
        stack.extend(x.named_children(&mut c));
    }
    for (name, x) in found {
        let v = eval(cx, x, 0);
        cx.set(&name, v);
    }
}

/// `$(...)`, `<(...)`: fetched when it downloads, decoded when it decodes, the text of a
/// constant `echo`/`printf`.
fn substitution(cx: &Ctx<'_>, n: Node<'_>) -> Val {
    let mut v = Val {
        pieces: 2,
        ..Val::unknown()
    };
    let mut c = n.walk();
    let mut stack: Vec<Node<'_>> = n.named_children(&mut c).collect();
    let mut budget = 64;
    while let Some(x) = stack.pop() {
        budget -= 1;
        if budget == 0 {
            break;
        }
        if x.kind() == "command" {
            let (name, args) = words(cx, x);
            let w = base(&name);
            let function = file_function(cx, &name);
            let texts: Vec<String> = args.iter().filter_map(|a| a.text.clone()).collect();
            let has = |flags: &[&str]| texts.iter().any(|t| flags.contains(&t.as_str()));
            match w.as_str() {
                "curl" | "wget" => v.fetched = true,
                "base64" if has(&["-d", "--decode", "-D"]) => v.decoded = Some("base64-decoded"),
                "xxd" if has(&["-r"]) => v.decoded = Some("hex-decoded"),
                "openssl" if has(&["-d"]) => v.decoded = Some("decrypted"),
                "gunzip" | "zcat" => v.decoded = Some("decompressed"),
                "rev" => v.decoded = Some("reversed"),
                "printf" | "echo" if n.named_child_count() == 1 => {
                    let body = texts.join(" ");
                    if w == "printf" && (body.contains("\\x") || body.contains("\\0")) {
                        let s = ansi_c(&body);
                        v.text = Some(s);
                        v.decoded = Some("built from character codes");
                    } else if args.iter().all(|a| a.text.is_some()) {
                        v.text = Some(body);
                    }
                }
                // A function of the file: what it prints.
                _ if function.is_some() => {
                    if let Some(out) = call_through(cx, x, function.unwrap_or_default(), &args) {
                        v.fetched |= out.fetched;
                        v.decoded = v.decoded.or(out.decoded);
                        if n.named_child_count() == 1 {
                            if let Some(t) = out.text {
                                v.text = Some(t.trim_end_matches('\n').to_string());
                                v.via_var = true;
                            }
                        }
                    }
                }
                _ => {}
            }
        } else {
            let mut c2 = x.walk();
            stack.extend(x.named_children(&mut c2));
        }
    }
    if v.decoded.is_some() && v.text.is_none() {
        v.pieces = 2;
    }
    v
}

fn unquote_word(w: &str) -> String {
    let mut out = String::with_capacity(w.len());
    let mut chars = w.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The escapes of `$'...'` and `printf`.
fn ansi_c(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some(i) = rest.find('\\') {
        out.push_str(rest.get(..i).unwrap_or(""));
        let after = rest.get(i + 1..).unwrap_or("");
        // `\xHH`, `\0OOO`, `\uHHHH`: digits after the letter; `\OOO`: digits alone.
        let tail = after.get(1..).unwrap_or("");
        let after_letter = |(ch, used): (Option<char>, usize)| (ch, 1 + used);
        let (ch, used) = match after.chars().next() {
            Some('x') => after_letter(code_char(tail, 16, 2)),
            Some('0') => after_letter(code_char(tail, 8, 3)),
            Some(d) if d.is_digit(8) => code_char(after, 8, 3),
            Some('u') => after_letter(code_char(tail, 16, 4)),
            Some('n') => (Some('\n'), 1),
            Some(c) => (Some(c), c.len_utf8()),
            None => (None, 0),
        };
        if let Some(ch) = ch {
            out.push(ch);
        }
        rest = after.get(used..).unwrap_or("");
        if out.len() > super::MAX_VALUE {
            break;
        }
    }
    out.push_str(rest);
    out
}
