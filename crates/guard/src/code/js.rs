//! JavaScript (and TypeScript, read with the JavaScript grammar): values followed into
//! `eval`, `Function`, `child_process.*`, `vm.runIn*`, `require` (tree-sitter-javascript).

use super::{
    args_of, field_val, from_code, has_xor, int_lit, last, sides, unbase64, unescape, unhex,
    val_of, Body, Ctx, Lang, Sink, Val, MAX_DEPTH,
};
use tree_sitter::Node;

const GROW: super::Grow = super::Grow {
    member: "member_expression",
    name_field: "property",
    methods: &["push", "unshift", "concat"],
    codes: &["fromCharCode"],
};

pub(super) fn visit(cx: &mut Ctx<'_>, n: Node<'_>) {
    match n.kind() {
        "variable_declarator" => {
            if let Some((name, value)) = sides(n, "name", "value") {
                // `const f = (a) => …`, `const f = function (a) { … }`: a function of the file.
                if name.kind() == "identifier"
                    && matches!(
                        value.kind(),
                        "arrow_function" | "function_expression" | "function"
                    )
                {
                    let key = cx.text(name).to_string();
                    cx.define(&key, value);
                    return;
                }
                bind(cx, name, value);
            }
        }
        "function_declaration" => {
            if let Some(name) = n.child_by_field_name("name") {
                let key = cx.text(name).to_string();
                cx.define(&key, n);
            }
        }
        "assignment_expression" => {
            if let Some((left, right)) = sides(n, "left", "right") {
                bind(cx, left, right);
            }
        }
        "augmented_assignment_expression" => {
            let Some((left, right)) = sides(n, "left", "right") else {
                return;
            };
            if left.kind() == "identifier" {
                let name = cx.text(left).to_string();
                let v = cx.get(&name).concat(eval(cx, right, 0));
                cx.set(&name, v);
            }
        }
        "call_expression" | "new_expression" => {
            super::grow(cx, n, &GROW);
            call_sink(cx, n);
        }
        "import_statement" => import(cx, n),
        // `for (const parts of wanted)`: the loop variable stands for the list's items.
        "for_in_statement" => {
            let (Some(left), Some(right)) = (
                n.child_by_field_name("left"),
                n.child_by_field_name("right"),
            ) else {
                return;
            };
            let of = cx.src_after(left, right).trim_start().starts_with("of");
            if of && left.kind() == "identifier" {
                let v = eval(cx, right, 0);
                if v.items.as_ref().is_some_and(|i| !i.is_empty()) {
                    let key = cx.text(left).to_string();
                    cx.set(&key, Val { text: None, ..v });
                }
            }
        }
        _ => {}
    }
}

/// `import { execSync } from 'child_process'` binds a module's name like `require` does;
/// `import { cmd } from './cfg'`, `import cfg from './cfg'`, `import * as cfg from './cfg'`:
/// a local module's values when the file is read joined with it.
fn import(cx: &mut Ctx<'_>, n: Node<'_>) {
    let Some(source) = n.child_by_field_name("source") else {
        return;
    };
    let spec = cx.text(source).trim_matches(|c| c == '\'' || c == '"');
    let spec = spec.strip_prefix("node:").unwrap_or(spec).to_string();
    let local_module = spec.starts_with('.');
    let stem = super::link::stem(&spec, Lang::Js);
    let mut stack = vec![n];
    let mut budget = 256;
    while let Some(x) = stack.pop() {
        budget -= 1;
        if budget == 0 {
            return;
        }
        match x.kind() {
            "import_specifier" => {
                let name = x.child_by_field_name("name").map_or("", |k| cx.text(k));
                let local = x
                    .child_by_field_name("alias")
                    .map_or(name, |k| cx.text(k))
                    .to_string();
                match cx.linked(Lang::Js, &stem, name).filter(|_| local_module) {
                    Some(v) => cx.set(&local, v),
                    // `import { execSync } from 'child_process'`.
                    None => {
                        cx.vars.insert(local, Val::module(format!("{spec}.{name}")));
                    }
                }
            }
            "namespace_import" | "import_clause" => {
                let mut c = x.walk();
                for ch in x.named_children(&mut c) {
                    if ch.kind() == "identifier" {
                        let local = cx.text(ch).to_string();
                        cx.vars.insert(local, Val::module(spec.clone()));
                    } else {
                        stack.push(ch);
                    }
                }
            }
            _ => {
                let mut c = x.walk();
                stack.extend(x.named_children(&mut c));
            }
        }
    }
}

