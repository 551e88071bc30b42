//! Shell (bash/sh): variables, quoting, command substitution and pipelines followed into
//! the command word, `eval`, `sh -c`, `source <(...)` and pipes into an interpreter
//! (tree-sitter-bash).

use super::{code_char, unquoted, Ctx, Sink, Val, MAX_DEPTH};
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
            // `x+=piece`.
            let plus = cx
                .text(n)
                .get(key.len()..)
                .is_some_and(|rest| rest.starts_with("+="));
            let v = if plus { cx.get(&key).concat(v) } else { v };
            cx.set(&key, v);
        }
        "command" => command(cx, n),
        "pipeline" => pipeline(cx, n),
        _ => {}
    }
}

/// The resolved command word and arguments of a command.
fn words(cx: &Ctx<'_>, n: Node<'_>) -> (Val, Vec<Val>) {
    let name = n
        .child_by_field_name("name")
        .map(|x| eval(cx, x, 0))
        .unwrap_or_default();
    let mut c = n.walk();
    let args = n
        .children_by_field_name("argument", &mut c)
        .take(32)
        .map(|a| eval(cx, a, 0))
        .collect();
    (name, args)
}

fn base(v: &Val) -> String {
    let t = v.text.as_deref().unwrap_or("");
    t.rsplit('/').next().unwrap_or(t).to_ascii_lowercase()
}

fn command(cx: &mut Ctx<'_>, n: Node<'_>) {
    let (name, args) = words(cx, n);
    let word = base(&name);
    // A command word assembled from pieces or held by a variable.
    if (name.pieces >= 2 || name.via_var || name.decoded.is_some())
        && crate::capabilities::is_split_word(&word)
    {
        cx.assembled_name(n, &word);
    }
    let joined = |args: &[Val]| {
        let mut v = Val {
            text: Some(String::new()),
            pieces: 0,
            ..Val::default()
        };
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                v = v.concat(Val {
                    text: Some(" ".into()),
                    ..Val::default()
                });
            }
            v = v.concat(a.clone());
        }
        v
    };
    match word.as_str() {
        "eval" => {
            let v = joined(&args);
            cx.sink(n, Sink::Shell, "eval", &v);
        }
        "source" | "." => {
            // `source <(curl ...)`: the substitution is fetched.
            if let Some(a) = args.first() {
                cx.sink(n, Sink::Shell, "source", a);
            }
            // `source ./cfg.sh`, read joined with the skill's `cfg.sh`: its variables.
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
        w if INTERPRETERS.contains(&w) => {
            // `sh -c "$cmd"`, `python -c "$code"`.
            let texts: Vec<&str> = args
                .iter()
                .map(|a| a.text.as_deref().unwrap_or(""))
                .collect();
            // `bash <(curl …)`, `sh <(echo … | base64 -d)`: the script is fetched or decoded.
            if let Some(v) = args.iter().find(|a| a.fetched || a.decoded.is_some()) {
                cx.sink(n, Sink::Shell, w, v);
                return;
            }
            if let Some(i) = texts.iter().position(|t| *t == "-c" || *t == "-e") {
                if let Some(v) = args.get(i + 1) {
                    let sink = if matches!(w, "sh" | "bash" | "zsh" | "dash" | "ksh") {
                        Sink::Shell
                    } else {
                        Sink::Eval
                    };
                    cx.sink(n, sink, &format!("{w} -c"), v);
                }
            }
        }
        _ => {
            // The whole command, when its word was assembled: read what it does.
            if name.assembled() || name.via_var {
                let mut all = vec![name.clone()];
                all.extend(args);
                let v = joined(&all);
                if v.text.is_some() && v.assembled() {
                    cx.sink(n, Sink::Process, &word, &v);
                }
            }
        }
    }
}

/// `... | sh`: what feeds the interpreter.
fn pipeline(cx: &mut Ctx<'_>, n: Node<'_>) {
    let mut c = n.walk();
    let cmds: Vec<Node<'_>> = n
        .named_children(&mut c)
        .filter(|x| x.kind() == "command")
        .take(16)
        .collect();
    let Some(last) = cmds.last() else { return };
    let (name, args) = words(cx, *last);
    let word = base(&name);
    if !INTERPRETERS.contains(&word.as_str()) {
        return;
    }
    // `python script.py` reads its script, not the pipe.
    if args.iter().any(|a| {
        a.text
            .as_deref()
            .is_some_and(|t| !t.starts_with('-') && t != "-")
    }) {
        return;
    }
    let mut v = Val::unknown();
    for feeder in cmds.iter().take(cmds.len().saturating_sub(1)) {
        let (fname, fargs) = words(cx, *feeder);
        let w = base(&fname);
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
            _ => {}
        }
        if fname.decoded.is_some() || fargs.iter().any(|a| a.decoded.is_some()) {
            v.decoded = v
                .decoded
                .or(fname.decoded)
                .or(fargs.iter().find_map(|a| a.decoded));
        }
    }
    if v.fetched || v.decoded.is_some() {
        cx.sink(*last, Sink::Shell, &format!("| {word}"), &v);
    }
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
                .find(|x| x.kind() == "variable_name")
                .map(|x| cx.text(x));
            // `${x:offset}` and other operators: unknown but through a variable.
            let plain = n.named_child_count() == 1;
            match var {
                Some(name) if plain => {
                    let mut v = cx.get(name);
                    v.via_var = true;
                    v
                }
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
