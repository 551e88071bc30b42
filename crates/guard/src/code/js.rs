//! JavaScript (and TypeScript, read with the JavaScript grammar): values followed into
//! `eval`, `Function`, `child_process.*`, `vm.runIn*`, `require` (tree-sitter-javascript).

use super::{from_code, has_op, has_xor, int_lit, unbase64, unhex, Ctx, Sink, Val, MAX_DEPTH};
use tree_sitter::Node;

pub(super) fn visit(cx: &mut Ctx<'_>, n: Node<'_>) {
    match n.kind() {
        "variable_declarator" => {
            let (Some(name), Some(value)) = (
                n.child_by_field_name("name"),
                n.child_by_field_name("value"),
            ) else {
                return;
            };
            bind(cx, name, value);
        }
        "assignment_expression" => {
            let (Some(left), Some(right)) = (
                n.child_by_field_name("left"),
                n.child_by_field_name("right"),
            ) else {
                return;
            };
            bind(cx, left, right);
        }
        "augmented_assignment_expression" => {
            let (Some(left), Some(right)) = (
                n.child_by_field_name("left"),
                n.child_by_field_name("right"),
            ) else {
                return;
            };
            if left.kind() == "identifier" {
                let name = cx.text(left).to_string();
                let v = cx.get(&name).concat(eval(cx, right, 0));
                cx.set(&name, v);
            }
        }
        "call_expression" | "new_expression" => {
            grow(cx, n);
            call_sink(cx, n);
        }
        _ => {}
    }
}

/// `out.push(c ^ key)`: an array grown in a loop from XOR or character codes.
fn grow(cx: &mut Ctx<'_>, n: Node<'_>) {
    let Some(f) = n
        .child_by_field_name("function")
        .filter(|f| f.kind() == "member_expression")
    else {
        return;
    };
    let method = f.child_by_field_name("property").map_or("", |p| cx.text(p));
    if !matches!(method, "push" | "unshift" | "concat") {
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
    } else if has_op(cx, arg, &["fromCharCode"]) {
        "built from character codes"
    } else {
        return;
    };
    let name = cx.text(obj).to_string();
    let v = cx.get(&name).decoded(how, None);
    super::note_codes(cx, n, &v);
    cx.set(&name, v);
}