fn bind(cx: &mut Ctx<'_>, name: Node<'_>, value: Node<'_>) {
    match name.kind() {
        "identifier" => {
            let v = eval(cx, value, 0);
            let module = super::callee(cx, value, 0, &CALLEE).0;
            let v = if v.text.is_none()
                && v.items.is_none()
                && !module.is_empty()
                && !v.interesting()
            {
                Val {
                    module: Some(module),
                    ..v
                }
            } else {
                v
            };
            let key = cx.text(name).to_string();
            super::note_codes(cx, value, &v);
            cx.set(&key, v);
        }
        // `const { exec } = require('child_process')`.
        "object_pattern" => {
            let (module, _) = super::callee(cx, value, 0, &CALLEE);
            if module.is_empty() {
                return;
            }
            let mut c = name.walk();
            for p in name.named_children(&mut c) {
                let (key, local) = match p.kind() {
                    "shorthand_property_identifier_pattern" => (cx.text(p), cx.text(p)),
                    "pair_pattern" => (
                        p.child_by_field_name("key").map_or("", |k| cx.text(k)),
                        p.child_by_field_name("value").map_or("", |k| cx.text(k)),
                    ),
                    _ => continue,
                };
                // `const { cmd } = require('./cfg')`, read joined with the skill's `cfg.js`.
                if module.starts_with('.') {
                    let stem = super::link::stem(&module, Lang::Js);
                    if let Some(v) = cx.linked(Lang::Js, &stem, key) {
                        cx.set(local, v);
                        continue;
                    }
                }
                let full = format!("{module}.{key}");
                cx.vars.insert(
                    local.to_string(),
                    Val {
                        module: Some(full),
                        ..Val::default()
                    },
                );
            }
        }
        // What a module exports: `exports.cmd = …`, `module.exports.cmd = …`,
        // `module.exports = { cmd: … }` (read by the files that require it).
        "member_expression" => {
            let target = cx.text(name);
            if target == "module.exports" && value.kind() == "object" {
                let mut c = value.walk();
                for p in value.named_children(&mut c).take(256) {
                    if p.kind() == "pair" {
                        let (Some(k), Some(v)) =
                            (p.child_by_field_name("key"), p.child_by_field_name("value"))
                        else {
                            continue;
                        };
                        let k = cx
                            .text(k)
                            .trim_matches(|c| c == '\'' || c == '"')
                            .to_string();
                        let v = eval(cx, v, 0);
                        cx.set(&k, v);
                    }
                }
            } else if let Some(k) = target
                .strip_prefix("module.exports.")
                .or_else(|| target.strip_prefix("exports."))
                .filter(|k| !k.contains('.'))
            {
                let v = eval(cx, value, 0);
                cx.set(k, v);
            }
        }
        _ => {}
    }
}

const CALLEE: super::CalleeSyntax = super::CalleeSyntax {
    member: ("member_expression", "property"),
    subscript: ("subscript_expression", "object", "index"),
    call: ("call_expression", call_callee),
    wrappers: &["parenthesized_expression", "await_expression"],
    join,
    eval,
};

/// A call as a callee: `require('child_process')` names the module.
fn call_callee(cx: &Ctx<'_>, n: Node<'_>, depth: usize, (f, a): (String, bool)) -> (String, bool) {
    if f == "require" || f.ends_with(".require") || f == "import" {
        let arg = val_of(cx, args_of(n).first().copied(), depth, eval);
        if let Some(m) = arg.text {
            let m = m.strip_prefix("node:").unwrap_or(&m).to_string();
            return (m, a || arg.pieces >= 2 || arg.decoded.is_some());
        }
    }
    (String::new(), a)
}

