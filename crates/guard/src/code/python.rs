//! Python: values followed into `exec`, `eval`, `compile`, `os.system`, `subprocess.*`,
//! `__import__` (tree-sitter-python).

use super::{
    args_of, field_val, from_code, has_op, has_xor, int_lit, last, rot13, sides, unbase64,
    unescape, unhex, val_of, Body, Ctx, Lang, Sink, Val, MAX_DEPTH,
};
use tree_sitter::Node;

const GROW: super::Grow = super::Grow {
    member: "attribute",
    name_field: "attribute",
    methods: &["append", "extend", "write", "insert"],
    codes: &["chr("],
};

/// Handles one node of the walk: imports and assignments bind names, calls may be sinks.
pub(super) fn visit(cx: &mut Ctx<'_>, n: Node<'_>) {
    match n.kind() {
        "import_statement" => {
            let mut c = n.walk();
            for child in n.named_children(&mut c) {
                bind_import(cx, child, "");
            }
        }
        "import_from_statement" => {
            let module = n
                .child_by_field_name("module_name")
                .map(|m| cx.text(m).to_string())
                .unwrap_or_default();
            let mut c = n.walk();
            for child in n.children_by_field_name("name", &mut c) {
                bind_import(cx, child, &module);
            }
        }
        "assignment" => {
            let Some((left, right)) = sides(n, "left", "right") else {
                return;
            };
            if left.kind() == "identifier" {
                let v = eval(cx, right, 0);
                let name = cx.text(left).to_string();
                super::note_codes(cx, n, &v);
                cx.set(&name, v);
            }
        }
        "augmented_assignment" => {
            let Some((left, right)) = sides(n, "left", "right") else {
                return;
            };
            if left.kind() == "identifier"
                && n.child_by_field_name("operator").map(|o| cx.text(o)) == Some("+=")
            {
                let name = cx.text(left).to_string();
                let v = cx.get(&name).concat(eval(cx, right, 0));
                cx.set(&name, v);
            }
        }
        "call" => {
            super::grow(cx, n, &GROW);
            call_sink(cx, n);
            request_with_body(cx, n);
        }
        // `with open("checks.json") as f`.
        "as_pattern" => {
            let (Some(value), Some(alias)) = (n.named_child(0), n.child_by_field_name("alias"))
            else {
                return;
            };
            let name = cx.text(alias).trim().to_string();
            if name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                let v = eval(cx, value, 0);
                if v.data.is_some() {
                    cx.set(&name, v);
                }
            }
        }
        "function_definition" => {
            if let Some(name) = n.child_by_field_name("name") {
                let name = cx.text(name).to_string();
                cx.define(&name, n);
            }
        }
        _ => {}
    }
}

/// The value a call of a function defined in the file returns: its parameters bound to the
/// call's arguments (defaults otherwise), its body's assignments read in order, in a scope of
/// its own; the first `return` whose text is known, else the flags of all of them
/// (downloaded, decoded, assembled).
fn call_through(cx: &Ctx<'_>, call: Node<'_>, def: Node<'_>, depth: usize) -> Val {
    let mut frame: std::collections::HashMap<String, Val> = std::collections::HashMap::new();
    let args = args_of(call);
    let mut positional = args.iter().filter(|a| a.kind() != "keyword_argument");
    if let Some(params) = def.child_by_field_name("parameters") {
        let mut c = params.walk();
        for p in params.named_children(&mut c).take(16) {
            let (name, default) = match p.kind() {
                "identifier" => (Some(p), None),
                "typed_parameter" => (p.named_child(0), None),
                "default_parameter" | "typed_default_parameter" => (
                    p.child_by_field_name("name"),
                    p.child_by_field_name("value"),
                ),
                _ => continue,
            };
            let Some(name) = name.map(|x| cx.text(x)) else {
                continue;
            };
            if name == "self" || name == "cls" {
                continue;
            }
            let given = kwarg(cx, &args, name).or_else(|| positional.next().copied());
            let v = match given.or(default) {
                Some(x) => eval(cx, x, depth + 1),
                None => Val::unknown(),
            };
            frame.insert(name.to_string(), v);
        }
    }
    cx.call_frame(frame, |read| {
        if let Some(body) = def.child_by_field_name("body") {
            read_body(cx, body, depth, read);
        }
    })
}

