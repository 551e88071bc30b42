//! PowerShell with tree-sitter-powershell: variables, `+`, `-join`, `[char]` casts, backtick
//! escapes, `FromBase64String`/`GetString`, `DownloadString` followed into
//! `Invoke-Expression`/`iex` (as a command, through `& $x`/`.(...)`, or at the end of a
//! pipeline) and `Start-Process`.

use super::{from_code, int_lit, unbase64, unquoted, val_of, Ctx, Sink, Val, MAX_DEPTH};
use tree_sitter::Node;

pub(super) fn visit(cx: &mut Ctx<'_>, n: Node<'_>) {
    match n.kind() {
        "assignment_expression" => {
            let (Some(left), Some(value)) = (n.named_child(0), n.child_by_field_name("value"))
            else {
                return;
            };
            let Some(var) = find(left, "variable", 16) else {
                return;
            };
            let name = var_name(cx, var);
            let v = eval(cx, value, 0);
            cx.set(&name, v);
        }
        "command" => command(cx, n),
        "pipeline_chain" => pipeline(cx, n),
        _ => {}
    }
}

/// The first descendant of `kind` (bounded).
fn find<'t>(n: Node<'t>, kind: &str, depth: usize) -> Option<Node<'t>> {
    if n.kind() == kind {
        return Some(n);
    }
    if depth == 0 {
        return None;
    }
    let mut c = n.walk();
    let children: Vec<Node<'t>> = n.named_children(&mut c).collect();
    children
        .into_iter()
        .find_map(|ch| find(ch, kind, depth - 1))
}

fn var_name(cx: &Ctx<'_>, var: Node<'_>) -> String {
    let t = cx.text(var).trim_start_matches('$');
    let t = t.trim_start_matches('{').trim_end_matches('}');
    format!("ps:{}", t.to_ascii_lowercase())
}

fn unbacktick(s: &str) -> String {
    s.replace('`', "")
}

/// The name a command runs and its arguments.
fn command(cx: &mut Ctx<'_>, n: Node<'_>) {
    let Some(name_node) = n.child_by_field_name("command_name") else {
        return;
    };
    let name = if name_node.kind() == "command_name" {
        let raw = cx.text(name_node);
        let mut v = Val::lit(&unbacktick(raw));
        if raw.contains('`') {
            v.pieces = 2;
        }
        v
    } else {
        eval(cx, name_node, 0)
    };
    let word = name.text.clone().unwrap_or_default().to_ascii_lowercase();
    let word = word.trim().to_string();
    if (name.pieces >= 2 || name.via_var || name.decoded.is_some())
        && crate::capabilities::is_split_word(&word)
    {
        cx.assembled_name(n, &word);
    }
    let elements = n.child_by_field_name("command_elements");
    let first = elements.and_then(|e| {
        let mut c = e.walk();
        let found = e
            .named_children(&mut c)
            .find(|x| !matches!(x.kind(), "command_argument_sep" | "command_parameter"));
        found
    });
    match word.as_str() {
        "iex" | "invoke-expression" => {
            let all = elements.map_or("", |e| cx.text(e)).to_ascii_lowercase();
            let mut v = first.map(|f| eval(cx, f, 0)).unwrap_or_default();
            if fetches(&all) {
                v.fetched = true;
            }
            if v.interesting() {
                cx.sink(n, Sink::Eval, "Invoke-Expression", &v);
            }
        }
        "start-process" | "saps" => {
            if let Some(f) = first {
                let v = eval(cx, f, 0);
                cx.sink(n, Sink::Process, "Start-Process", &v);
            }
        }
        _ => {}
    }
}