fn join(a: &str, b: &str) -> String {
    let a = match a {
        "global" | "globalThis" | "window" | "self" | "this" => "",
        _ => a,
    };
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a}.{b}")
    }
}

/// `fs` calls that read a file or list a folder at their first argument.
const READS: &[&str] = &[
    "readFileSync",
    "readFile",
    "readdirSync",
    "readdir",
    "createReadStream",
    "statSync",
    "stat",
];

fn call_sink(cx: &mut Ctx<'_>, n: Node<'_>) {
    let f = n
        .child_by_field_name("function")
        .or_else(|| n.child_by_field_name("constructor"));
    let Some(f) = f else { return };
    let (name, assembled) = super::callee(cx, f, 0, &CALLEE);
    let name = name
        .strip_prefix("process.mainModule.")
        .unwrap_or(&name)
        .to_string();
    let base = last(&name);
    let sink = match name.as_str() {
        "eval" | "Function" | "setTimeout" | "setInterval" | "execScript" => Sink::Eval,
        "vm.runInNewContext"
        | "vm.runInThisContext"
        | "vm.runInContext"
        | "vm.Script"
        | "vm.compileFunction" => Sink::Eval,
        "child_process.exec" | "child_process.execSync" => Sink::Shell,
        "child_process.spawn"
        | "child_process.spawnSync"
        | "child_process.execFile"
        | "child_process.execFileSync"
        | "child_process.fork" => Sink::Process,
        "require" => Sink::Import,
        // A file read at a path assembled in pieces: the path, read by the lexical pass
        // (`path.join(os.homedir(), ...parts)` over `['.ss' + 'h']`).
        _ if name.starts_with("fs.") && READS.contains(&base) => {
            let p = args_of(n)
                .first()
                .map(|a| eval(cx, *a, 0))
                .unwrap_or_default();
            cx.path_access(n, &name, "cat ", &p);
            return;
        }
        _ => {
            if assembled && crate::capabilities::is_split_word(&base.to_ascii_lowercase()) {
                cx.assembled_name(n, base);
            }
            return;
        }
    };
    if assembled {
        cx.assembled_name(n, base);
    }
    let args = args_of(n);
    // `Function('a', 'b', body)`: the body is the last argument; a timer's string is code,
    // its function is not.
    let arg = if base == "Function" {
        args.last()
    } else {
        args.first()
    };
    let Some(arg) = arg else { return };
    if matches!(base, "setTimeout" | "setInterval")
        && !matches!(
            arg.kind(),
            "string" | "template_string" | "binary_expression" | "identifier" | "call_expression"
        )
    {
        return;
    }
    let mut v = eval(cx, *arg, 0);
    if sink == Sink::Process {
        // The argument list joins the command.
        if let (Some(cmd), Some(list)) = (
            v.text.clone(),
            args.get(1).map(|a| eval(cx, *a, 0)).and_then(|l| l.items),
        ) {
            v.text = Some(format!("{cmd} {}", list.join(" ")));
        }
    }
    if sink == Sink::Import && !v.assembled() {
        return;
    }
    cx.sink(n, sink, &name, &v);
}