/// The parts of a statement of Python that are read as nested blocks of a body read through.
const NESTED: &[&str] = &[
    "block",
    "else_clause",
    "elif_clause",
    "except_clause",
    "finally_clause",
];

/// Reads a function body's statements in order into the innermost frame, collecting what
/// `return` statements give.
fn read_body(cx: &Ctx<'_>, block: Node<'_>, depth: usize, body: &mut Body) {
    super::read_statements(block, body, |st, body| {
        match st.kind() {
            "expression_statement" => {
                cx.read_assignment(st, "assignment", "augmented_assignment", |right| {
                    eval(cx, right, depth + 1)
                })
            }
            "return_statement" => {
                body.returns
                    .push(val_of(cx, st.named_child(0), depth, eval));
            }
            "with_statement" => {
                // `with urlopen(u) as resp:` binds `resp`, then the body is read.
                let mut k = st.walk();
                for part in st.named_children(&mut k) {
                    if part.kind() == "with_clause" {
                        let mut w = part.walk();
                        for item in part.named_children(&mut w).take(4) {
                            let Some(pat) = item
                                .child_by_field_name("value")
                                .filter(|v| v.kind() == "as_pattern")
                            else {
                                continue;
                            };
                            let target = pat
                                .child_by_field_name("alias")
                                .and_then(|a| a.named_child(0).or(Some(a)))
                                .filter(|a| a.kind() == "identifier");
                            if let (Some(expr), Some(t)) = (pat.named_child(0), target) {
                                let v = eval(cx, expr, depth + 1);
                                if let Some(f) = cx.frames.borrow_mut().last_mut() {
                                    f.insert(cx.text(t).to_string(), v);
                                }
                            }
                        }
                    } else if part.kind() == "block" {
                        read_body(cx, part, depth, body);
                    }
                }
            }
            "if_statement" | "for_statement" | "while_statement" | "try_statement"
            | "else_clause" | "elif_clause" | "except_clause" | "finally_clause" | "block" => {
                // Nested blocks, in order (a loop body is read once).
                super::read_parts(st, NESTED, |part| read_body(cx, part, depth, body));
            }
            _ => {}
        }
    });
}

/// `urllib.request.Request(url, data=...)`, `urlopen(url, data)`: an HTTP request with a
/// body, which the line patterns miss when its arguments span lines.
fn request_with_body(cx: &mut Ctx<'_>, n: Node<'_>) {
    let Some(f) = n.child_by_field_name("function") else {
        return;
    };
    let name = cx.text(f);
    let base = name.rsplit('.').next().unwrap_or(name);
    if !matches!(base, "Request" | "urlopen") {
        return;
    }
    let Some(args) = n.child_by_field_name("arguments") else {
        return;
    };
    let mut c = args.walk();
    let mut positional = 0;
    let mut body = false;
    for a in args.named_children(&mut c).take(16) {
        if a.kind() == "keyword_argument" {
            let k = a.child_by_field_name("name").map_or("", |k| cx.text(k));
            body |= k == "data";
        } else if a.kind() != "comment" {
            positional += 1;
        }
    }
    if body || positional >= 2 {
        let (line, text) = cx.line_of(n);
        let d = (cx.excerpt)(text);
        cx.push(
            crate::capabilities::Kind::Sends,
            "sends over HTTP",
            d,
            line,
            false,
        );
    }
}

fn bind_import(cx: &mut Ctx<'_>, n: Node<'_>, from: &str) {
    let (name, alias) = match n.kind() {
        "dotted_name" => (cx.text(n).to_string(), None),
        "aliased_import" => (
            n.child_by_field_name("name")
                .map(|x| cx.text(x).to_string())
                .unwrap_or_default(),
            n.child_by_field_name("alias")
                .map(|x| cx.text(x).to_string()),
        ),
        _ => return,
    };
    let full = if from.is_empty() {
        name.clone()
    } else {
        format!("{from}.{name}")
    };
    let bound = alias.unwrap_or_else(|| {
        if from.is_empty() {
            name.split('.').next().unwrap_or("").to_string()
        } else {
            name.clone()
        }
    });
    // `from cfg import CMD`, read joined with the skill's `cfg.py`: the value itself.
    if !from.trim_start_matches('.').is_empty() {
        let module = super::link::stem(from, Lang::Python);
        if let Some(v) = cx.linked(Lang::Python, &module, &name) {
            cx.set(&bound, v);
            return;
        }
    }
    let module = if from.is_empty() && !full.contains('.') {
        full
    } else if from.is_empty() {
        name.split('.').next().unwrap_or("").to_string()
    } else {
        full
    };
    cx.vars.insert(bound, Val::module(module));
}