fn fetches(lower: &str) -> bool {
    [
        "downloadstring(",
        "downloaddata(",
        "invoke-webrequest",
        "invoke-restmethod",
        "iwr ",
        "irm ",
        "net.webclient",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// `$code | iex`.
fn pipeline(cx: &mut Ctx<'_>, n: Node<'_>) {
    let mut c = n.walk();
    let parts: Vec<Node<'_>> = n.named_children(&mut c).take(16).collect();
    if parts.len() < 2 {
        return;
    }
    let Some(last) = parts.last() else { return };
    if last.kind() != "command" {
        return;
    }
    let name = last
        .child_by_field_name("command_name")
        .map(|x| unbacktick(cx.text(x)).to_ascii_lowercase())
        .unwrap_or_default();
    if name != "iex" && name != "invoke-expression" {
        return;
    }
    let Some(feeder) = parts.get(parts.len() - 2) else {
        return;
    };
    let mut v = eval(cx, *feeder, 0);
    if fetches(&cx.text(*feeder).to_ascii_lowercase()) {
        v.fetched = true;
    }
    cx.sink(*last, Sink::Eval, "| iex", &v);
}

pub(super) fn eval(cx: &Ctx<'_>, n: Node<'_>, depth: usize) -> Val {
    if depth > MAX_DEPTH {
        return Val::unknown();
    }
    let mut c = n.walk();
    let named: Vec<Node<'_>> = n.named_children(&mut c).take(256).collect();
    let at = |i: usize| val_of(cx, named.get(i).copied(), depth, eval);
    match n.kind() {
        "variable" => {
            let name = var_name(cx, n);
            let mut v = cx.get(&name);
            v.via_var = true;
            v
        }
        "verbatim_string_characters" => {
            Val::lit(&unquoted(cx.text(n), "'", '\'').replace("''", "'"))
        }
        "expandable_string_literal" => {
            let t = unquoted(cx.text(n), "\"", '"');
            if t.contains('$') {
                Val {
                    pieces: 2,
                    via_var: true,
                    ..Val::unknown()
                }
            } else {
                let mut v = Val::lit(&unbacktick(t));
                if t.contains('`') {
                    v.pieces = 2;
                }
                v
            }
        }
        "integer_literal" | "decimal_integer_literal" | "hexadecimal_integer_literal" => {
            Val::lit(cx.text(n))
        }
        "cast_expression" => {
            let ty = named
                .first()
                .map(|t| cx.text(*t).to_ascii_lowercase().replace(' ', ""))
                .unwrap_or_default();
            let inner = at(1);
            match ty.as_str() {
                "[char]" => {
                    let ch = inner.text.as_deref().and_then(int_lit).and_then(from_code);
                    Val::unknown().decoded("built from character codes", ch.map(|c| c.to_string()))
                }
                "[char[]]" => {
                    let items: Option<Vec<String>> = inner.items.as_ref().map(|i| {
                        i.iter()
                            .filter_map(|x| int_lit(x).and_then(from_code))
                            .map(String::from)
                            .collect()
                    });
                    let mut v = Val::unknown().decoded("built from character codes", None);
                    v.items = items;
                    v
                }
                _ => inner,
            }
        }
        "array_literal_expression" if named.len() > 1 => {
            super::list_of(named.iter().map(|e| eval(cx, *e, depth + 1)))
        }
        "additive_expression" if named.len() >= 2 => {
            let op = n.child(1).map_or("", |o| cx.text(o));
            if op == "+" {
                at(0).concat(at(1))
            } else {
                Val::unknown()
            }
        }
        "comparison_expression" if named.len() >= 3 => {
            let op = named
                .get(1)
                .map_or(String::new(), |o| cx.text(*o).to_ascii_lowercase());
            if op == "-join" {
                at(0).joined(Some(at(2).text.as_deref().unwrap_or("")))
            } else if op == "-bxor" {
                at(0).concat(at(2)).decoded("XOR-decoded", None)
            } else {
                Val::unknown()
            }
        }
        "bitwise_expression" if named.len() >= 2 => {
            let t = cx.text(n).to_ascii_lowercase();
            if t.contains("-bxor") {
                Val::unknown().decoded("XOR-decoded", None)
            } else {
                Val::unknown()
            }
        }
        "expression_with_unary_operator" => {
            let op = n.child(0).map_or("", |o| cx.text(o)).to_ascii_lowercase();
            let inner = val_of(cx, named.last().copied(), depth, eval);
            if op == "-join" {
                inner.joined(Some(""))
            } else {
                inner
            }
        }
        "invokation_expression" => invocation(cx, n, &named, depth),
        _ => match named.as_slice() {
            [one] => eval(cx, *one, depth + 1),
            _ => Val::unknown(),
        },
    }
}

/// `[Convert]::FromBase64String($x)`, `[Text.Encoding]::UTF8.GetString(...)`,
/// `$wc.DownloadString($u)`.
fn invocation(cx: &Ctx<'_>, n: Node<'_>, named: &[Node<'_>], depth: usize) -> Val {
    let member = named
        .iter()
        .find(|x| x.kind() == "member_name")
        .map(|m| cx.text(*m).to_ascii_lowercase())
        .unwrap_or_default();
    let arg = named
        .iter()
        .find(|x| x.kind() == "argument_list")
        .and_then(|a| find(*a, "argument_expression", 3))
        .map(|a| eval(cx, a, depth + 1))
        .unwrap_or_default();
    match member.as_str() {
        "frombase64string" => {
            let t = arg
                .text
                .as_deref()
                .and_then(unbase64)
                .map(|s| s.replace('\0', ""));
            arg.decoded("base64-decoded", t)
        }
        "getstring" | "tostring" | "readtoend" => arg,
        "downloadstring" | "downloaddata" => Val::downloaded(),
        "decompress" => arg.decoded("decompressed", None),
        _ => {
            let t = cx.text(n).to_ascii_lowercase();
            if t.contains("gzipstream") || t.contains("deflatestream") {
                Val::unknown().decoded("decompressed", None)
            } else {
                Val::unknown()
            }
        }
    }
}