pub(super) fn eval(cx: &Ctx<'_>, n: Node<'_>, depth: usize) -> Val {
    if depth > MAX_DEPTH {
        return Val::unknown();
    }
    match n.kind() {
        "string" => {
            let mut c = n.walk();
            let mut s = String::new();
            for p in n.named_children(&mut c) {
                match p.kind() {
                    "string_fragment" => s.push_str(cx.text(p)),
                    "escape_sequence" => s.push_str(&unescape(cx.text(p), false)),
                    _ => {}
                }
            }
            Val::lit(&s)
        }
        "template_string" => {
            let mut c = n.walk();
            let mut v = Val::empty_text();
            for p in n.named_children(&mut c) {
                let part = match p.kind() {
                    "string_fragment" => Val::lit(cx.text(p)),
                    "escape_sequence" => Val::lit(&unescape(cx.text(p), false)),
                    "template_substitution" => val_of(cx, p.named_child(0), depth, eval),
                    _ => continue,
                };
                v = v.concat(part);
            }
            v.pieces = v.pieces.max(1);
            v
        }
        "number" => Val::lit(cx.text(n)),
        "identifier" => cx.get(cx.text(n)),
        "parenthesized_expression" | "await_expression" => {
            val_of(cx, n.named_child(0), depth, eval)
        }
        "binary_expression" => super::binary(cx, n, depth, eval, false),
        "array" => {
            let mut c = n.walk();
            let values: Vec<Node<'_>> = n.named_children(&mut c).take(256).collect();
            // A list of list literals keeps their leaves (`[['.ss' + 'h'], ['.kube', 'config']]`),
            // as `flat()` would: a loop over it binds its variable to them.
            let mut leaves = Vec::new();
            for e in values {
                let v = eval(cx, e, depth + 1);
                match v.items.as_ref().filter(|_| e.kind() == "array") {
                    Some(items) if v.text.is_none() => {
                        let flags = Val {
                            items: None,
                            ..v.clone()
                        };
                        for t in items.iter().take(super::MAX_ITEMS) {
                            leaves.push(Val {
                                text: Some(t.clone()),
                                ..flags.clone()
                            });
                        }
                    }
                    _ => leaves.push(v),
                }
            }
            super::list_of(leaves.into_iter())
        }
        "member_expression" => {
            let prop = n.child_by_field_name("property").map_or("", |p| cx.text(p));
            // `cfg.cmd` of a module of the skill, read joined.
            if let Some(m) = n
                .child_by_field_name("object")
                .filter(|o| o.kind() == "identifier")
                .and_then(|o| cx.vars.get(cx.text(o)))
                .and_then(|v| v.module.as_deref())
                .filter(|m| m.starts_with('.'))
            {
                let stem = super::link::stem(m, Lang::Js);
                if let Some(v) = cx.linked(Lang::Js, &stem, prop) {
                    return v;
                }
            }
            let obj = field_val(cx, n, "object", depth, eval);
            // `cfg.engine` of a data file of the skill.
            if let Some(v) = obj.key(prop) {
                return v;
            }
            match prop {
                "data" | "body" | "responseText" => Val { text: None, ..obj },
                _ => Val::unknown(),
            }
        }
        "call_expression" => call_value(cx, n, depth),
        // `cfg['engine']` of a data file of the skill.
        "subscript_expression" => {
            let obj = field_val(cx, n, "object", depth, eval);
            if obj.data.is_none() {
                return Val::unknown();
            }
            let k = field_val(cx, n, "index", depth, eval);
            k.text.and_then(|k| obj.key(&k)).unwrap_or_default()
        }
        _ => Val::unknown(),
    }
}