fn bind(cx: &mut Ctx<'_>, name: Node<'_>, value: Node<'_>) {
    match name.kind() {
        "identifier" => {
            let v = eval(cx, value, 0);
            let module = callee(cx, value, 0).0;
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
            let (module, _) = callee(cx, value, 0);
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
        _ => {}
    }
}

/// The dotted name a callee resolves to (`require('child_process').exec` ->
/// `child_process.exec`), and whether a part of it was assembled.
fn callee(cx: &Ctx<'_>, n: Node<'_>, depth: usize) -> (String, bool) {
    if depth > MAX_DEPTH {
        return (String::new(), false);
    }
    match n.kind() {
        "identifier" => {
            let t = cx.text(n);
            match cx.vars.get(t) {
                Some(v) if v.module.is_some() => (v.module.clone().unwrap_or_default(), false),
                _ => (strip_global(t).to_string(), false),
            }
        }
        "member_expression" => {
            let (obj, a) = n
                .child_by_field_name("object")
                .map_or((String::new(), false), |o| callee(cx, o, depth + 1));
            let prop = n.child_by_field_name("property").map_or("", |p| cx.text(p));
            (join(&obj, prop), a)
        }
        "subscript_expression" => {
            let (obj, a) = n
                .child_by_field_name("object")
                .map_or((String::new(), false), |o| callee(cx, o, depth + 1));
            let key = n
                .child_by_field_name("index")
                .map(|s| eval(cx, s, depth + 1))
                .unwrap_or_default();
            let assembled = key.assembled();
            match key.text {
                Some(k) => (join(&obj, &k), a || assembled),
                None => (obj, a),
            }
        }
        "call_expression" => {
            let (f, a) = n
                .child_by_field_name("function")
                .map_or((String::new(), false), |f| callee(cx, f, depth + 1));
            if f == "require" || f.ends_with(".require") || f == "import" {
                let arg = args_of(n)
                    .first()
                    .map(|x| eval(cx, *x, depth + 1))
                    .unwrap_or_default();
                if let Some(m) = arg.text {
                    let m = m.strip_prefix("node:").unwrap_or(&m).to_string();
                    return (m, a || arg.pieces >= 2 || arg.decoded.is_some());
                }
            }
            (String::new(), a)
        }
        "parenthesized_expression" | "await_expression" => n
            .named_child(0)
            .map_or((String::new(), false), |c| callee(cx, c, depth + 1)),
        _ => (String::new(), false),
    }
}

fn strip_global(t: &str) -> &str {
    t
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

fn last(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

fn args_of(call: Node<'_>) -> Vec<Node<'_>> {
    let Some(a) = call.child_by_field_name("arguments") else {
        return Vec::new();
    };
    let mut c = a.walk();
    a.named_children(&mut c)
        .filter(|x| x.kind() != "comment")
        .take(16)
        .collect()
}

fn call_sink(cx: &mut Ctx<'_>, n: Node<'_>) {
    let f = n
        .child_by_field_name("function")
        .or_else(|| n.child_by_field_name("constructor"));
    let Some(f) = f else { return };
    let (name, assembled) = callee(cx, f, 0);
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
                    "escape_sequence" => s.push_str(&unescape(cx.text(p))),
                    _ => {}
                }
            }
            Val::lit(&s)
        }
        "template_string" => {
            let mut c = n.walk();
            let mut v = Val {
                text: Some(String::new()),
                pieces: 0,
                ..Val::default()
            };
            for p in n.named_children(&mut c) {
                let part = match p.kind() {
                    "string_fragment" => Val::lit(cx.text(p)),
                    "escape_sequence" => Val::lit(&unescape(cx.text(p))),
                    "template_substitution" => p
                        .named_child(0)
                        .map(|e| eval(cx, e, depth + 1))
                        .unwrap_or_default(),
                    _ => continue,
                };
                v = v.concat(part);
            }
            v.pieces = v.pieces.max(1);
            v
        }
        "number" => Val::lit(cx.text(n)),
        "identifier" => cx.get(cx.text(n)),
        "parenthesized_expression" | "await_expression" => n
            .named_child(0)
            .map(|c| eval(cx, c, depth + 1))
            .unwrap_or_default(),
        "binary_expression" => {
            let op = n.child_by_field_name("operator").map_or("", |o| cx.text(o));
            let l = n
                .child_by_field_name("left")
                .map(|x| eval(cx, x, depth + 1))
                .unwrap_or_default();
            let r = n
                .child_by_field_name("right")
                .map(|x| eval(cx, x, depth + 1))
                .unwrap_or_default();
            match op {
                "+" => l.concat(r),
                "^" => l.concat(r).decoded("XOR-decoded", None),
                _ => Val::unknown(),
            }
        }
        "array" => {
            let mut c = n.walk();
            let mut items = Vec::new();
            let mut flags = Val::unknown();
            for e in n.named_children(&mut c).take(256) {
                let v = eval(cx, e, depth + 1);
                if let Some(t) = &v.text {
                    super::push_item(&mut items, t);
                }
                // Each item is its own argument: the list is as assembled as its most
                // assembled item, not the sum of its items.
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
        "member_expression" => {
            let prop = n.child_by_field_name("property").map_or("", |p| cx.text(p));
            let obj = n
                .child_by_field_name("object")
                .map(|o| eval(cx, o, depth + 1))
                .unwrap_or_default();
            match prop {
                "data" | "body" | "responseText" => Val { text: None, ..obj },
                _ => Val::unknown(),
            }
        }
        "call_expression" => call_value(cx, n, depth),
        _ => Val::unknown(),
    }
}

fn unescape(e: &str) -> String {
    let body = e.strip_prefix('\\').unwrap_or(e);
    match body.chars().next() {
        Some('n') => "\n".into(),
        Some('t') => "\t".into(),
        Some('x') => u32::from_str_radix(body.get(1..3).unwrap_or(""), 16)
            .ok()
            .and_then(char::from_u32)
            .map_or_else(String::new, String::from),
        Some('u') => {
            let hex = body.get(1..).unwrap_or("").trim_start_matches('{');
            let hex: String = hex
                .chars()
                .take_while(char::is_ascii_hexdigit)
                .take(6)
                .collect();
            u32::from_str_radix(&hex, 16)
                .ok()
                .and_then(char::from_u32)
                .map_or_else(String::new, String::from)
        }
        Some(c) => c.to_string(),
        None => String::new(),
    }
}

fn call_value(cx: &Ctx<'_>, n: Node<'_>, depth: usize) -> Val {
    let Some(f) = n.child_by_field_name("function") else {
        return Val::unknown();
    };
    let args = args_of(n);
    let arg = |i: usize| {
        args.get(i)
            .map(|a| eval(cx, *a, depth + 1))
            .unwrap_or_default()
    };
    if f.kind() == "member_expression" {
        let method = f.child_by_field_name("property").map_or("", |p| cx.text(p));
        let obj_node = f.child_by_field_name("object");
        let obj = || obj_node.map(|o| eval(cx, o, depth + 1)).unwrap_or_default();
        match method {
            "join" => {
                let o = obj();
                let sep = arg(0).text.unwrap_or_else(|| {
                    if args.is_empty() {
                        ",".into()
                    } else {
                        String::new()
                    }
                });
                let text = o.items.as_ref().map(|i| i.join(&sep));
                let pieces = o
                    .items
                    .as_ref()
                    .map_or(0, |i| u8::try_from(i.len()).unwrap_or(u8::MAX));
                return Val {
                    text: text.map(|t| super::cut(&t)),
                    items: None,
                    pieces: pieces.max(o.pieces),
                    ..o
                };
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
    let (name, _) = callee(cx, f, depth + 1);
    let base = last(&name);
    match base {
        "atob" => {
            let a = arg(0);
            let t = a.text.as_deref().and_then(unbase64);
            a.decoded("base64-decoded", t)
        }
        "from" if name.ends_with("Buffer.from") => {
            let a = arg(0);
            match arg(1).text.as_deref() {
                Some("base64" | "base64url") => {
                    let t = a.text.as_deref().and_then(unbase64);
                    a.decoded("base64-decoded", t)
                }
                Some("hex") => {
                    let t = a.text.as_deref().and_then(unhex);
                    a.decoded("hex-decoded", t)
                }
                _ => a,
            }
        }
        "inflateSync" | "gunzipSync" | "unzipSync" | "inflateRawSync" | "brotliDecompressSync" => {
            arg(0).decoded("decompressed", None)
        }
        "createDecipheriv" | "createDecipher" | "decrypt" => {
            Val::unknown().decoded("decrypted", None)
        }
        "fetch" => Val {
            fetched: true,
            ..Val::unknown()
        },
        "get" | "post" | "request"
            if name.starts_with("axios")
                || name.starts_with("https")
                || name.starts_with("http")
                || name.starts_with("got") =>
        {
            Val {
                fetched: true,
                ..Val::unknown()
            }
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