const CALLEE: super::CalleeSyntax = super::CalleeSyntax {
    member: ("attribute", "attribute"),
    subscript: ("subscript", "value", "subscript"),
    call: ("call", call_callee),
    wrappers: &["parenthesized_expression"],
    join,
    eval,
};

/// A call as a callee: `getattr(os, 'sys' + 'tem')`, `__import__('os')`, `globals()`.
fn call_callee(cx: &Ctx<'_>, n: Node<'_>, depth: usize, (f, a): (String, bool)) -> (String, bool) {
    let args = args_of(n);
    let base = last(&f);
    if base == "getattr" {
        let obj = super::callee_of(cx, args.first().copied(), depth, &CALLEE);
        let key = val_of(cx, args.get(1).copied(), depth, eval);
        if let Some(k) = key.text.as_deref() {
            return (join(&obj.0, k), a || obj.1 || key.assembled());
        }
    }
    if base == "__import__" || f == "importlib.import_module" {
        let key = val_of(cx, args.first().copied(), depth, eval);
        if let Some(k) = key.text.as_deref() {
            return (k.to_string(), a || key.assembled());
        }
    }
    if matches!(base, "globals" | "locals" | "vars") {
        return ("builtins".to_string(), a);
    }
    (format!("{f}()"), a)
}

fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a}.{b}")
    }
}

/// Strips the ways to reach a builtin (`builtins.exec`, `__builtins__.__dict__['exec']`).
fn normal(name: &str) -> &str {
    let mut n = name;
    for p in ["builtins.", "__builtins__.", "__dict__.", "__builtin__."] {
        while let Some(rest) = n.strip_prefix(p) {
            n = rest;
        }
    }
    n
}