/// The value a call of a function defined in the file returns (as in Python: parameters
/// bound, the body's declarations and assignments read in order in a scope of its own, the
/// first `return` whose text is known, else the flags of all; an arrow function's expression
/// body is its return).
fn call_through(cx: &Ctx<'_>, call: Node<'_>, def: Node<'_>, depth: usize) -> Val {
    let mut frame: std::collections::HashMap<String, Val> = std::collections::HashMap::new();
    let args = args_of(call);
    let mut given = args.iter();
    let single = def
        .child_by_field_name("parameter")
        .filter(|p| p.kind() == "identifier");
    let mut names: Vec<(Node<'_>, Option<Node<'_>>)> = Vec::new();
    if let Some(p) = single {
        names.push((p, None));
    } else if let Some(params) = def.child_by_field_name("parameters") {
        let mut c = params.walk();
        for p in params.named_children(&mut c).take(16) {
            match p.kind() {
                "identifier" => names.push((p, None)),
                "assignment_pattern" => {
                    if let Some((l, r)) = sides(p, "left", "right") {
                        if l.kind() == "identifier" {
                            names.push((l, Some(r)));
                        }
                    }
                }
                _ => names.push((p, None)),
            }
        }
    }
    for (name, default) in names {
        let arg = given.next().copied();
        if name.kind() != "identifier" {
            continue;
        }
        let v = match arg.or(default) {
            Some(x) => eval(cx, x, depth + 1),
            None => Val::unknown(),
        };
        frame.insert(cx.text(name).to_string(), v);
    }
    cx.call_frame(frame, |read| {
        if let Some(body) = def.child_by_field_name("body") {
            if body.kind() == "statement_block" {
                read_body(cx, body, depth, read);
            } else {
                read.returns.push(eval(cx, body, depth + 1));
            }
        }
    })
}

/// The parts of a statement of JavaScript that are read as nested blocks of a body read through.
const NESTED: &[&str] = &[
    "statement_block",
    "else_clause",
    "catch_clause",
    "finally_clause",
];

/// Reads a function body's statements in order into the innermost frame, collecting what
/// `return` statements give.
fn read_body(cx: &Ctx<'_>, block: Node<'_>, depth: usize, body: &mut Body) {
    super::read_statements(block, body, |st, body| match st.kind() {
        "lexical_declaration" | "variable_declaration" => {
            let mut k = st.walk();
            for d in st.named_children(&mut k).take(8) {
                let Some((name, value)) = sides(d, "name", "value") else {
                    continue;
                };
                if name.kind() != "identifier" {
                    continue;
                }
                let v = eval(cx, value, depth + 1);
                cx.assign_local(cx.text(name).to_string(), v, false);
            }
        }
        "expression_statement" => cx.read_assignment(
            st,
            "assignment_expression",
            "augmented_assignment_expression",
            |right| eval(cx, right, depth + 1),
        ),
        "return_statement" => body
            .returns
            .push(val_of(cx, st.named_child(0), depth, eval)),
        "statement_block" => read_body(cx, st, depth, body),
        "if_statement" | "for_statement" | "for_in_statement" | "while_statement"
        | "try_statement" | "else_clause" | "catch_clause" | "finally_clause" => {
            super::read_parts(st, NESTED, |part| read_body(cx, part, depth, body));
        }
        _ => {}
    });
}

fn call_value(cx: &Ctx<'_>, n: Node<'_>, depth: usize) -> Val {
    let Some(f) = n.child_by_field_name("function") else {
        return Val::unknown();
    };
    // A function of the file: read through its body.
    if f.kind() == "identifier" && cx.funcs.contains_key(cx.text(f)) {
        if let Some(def) = cx.definition(n, cx.text(f)) {
            return call_through(cx, n, def, depth);
        }
    }
    let args = args_of(n);
    let arg = |i: usize| val_of(cx, args.get(i).copied(), depth, eval);
    if f.kind() == "member_expression" {
        let method = f.child_by_field_name("property").map_or("", |p| cx.text(p));
        let obj_node = f.child_by_field_name("object");
        let obj = || val_of(cx, obj_node, depth, eval);
        // `path.join(home, ...parts)`: the pieces joined by `/`, a spread list's items too.
        let path_module = obj_node
            .filter(|o| o.kind() == "identifier")
            .is_some_and(|o| {
                let t = cx.text(o);
                cx.vars
                    .get(t)
                    .and_then(|v| v.module.as_deref())
                    .map_or(t == "path", |m| m == "path" || m == "node:path")
            });
        if path_module && matches!(method, "join" | "resolve") {
            let mut out: Option<Val> = None;
            for a in args.iter().take(16) {
                let v = if a.kind() == "spread_element" {
                    val_of(cx, a.named_child(0), depth + 1, eval).joined(Some("/"))
                } else {
                    eval(cx, *a, depth + 1)
                };
                out = Some(match out {
                    None => v,
                    Some(o) => o.concat(Val::lit("/")).concat(v),
                });
            }
            return out.unwrap_or_default();
        }
        match method {
            "join" => {
                let sep = arg(0).text.unwrap_or_else(|| {
                    if args.is_empty() {
                        ",".into()
                    } else {
                        String::new()
                    }
                });
                return obj().joined(Some(&sep));
            }
            "split" => {
                let o = obj();
                let sep = arg(0).text;
                let items = match (&o.text, sep.as_deref()) {
                    (Some(t), Some("")) => {
                        Some(t.chars().take(super::MAX_ITEMS).map(String::from).collect())
                    }
                    (Some(t), Some(s)) => Some(
                        t.split(s)
                            .take(super::MAX_ITEMS)
                            .map(String::from)
                            .collect(),
                    ),
                    _ => None,
                };
                return Val {
                    items,
                    text: None,
                    ..o
                };
            }
            "reverse" => {
                let o = obj();
                let items = o.items.clone().map(|mut i| {
                    i.reverse();
                    i
                });
                let mut v = o.decoded("reversed", None);
                v.items = items;
                return v;
            }
            "toString" | "trim" | "text" | "json" | "update" | "final" | "concat" => {
                let o = obj();
                if method == "concat" {
                    return o.concat(arg(0));
                }
                let enc = arg(0).text.unwrap_or_default();
                if method == "toString" && enc == "base64" {
                    return Val { text: None, ..o };
                }
                return o;
            }
            "fromCharCode" | "fromCodePoint" => {
                let mut s = String::new();
                let mut known = true;
                for a in &args {
                    match int_lit(cx.text(*a)).and_then(from_code) {
                        Some(ch) => s.push(ch),
                        None => known = false,
                    }
                }
                let how = if args.iter().any(|a| has_xor(cx, *a)) {
                    "XOR-decoded"
                } else {
                    "built from character codes"
                };
                return Val::unknown().decoded(how, known.then_some(s));
            }
            _ => {}
        }
    }
    let (name, _) = super::callee(cx, f, depth + 1, &CALLEE);
    let base = last(&name);
    match base {
        "atob" => arg(0).decoded_by("base64-decoded", unbase64),
        "from" if name.ends_with("Buffer.from") => {
            let a = arg(0);
            match arg(1).text.as_deref() {
                Some("base64" | "base64url") => a.decoded_by("base64-decoded", unbase64),
                Some("hex") => a.decoded_by("hex-decoded", unhex),
                _ => a,
            }
        }
        "inflateSync" | "gunzipSync" | "unzipSync" | "inflateRawSync" | "brotliDecompressSync" => {
            arg(0).decoded("decompressed", None)
        }
        "createDecipheriv" | "createDecipher" | "decrypt" => {
            Val::unknown().decoded("decrypted", None)
        }
        "fetch" => Val::downloaded(),
        // A data file of the skill: `require('./transport.json')`, `JSON.parse(fs.readFileSync(
        // path.join(__dirname, 'transport.json')))`.
        "require" | "parse" if base == "require" || name.ends_with("JSON.parse") => {
            super::data_file(cx, cx.text(n)).unwrap_or_default()
        }
        // The home folder, as the lexical pass spells it.
        "homedir" if name.ends_with("os.homedir") => Val::lit("~"),
        "get" | "post" | "request"
            if name.starts_with("axios")
                || name.starts_with("https")
                || name.starts_with("http")
                || name.starts_with("got") =>
        {
            Val::downloaded()
        }
        "execSync" if name.starts_with("child_process") => {
            // The output of a command: fetched when the command downloads.
            let a = arg(0);
            let t = a
                .text
                .as_deref()
                .unwrap_or("")
                .trim_start()
                .to_ascii_lowercase();
            Val {
                fetched: t.starts_with("curl") || t.starts_with("wget"),
                ..Val::unknown()
            }
        }
        _ => Val::unknown(),
    }
}