pub(super) fn kwarg<'t>(cx: &Ctx<'_>, args: &[Node<'t>], name: &str) -> Option<Node<'t>> {
    args.iter()
        .filter(|a| a.kind() == "keyword_argument")
        .find(|a| a.child_by_field_name("name").map(|x| cx.text(x)) == Some(name))
        .and_then(|a| a.child_by_field_name("value"))
}

/// Sinks.
fn call_sink(cx: &mut Ctx<'_>, n: Node<'_>) {
    let Some(f) = n.child_by_field_name("function") else {
        return;
    };
    let (name, assembled) = super::callee(cx, f, 0, &CALLEE);
    let name = normal(&name).to_string();
    let args = args_of(n);
    let first = args
        .iter()
        .copied()
        .find(|a| a.kind() != "keyword_argument");
    // A file written at a path assembled in pieces: the path, read by the lexical pass
    // (`~/Library/LaunchAgents/…`, `~/.config/autostart/…`).
    if let Some(p) = written_path(cx, &name, f, &args) {
        cx.path_access(n, &name, "writes > ", &p);
        return;
    }
    let sink = match name.as_str() {
        "exec" | "eval" | "compile" | "execfile" | "runpy.run_path" | "code.interact" => Sink::Eval,
        "os.system"
        | "os.popen"
        | "subprocess.getoutput"
        | "subprocess.getstatusoutput"
        | "commands.getoutput"
        | "pty.spawn" => Sink::Shell,
        "__import__" | "importlib.import_module" => Sink::Import,
        s if s.starts_with("subprocess.")
            || s.starts_with("os.exec")
            || s.starts_with("os.spawn") =>
        {
            let shell = kwarg(cx, &args, "shell").map(|v| cx.text(v)) == Some("True");
            if shell {
                Sink::Shell
            } else {
                Sink::Process
            }
        }
        // A callable held by a value (`run = getattr(module, spec["call"])`) called with
        // `shell=True`: a shell command, whatever its name.
        _ if kwarg(cx, &args, "shell").map(|v| cx.text(v)) == Some("True") => Sink::Shell,
        _ => {
            if assembled && crate::capabilities::is_split_word(last(&name)) {
                cx.assembled_name(n, last(&name));
            }
            return;
        }
    };
    if assembled {
        cx.assembled_name(n, last(&name));
    }
    let Some(arg) = first else { return };
    let v = eval(cx, arg, 0);
    let v = match (&v.text, &v.items) {
        (None, Some(items)) => {
            let joined = items.join(" ");
            v.clone().with_text(Some(joined))
        }
        _ => v,
    };
    cx.sink(n, sink, &name, &v);
}

/// The value of an expression, as far as it can be known.
pub(super) fn eval(cx: &Ctx<'_>, n: Node<'_>, depth: usize) -> Val {
    if depth > MAX_DEPTH {
        return Val::unknown();
    }
    match n.kind() {
        "string" => string(cx, n, depth),
        "concatenated_string" => super::concat_children(cx, n, depth, eval),
        "identifier" => cx.get(cx.text(n)),
        "integer" => Val::lit(cx.text(n)),
        "parenthesized_expression" | "await" | "expression_statement" => {
            val_of(cx, n.named_child(0), depth, eval)
        }
        "binary_operator" => {
            let op = n.child_by_field_name("operator").map_or("", |o| cx.text(o));
            if op == "/" {
                return path_join(cx, n, depth);
            }
            super::binary(cx, n, depth, eval, true)
        }
        "list" | "tuple" => {
            let mut c = n.walk();
            let values: Vec<Node<'_>> = n.named_children(&mut c).take(256).collect();
            super::list_of(values.into_iter().map(|e| eval(cx, e, depth + 1)))
        }
        "subscript" => {
            // `s[::-1]`: reversed.
            let value = field_val(cx, n, "value", depth, eval);
            let sub = n
                .child_by_field_name("subscript")
                .map_or("", |s| cx.text(s));
            if sub.replace(' ', "") == "::-1" {
                let t = value.text.as_ref().map(|t| t.chars().rev().collect());
                return value.decoded("reversed", t);
            }
            // `cfg["runner"]` of a data file of the skill.
            if value.data.is_some() {
                let k = field_val(cx, n, "subscript", depth, eval);
                return k.text.and_then(|k| value.key(&k)).unwrap_or_default();
            }
            Val::unknown()
        }
        "list_comprehension" | "generator_expression" => {
            if has_xor(cx, n) {
                Val::unknown().decoded("XOR-decoded", None)
            } else if has_op(cx, n, &["chr("]) {
                Val::unknown().decoded("built from character codes", None)
            } else {
                Val::unknown()
            }
        }
        "attribute" => {
            // `.text`, `.content` of a response.
            let attr = n
                .child_by_field_name("attribute")
                .map_or("", |a| cx.text(a));
            // `cfg.CMD` of a module of the skill, read joined.
            if let Some(m) = n
                .child_by_field_name("object")
                .filter(|o| o.kind() == "identifier")
                .and_then(|o| cx.vars.get(cx.text(o)))
                .and_then(|v| v.module.as_deref())
            {
                let module = super::link::stem(m, Lang::Python);
                if let Some(v) = cx.linked(Lang::Python, &module, attr) {
                    return v;
                }
            }
            let obj = field_val(cx, n, "object", depth, eval);
            if matches!(attr, "text" | "content" | "body" | "data") {
                Val { text: None, ..obj }
            } else {
                Val::unknown()
            }
        }
        "call" => call_value(cx, n, depth),
        // `a or b`: the first that is known (`shutil.which("curl") or "curl"`).
        "boolean_operator" => {
            let l = field_val(cx, n, "left", depth, eval);
            if l.text.is_some() || l.items.is_some() {
                l
            } else {
                field_val(cx, n, "right", depth, eval)
            }
        }
        _ => Val::unknown(),
    }
}

fn string(cx: &Ctx<'_>, n: Node<'_>, depth: usize) -> Val {
    let mut c = n.walk();
    let mut out = String::new();
    let mut v = Val {
        pieces: 1,
        ..Val::default()
    };
    let mut known = true;
    for part in n.children(&mut c) {
        match part.kind() {
            "string_content" => out.push_str(cx.text(part)),
            "escape_sequence" => out.push_str(&unescape(cx.text(part), true)),
            "interpolation" => {
                let inner = field_val(cx, part, "expression", depth, eval);
                match &inner.text {
                    Some(t) => out.push_str(t),
                    None => known = false,
                }
                v.pieces = v.pieces.saturating_add(inner.pieces.max(1));
                v.decoded = v.decoded.or(inner.decoded);
                v.fetched |= inner.fetched;
                v.via_var |= inner.via_var;
            }
            _ => {}
        }
    }
    v.text = known.then(|| super::cut(&out));
    v
}

/// `a / b` of paths (`Path.home() / ".config" / name`): the parts joined by `/` when one
/// of them is a path (a text that is not a number); otherwise unknown (a division).
fn path_join(cx: &Ctx<'_>, n: Node<'_>, depth: usize) -> Val {
    let l = field_val(cx, n, "left", depth, eval);
    let r = field_val(cx, n, "right", depth, eval);
    let number = |v: &Val| v.text.as_deref().is_some_and(|t| t.parse::<f64>().is_ok());
    let pathish = |v: &Val| v.text.is_some() && !number(v);
    if !(pathish(&l) || pathish(&r)) || number(&l) || number(&r) {
        return Val::unknown();
    }
    let sep = Val {
        text: Some("/".into()),
        ..Val::default()
    };
    l.concat(sep).concat(r)
}

/// The path a call writes to: `open(p, "w")` (any mode that writes), `p.write_text(…)`,
/// `p.write_bytes(…)`, `shutil.copy*(src, p)`, `shutil.move(src, p)`.
fn written_path(cx: &Ctx<'_>, name: &str, f: Node<'_>, args: &[Node<'_>]) -> Option<Val> {
    let base = last(name);
    if matches!(name, "open" | "io.open" | "codecs.open") {
        let mode = kwarg(cx, args, "mode").or_else(|| {
            args.iter()
                .filter(|a| a.kind() != "keyword_argument")
                .nth(1)
                .copied()
        })?;
        let mode = eval(cx, mode, 1).text?;
        if !mode.contains(['w', 'a', 'x']) {
            return None;
        }
        return Some(eval(cx, *args.first()?, 1));
    }
    if f.kind() == "attribute" && matches!(base, "write_text" | "write_bytes") {
        return Some(field_val(cx, f, "object", 1, eval));
    }
    if name.starts_with("shutil.") && (base.starts_with("copy") || base == "move") {
        return Some(eval(cx, *args.get(1)?, 1));
    }
    None
}

/// The method name of a call `obj.name(…)` when `name` is a function defined in the file
/// (a method of one of its classes) and `obj` is not a module.
fn method_of_file<'s>(cx: &Ctx<'s>, f: Node<'_>) -> Option<&'s str> {
    if f.kind() != "attribute" {
        return None;
    }
    let obj = f.child_by_field_name("object")?;
    let module = obj.kind() == "identifier"
        && cx
            .vars
            .get(cx.text(obj))
            .is_some_and(|v| v.module.is_some());
    let name = cx.text(f.child_by_field_name("attribute")?);
    (!module && cx.funcs.contains_key(name)).then_some(name)
}

/// The value a call returns: decoders, `chr`, `join`, downloads, pass-through methods.
fn call_value(cx: &Ctx<'_>, n: Node<'_>, depth: usize) -> Val {
    let Some(f) = n.child_by_field_name("function") else {
        return Val::unknown();
    };
    let args = args_of(n);
    let arg = |i: usize| val_of(cx, args.get(i).copied(), depth, eval);
    // Methods on a value: `x.decode()`, `"".join(...)`, `r.read()`.
    let on_module = f.child_by_field_name("object").is_some_and(|o| {
        o.kind() == "identifier" && cx.vars.get(cx.text(o)).is_some_and(|v| v.module.is_some())
    });
    if f.kind() == "attribute" && !on_module {
        let method = f
            .child_by_field_name("attribute")
            .map_or("", |a| cx.text(a));
        let obj_node = f.child_by_field_name("object");
        let path_module = obj_node
            .is_some_and(|o| matches!(cx.text(o), "os.path" | "posixpath" | "ntpath" | "path"));
        match method {
            "join" if !path_module => {
                let sep = val_of(cx, obj_node, depth, eval).text;
                let a = arg(0);
                let sep = sep.filter(|_| a.text.is_none());
                return a.joined(sep.as_deref());
            }
            "decode" | "encode" | "strip" | "read" | "readall" | "json" | "getvalue" | "lower"
            | "upper" => {
                let obj = val_of(cx, obj_node, depth, eval);
                let codec = arg(0).text.unwrap_or_default().to_ascii_lowercase();
                if method == "decode" && codec.replace('_', "") == "rot13" {
                    let t = obj.text.as_deref().map(rot13);
                    return obj.decoded("rot13-decoded", t);
                }
                return obj;
            }
            "decrypt" | "decrypt_and_verify" => {
                return arg(0).decoded("decrypted", None);
            }
            _ => {}
        }
    }
    let (name, _) = super::callee(cx, f, depth + 1, &CALLEE);
    let name = normal(&name);
    let base = last(name);
    match base {
        "b64decode" | "standard_b64decode" | "urlsafe_b64decode" | "decodebytes"
        | "decodestring" | "a2b_base64" => arg(0).decoded_by("base64-decoded", unbase64),
        "b32decode" | "b16decode" | "b85decode" | "a85decode" => {
            arg(0).decoded("base-N-decoded", None)
        }
        "fromhex" | "unhexlify" | "a2b_hex" => arg(0).decoded_by("hex-decoded", unhex),
        "decompress" | "inflate" => arg(0).decoded("decompressed", None),
        "loads" if name.starts_with("marshal") || name.starts_with("pickle") => {
            arg(0).decoded("unmarshalled", None)
        }
        "decode" if name.starts_with("codecs") => {
            let a = arg(0);
            let codec = arg(1)
                .text
                .unwrap_or_default()
                .to_ascii_lowercase()
                .replace(['_', '-'], "");
            match codec.as_str() {
                "rot13" => {
                    let t = a.text.as_deref().map(rot13);
                    a.decoded("rot13-decoded", t)
                }
                "hex" => a.decoded_by("hex-decoded", unhex),
                "base64" => a.decoded_by("base64-decoded", unbase64),
                "zlib" | "bz2" => a.decoded("decompressed", None),
                _ => a,
            }
        }
        "chr" => {
            let a = args.first().copied();
            let code = a.and_then(|x| int_lit(cx.text(x)));
            match (code.and_then(from_code), a) {
                (Some(ch), _) => Val::lit(&ch.to_string())
                    .decoded("built from character codes", Some(ch.to_string())),
                (None, Some(x)) if has_xor(cx, x) => Val::unknown().decoded("XOR-decoded", None),
                _ => Val::unknown().decoded("built from character codes", None),
            }
        }
        "bytes" | "bytearray" => {
            let a = arg(0);
            if args.first().is_some_and(|x| has_xor(cx, *x)) {
                a.decoded("XOR-decoded", None)
            } else {
                a
            }
        }
        "str" | "repr" | "compile" | "Path" | "PurePath" | "PosixPath" | "expanduser"
        | "abspath" | "realpath" | "normpath" => arg(0),
        // The home folder, as the lexical pass spells it.
        "home" if name.ends_with("Path.home") => Val::lit("~"),
        "join" if name.starts_with("os.path") || name.starts_with("posixpath") => {
            let mut out: Option<Val> = None;
            for a in args.iter().take(16) {
                let v = eval(cx, *a, depth + 1);
                out = Some(match out {
                    None => v,
                    Some(o) => o
                        .concat(Val {
                            text: Some("/".into()),
                            ..Val::default()
                        })
                        .concat(v),
                });
            }
            out.unwrap_or_default()
        }
        "urlopen" | "urlretrieve" => Val::downloaded(),
        // A data file of the skill: `json.load(open("checks.json"))`,
        // `json.loads((Path(__file__).parent / "checks.json").read_text())`.
        "load" | "loads" if name.starts_with("json") => {
            let a = arg(0);
            if a.data.is_some() {
                return a;
            }
            super::data_file(cx, cx.text(n)).unwrap_or_default()
        }
        // `open("checks.json")`: the file's values, for the `json.load(f)` that reads it.
        "open" => super::data_file(cx, cx.text(n)).unwrap_or_default(),
        // A function of the file: read through its body.
        _ if f.kind() == "identifier" && cx.funcs.contains_key(cx.text(f)) => {
            match cx.definition(n, cx.text(f)) {
                Some(def) => call_through(cx, n, def, depth),
                None => Val::unknown(),
            }
        }
        // A method of a class of the file (`self._get(u)`, `client.fetch(u)`): read through
        // the function of that name (its `self` is left unbound).
        _ if method_of_file(cx, f).is_some() => {
            let name = method_of_file(cx, f).unwrap_or_default();
            match cx.definition(n, name) {
                Some(def) => call_through(cx, n, def, depth),
                None => Val::unknown(),
            }
        }
        "get" | "post" | "request" | "stream"
            if name.starts_with("requests")
                || name.starts_with("httpx")
                || name.starts_with("urllib3") =>
        {
            Val::downloaded()
        }
        _ => Val::unknown(),
    }
}
