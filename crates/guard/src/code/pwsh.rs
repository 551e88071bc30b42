//! PowerShell with tree-sitter-powershell: variables, `+`, `-join`, `[char]` casts, backtick
//! escapes, expandable strings, `FromBase64String`/`GetString`, `DownloadString`,
//! `Invoke-WebRequest`/`Invoke-RestMethod` followed into `Invoke-Expression`/`iex` (as a
//! command, through `& $x`/`.(...)`, or at the end of a pipeline), `[scriptblock]::Create`,
//! `powershell -Command` and `Start-Process`; functions of the file (and of a dot-sourced
//! or imported file of the skill, read joined) read through at their calls, with positional
//! and named arguments bound to their parameters (`function f($a) {…}`, `param(…)`), their
//! output being what their statements leave in the pipeline (decision 0051).

use super::{from_code, int_lit, unbase64, unquoted, val_of, Body, Ctx, Sink, Val, MAX_DEPTH};
use std::collections::HashMap;
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
            // `$get = { param($u) … }`: a script block kept in a variable is a function,
            // called by `& $get …` or `$get.Invoke(…)`.
            if let Some(sb) = find(value, "script_block_expression", 16)
                .filter(|sb| cx.text(*sb).trim() == cx.text(value).trim())
            {
                cx.define(&format!("&{name}"), sb);
            }
            for (key, v) in splat_entries(cx, value, &name) {
                cx.set(&key, v);
            }
            let v = eval(cx, value, 0);
            cx.set(&name, v);
        }
        "function_statement" => {
            if let Some(name) = function_name(cx, n) {
                cx.define(&name, n);
            }
        }
        "class_method_definition" => {
            if let Some(name) = find(n, "simple_name", 1) {
                let name = format!("{METHOD}{}", cx.text(name).to_ascii_lowercase());
                cx.define(&name, n);
            }
        }
        "command" => {
            sourced_vars(cx, n);
            set_alias(cx, n);
        }
        "pipeline_chain" => {
            chain(cx, n);
        }
        "invokation_expression" if is_create(cx, n) => {
            eval(cx, n, 0);
        }
        _ => {}
    }
    cx.flush();
}

/// A function's name as PowerShell looks it up: lower-cased, without a scope
/// (`function global:Get-X`).
fn function_name(cx: &Ctx<'_>, def: Node<'_>) -> Option<String> {
    let mut c = def.walk();
    let name = def
        .named_children(&mut c)
        .find(|x| x.kind() == "function_name")?;
    let t = cx.text(name).to_ascii_lowercase();
    let t = t.rsplit(':').next().unwrap_or(&t).to_string();
    Some(t)
}

/// `. $PSScriptRoot\common.ps1`, `Import-Module ./x.psm1`, read joined with that file of the
/// skill: its variables.
fn sourced_vars(cx: &mut Ctx<'_>, n: Node<'_>) {
    let Some(links) = cx.links else { return };
    let text = cx.text(n);
    let lower = text.trim_start().to_ascii_lowercase();
    let rest = if let Some(r) = lower.strip_prefix(". ") {
        r
    } else if let Some(r) = lower.strip_prefix("import-module ") {
        r
    } else {
        return;
    };
    let stem = super::link::ps_sourced(rest);
    for (k, v) in links.all(super::Lang::PowerShell, &stem) {
        cx.set(&k, v);
    }
}

/// `Set-Alias run iex`, `New-Alias -Name run -Value Invoke-Expression`, `sal`/`nal`: the
/// alias names the command (kept as a variable of the file).
fn set_alias(cx: &mut Ctx<'_>, n: Node<'_>) {
    let word = command_word(cx, n);
    if !matches!(word.as_str(), "set-alias" | "new-alias" | "sal" | "nal") {
        return;
    }
    let args = arguments(cx, n);
    let (pos, name) = split_args(&args, &["name"]);
    let (_, value) = split_args(&args, &["value"]);
    let mut rest = pos.into_iter();
    let name = name.or_else(|| rest.next());
    let value = value.or_else(|| rest.next());
    if let (Some(name), Some(value)) = (name.and_then(|v| v.text.clone()), value) {
        let mut v = value.clone();
        v.via_var = true;
        cx.set(&format!("ps-alias:{}", name.to_ascii_lowercase()), v);
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

/// `[scriptblock]::Create(…)`, `$ExecutionContext.InvokeCommand.NewScriptBlock(…)`,
/// `.InvokeScript(…)` and `[PowerShell]::Create().AddScript(…)`: a string made code.
fn is_create(cx: &Ctx<'_>, n: Node<'_>) -> bool {
    let t = cx.text(n).to_ascii_lowercase();
    (t.contains("scriptblock") && t.contains("::create"))
        || t.contains(".newscriptblock(")
        || t.contains(".invokescript(")
        || t.contains(".addscript(")
}

/// The prefix of the name a method of a class of the file is defined under.
const METHOD: &str = "method:";

/// A marker before a named argument's value (`-Url $x` is the marker for `url`, then the
/// value): arguments are kept as one list of values, for [`Ctx::call_fn`]'s memo.
const NAMED: char = '\u{0}';

/// A command's arguments: positional values, and named ones as a [`NAMED`] marker followed by
/// the value (a switch is followed by another marker or nothing).
fn arguments(cx: &Ctx<'_>, n: Node<'_>) -> Vec<Val> {
    let Some(e) = n.child_by_field_name("command_elements") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut c = e.walk();
    for x in e.named_children(&mut c).take(32) {
        match x.kind() {
            "command_argument_sep" | "redirection" | "stop_parsing" => {}
            "command_parameter" => {
                let name = cx
                    .text(x)
                    .trim_start_matches('-')
                    .trim_end_matches(':')
                    .to_ascii_lowercase();
                out.push(Val::lit(&format!("{NAMED}{name}")));
            }
            _ => {
                if !splatted(cx, x, &mut out) {
                    out.push(eval(cx, x, 0));
                }
            }
        }
    }
    out
}

/// `$p = @{ Uri = $u; Raw = $true }`: the entries of a hash table kept in a variable, so
/// that splatting it (`F @p`) passes them as named arguments. Given as the names they are
/// kept under: `ps:p@keys` (the keys, lower-cased, as a list) and `ps:p@key` (each value),
/// at most 32 entries.
fn splat_entries(cx: &Ctx<'_>, value: Node<'_>, name: &str) -> Vec<(String, Val)> {
    let Some(hash) = find(value, "hash_literal_expression", 16)
        .filter(|h| cx.text(*h).trim() == cx.text(value).trim())
    else {
        return Vec::new();
    };
    let Some(body) = find(hash, "hash_literal_body", 1) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut keys = Vec::new();
    let mut c = body.walk();
    for entry in body.named_children(&mut c).take(32) {
        let (Some(k), Some(v)) = (find(entry, "key_expression", 1), find(entry, "pipeline", 1))
        else {
            continue;
        };
        let key = unquoted(cx.text(k).trim(), "'", '\'')
            .trim_matches('"')
            .to_ascii_lowercase();
        out.push((format!("{name}@{key}"), eval(cx, v, 1)));
        super::push_item(&mut keys, &key);
    }
    out.push((
        format!("{name}@keys"),
        Val {
            items: Some(keys),
            ..Val::default()
        },
    ));
    out
}

/// The arguments a splatted variable (`@p`) passes: a kept hash table's entries as named
/// arguments, a kept list's items as positional ones.
fn splatted(cx: &Ctx<'_>, x: Node<'_>, out: &mut Vec<Val>) -> bool {
    let Some(var) = find(x, "variable", 4).filter(|v| cx.text(*v).starts_with('@')) else {
        return false;
    };
    let name = format!(
        "ps:{}",
        cx.text(var).trim_start_matches('@').to_ascii_lowercase()
    );
    let keys = cx.get(&format!("{name}@keys"));
    if let Some(keys) = keys.items.filter(|_| cx.is_set(&format!("{name}@keys"))) {
        for key in keys {
            out.push(Val::lit(&format!("{NAMED}{key}")));
            out.push(cx.get(&format!("{name}@{key}")));
        }
        return true;
    }
    let list = cx.get(&name);
    if let Some(items) = list.items.clone() {
        for i in items {
            out.push(Val {
                text: Some(i),
                ..list.clone()
            });
        }
        return true;
    }
    false
}

fn is_marker(v: &Val) -> Option<&str> {
    v.text.as_deref().and_then(|t| t.strip_prefix(NAMED))
}

/// Positional values (named ones left out) and the value of the named argument `names`.
fn split_args<'v>(args: &'v [Val], names: &[&str]) -> (Vec<&'v Val>, Option<&'v Val>) {
    let mut positional = Vec::new();
    let mut named = None;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if let Some(m) = is_marker(a) {
            let value = args.get(i + 1).filter(|v| is_marker(v).is_none());
            if names.iter().any(|n| n.starts_with(m) && !m.is_empty()) {
                named = named.or(value);
            }
            i += if value.is_some() { 2 } else { 1 };
        } else {
            positional.push(a);
            i += 1;
        }
    }
    (positional, named)
}

/// The output and sinks of a pipeline (`a | b | iex`): each command is read for its sinks;
/// a pipeline ending in `iex`/`Invoke-Expression` runs what its feeder gives; a filter at
/// the end (`Out-String`, `Select-Object`, `ForEach-Object` …) passes its input on.
fn chain(cx: &Ctx<'_>, n: Node<'_>) -> Val {
    let mut c = n.walk();
    let parts: Vec<Node<'_>> = n
        .named_children(&mut c)
        .filter(|x| x.kind() != "redirections")
        .take(16)
        .collect();
    let mut v = Val::unknown();
    let count = parts.len();
    for (i, part) in parts.iter().enumerate() {
        if part.kind() != "command" {
            v = eval(cx, *part, 1);
            continue;
        }
        let word = command_word(cx, *part);
        if i > 0 && i + 1 == count && matches!(word.as_str(), "iex" | "invoke-expression") {
            let mut fed = v.clone();
            if fetches(&cx.text(n).to_ascii_lowercase()) {
                fed.fetched = true;
            }
            cx.defer_sink(*part, Sink::Eval, "| iex", &fed);
            return Val::unknown();
        }
        let out = command(cx, *part);
        if i > 0 && FILTERS.contains(&word.as_str()) {
            continue;
        }
        v = out.unwrap_or_default();
    }
    v
}

/// Commands that pass their input on (for what a pipeline gives).
const FILTERS: &[&str] = &[
    "out-string",
    "select-object",
    "select",
    "foreach-object",
    "%",
    "where-object",
    "?",
    "sort-object",
    "tee-object",
];

/// Commands that leave nothing in the pipeline.
const SILENT: &[&str] = &[
    "write-host",
    "write-verbose",
    "write-warning",
    "write-error",
    "write-debug",
    "write-information",
    "write-progress",
    "out-null",
    "out-file",
    "set-content",
    "add-content",
    "set-variable",
    "remove-item",
    "copy-item",
    "move-item",
    "set-location",
    "push-location",
    "pop-location",
    "import-module",
    "export-modulemember",
    "start-sleep",
    "set-strictmode",
    "set-itemproperty",
    "expand-archive",
    "clear-host",
];

/// The command word of a command, lower-cased (`& $name` resolved).
fn command_word(cx: &Ctx<'_>, n: Node<'_>) -> String {
    command_name(cx, n)
        .text
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

fn command_name(cx: &Ctx<'_>, n: Node<'_>) -> Val {
    let Some(name_node) = n.child_by_field_name("command_name") else {
        return Val::unknown();
    };
    if name_node.kind() == "command_name" {
        let raw = cx.text(name_node);
        let word = unbacktick(raw);
        // An alias of the file (`Set-Alias run iex`): the command it names.
        let key = format!("ps-alias:{}", word.to_ascii_lowercase());
        if cx.is_set(&key) {
            return cx.get(&key);
        }
        let mut v = Val::lit(&word);
        if raw.contains('`') {
            v.pieces = 2;
        }
        v
    } else {
        eval(cx, name_node, 0)
    }
}

/// Reports a command's sinks (deferred) and gives what it leaves in the pipeline when that
/// is known or matters: `Write-Output`, a download, what a function of the file gives.
fn command(cx: &Ctx<'_>, n: Node<'_>) -> Option<Val> {
    let name = command_name(cx, n);
    let word = name
        .text
        .clone()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if (name.pieces >= 2 || name.via_var || name.decoded.is_some())
        && crate::capabilities::is_split_word(&word)
    {
        cx.defer_name(n, &word);
    }
    let args = arguments(cx, n);
    let all = n
        .child_by_field_name("command_elements")
        .map_or("", |e| cx.text(e))
        .to_ascii_lowercase();
    if let Some(key) = block_variable(cx, n) {
        return call_through(cx, n, &key, &args);
    }
    match word.as_str() {
        "iex" | "invoke-expression" => {
            let (pos, named) = split_args(&args, &["command"]);
            let mut v = named.or(pos.first().copied()).cloned().unwrap_or_default();
            if fetches(&all) {
                v.fetched = true;
            }
            cx.defer_sink(n, Sink::Eval, "Invoke-Expression", &v);
            None
        }
        "start-process" | "saps" => {
            let (pos, named) = split_args(&args, &["filepath"]);
            if let Some(v) = named.or(pos.first().copied()) {
                cx.defer_sink(n, Sink::Process, "Start-Process", v);
            }
            None
        }
        "powershell" | "powershell.exe" | "pwsh" | "pwsh.exe" => {
            let (pos, named) = split_args(&args, &["command", "c", "encodedcommand", "e", "ec"]);
            let v = named.or_else(|| pos.first().copied().filter(|_| all.contains("-c")));
            if let Some(v) = v {
                cx.defer_sink(n, Sink::Shell, "powershell -Command", v);
            }
            None
        }
        "invoke-webrequest" | "iwr" | "invoke-restmethod" | "irm" | "curl" | "wget" => {
            (!all.contains("-outfile")).then(Val::downloaded)
        }
        "write-output" | "echo" | "write" => {
            let (pos, _) = split_args(&args, &[]);
            Some(super::shell::joined(pos))
        }
        w if cx.has_function(w) => {
            let w = w.to_string();
            call_through(cx, n, &w, &args)
        }
        _ => {
            // `& $sb`, `. (…)`: a value run as a command.
            let invoked = n
                .named_child(0)
                .is_some_and(|x| x.kind() == "command_invokation_operator");
            if invoked && (name.fetched || name.decoded.is_some()) {
                cx.defer_sink(n, Sink::Eval, "&", &name);
            }
            with_values(cx, n, &word, &args);
            None
        }
    }
}

/// A command whose arguments were assembled or splatted (`Set-ItemProperty @entry`,
/// `New-ItemProperty -Path "$hive\$key"`): its command line, spelled with the values,
/// is read again by the lexical pass (registry Run keys, start-up folders, scheduled tasks
/// that no literal line names).
fn with_values(cx: &Ctx<'_>, n: Node<'_>, word: &str, args: &[Val]) {
    let splat = n
        .child_by_field_name("command_elements")
        .is_some_and(|e| cx.text(e).split_whitespace().any(|w| w.starts_with('@')));
    if word.is_empty() || !(splat || args.iter().any(|a| a.assembled())) {
        return;
    }
    let mut line = word.to_string();
    for a in args {
        match (is_marker(a), a.text.as_deref()) {
            (Some(m), _) => {
                line.push_str(" -");
                line.push_str(m);
            }
            (None, Some(t)) => {
                line.push(' ');
                line.push_str(t);
            }
            (None, None) => line.push_str(" $value"),
        }
    }
    let v = Val {
        text: Some(line),
        pieces: 2,
        ..Val::default()
    };
    cx.defer_sink(n, Sink::Command, word, &v);
}

/// `& $get …` where `$get` holds a script block of the file: the key it is defined by.
fn block_variable(cx: &Ctx<'_>, n: Node<'_>) -> Option<String> {
    let invoked = n
        .named_child(0)
        .is_some_and(|x| x.kind() == "command_invokation_operator");
    let name = n.child_by_field_name("command_name")?;
    if !invoked || name.kind() != "command_name_expr" {
        return None;
    }
    let var = find(name, "variable", 2).filter(|v| cx.text(*v) == cx.text(name).trim())?;
    let key = format!("&{}", var_name(cx, var));
    cx.has_function(&key).then_some(key)
}

/// A call of a function of the file (or of a dot-sourced file), read through its body with
/// its parameters bound: named arguments by name (or an unambiguous prefix), the others in
/// order, defaults for the rest; `$args` holds the positional arguments left over.
fn call_through(cx: &Ctx<'_>, n: Node<'_>, word: &str, args: &[Val]) -> Option<Val> {
    cx.call_fn(n, word, args, &|def, args| {
        let params = parameters(cx, def);
        let mut frame: HashMap<String, Val> = HashMap::new();
        let mut positional = Vec::new();
        let mut i = 0;
        while let Some(a) = args.get(i) {
            if let Some(m) = is_marker(a) {
                let value = args.get(i + 1).filter(|v| is_marker(v).is_none());
                let target = params.iter().find(|(p, _)| p == m).or_else(|| {
                    params
                        .iter()
                        .find(|(p, _)| !m.is_empty() && p.starts_with(m))
                });
                if let Some((p, _)) = target {
                    frame.insert(
                        format!("ps:{p}"),
                        value.cloned().unwrap_or_else(|| Val::lit("True")),
                    );
                }
                i += if value.is_some() { 2 } else { 1 };
            } else {
                positional.push(a.clone());
                i += 1;
            }
        }
        let mut rest = positional.into_iter();
        for (p, default) in &params {
            let key = format!("ps:{p}");
            if frame.contains_key(&key) {
                continue;
            }
            let v = match rest.next() {
                Some(v) => v,
                None => default.map(|d| eval(cx, d, 1)).unwrap_or_default(),
            };
            frame.insert(key, v);
        }
        let left: Vec<Val> = rest.collect();
        frame.insert("ps:args".into(), super::list_of(left.into_iter()));
        let body = cx.read_frame(frame, |body| {
            if let Some(block) = find(def, "script_block", 1) {
                read_block(cx, block, body);
            }
        });
        let mut out = body.returns.into_iter().next().unwrap_or_default();
        out.via_var = true;
        out
    })
}

/// A function's parameters (lower-cased, without `$`) and their defaults, from
/// `function f($a, $b = 1)` or a `param(…)` block.
fn parameters<'t>(cx: &Ctx<'_>, def: Node<'t>) -> Vec<(String, Option<Node<'t>>)> {
    let mut out = Vec::new();
    let list = find(def, "function_parameter_declaration", 1)
        .and_then(|d| find(d, "parameter_list", 1))
        .or_else(|| find(def, "param_block", 1).and_then(|p| find(p, "parameter_list", 1)))
        .or_else(|| {
            find(def, "script_block", 1)
                .and_then(|b| find(b, "param_block", 1))
                .and_then(|p| find(p, "parameter_list", 1))
        });
    if def.kind() == "class_method_definition" {
        // `[string] Fetch([string]$name, $n = 1)`: typed parameters, no defaults kept.
        if let Some(list) = find(def, "class_method_parameter_list", 1) {
            let mut c = list.walk();
            for p in list.named_children(&mut c).take(16) {
                if let Some(var) = find(p, "variable", 1) {
                    let name = var_name(cx, var);
                    out.push((name.trim_start_matches("ps:").to_string(), None));
                }
            }
        }
        return out;
    }
    let Some(list) = list else {
        return out;
    };
    let mut c = list.walk();
    for p in list.named_children(&mut c).take(16) {
        if p.kind() != "script_parameter" {
            continue;
        }
        let mut k = p.walk();
        let kids: Vec<Node<'t>> = p.named_children(&mut k).collect();
        let Some(var) = kids.iter().find(|x| x.kind() == "variable") else {
            continue;
        };
        let name = var_name(cx, *var);
        let default = kids
            .iter()
            .find(|x| x.kind() == "script_parameter_default")
            .and_then(|d| d.named_child(0));
        out.push((name.trim_start_matches("ps:").to_string(), default));
    }
    out
}

/// Reads a script block's statements (its body, or its `begin`/`process`/`end` blocks).
fn read_block(cx: &Ctx<'_>, block: Node<'_>, body: &mut Body) {
    let mut c = block.walk();
    for part in block.named_children(&mut c) {
        match part.kind() {
            "script_block_body" => {
                let mut k = part.walk();
                for x in part.named_children(&mut k) {
                    match x.kind() {
                        "statement_list" => read_statements(cx, x, body),
                        "named_block_list" => {
                            let mut j = x.walk();
                            for nb in x.named_children(&mut j) {
                                read_nested(cx, nb, body);
                            }
                        }
                        _ => {}
                    }
                }
            }
            "statement_list" => read_statements(cx, part, body),
            _ => {}
        }
    }
}

/// Adds what a statement leaves in the pipeline to what the body gave so far.
fn emit(body: &mut Body, v: Val) {
    match body.returns.pop() {
        Some(before) => body.returns.push(before.concat(v)),
        None => body.returns.push(v),
    }
}

/// Reads a statement list of a body in order: assignments into the call's scope, pipelines
/// for their sinks and output, `return` (its value, then no more), nested blocks.
fn read_statements(cx: &Ctx<'_>, list: Node<'_>, body: &mut Body) {
    super::read_statements(list, body, |st, body| match st.kind() {
        "pipeline" => {
            let Some(first) = st.named_child(0) else {
                return;
            };
            if first.kind() == "assignment_expression" {
                let (Some(left), Some(value)) =
                    (first.named_child(0), first.child_by_field_name("value"))
                else {
                    return;
                };
                let v = eval(cx, value, 0);
                if let Some(var) = find(left, "variable", 16) {
                    let name = var_name(cx, var);
                    if name != "ps:null" {
                        for (key, v) in splat_entries(cx, value, &name) {
                            cx.assign_local(key, v, false);
                        }
                        cx.assign_local(name, v, false);
                    }
                }
            } else if first.kind() == "pipeline_chain" {
                let v = chain(cx, first);
                let last = last_command_word(cx, first);
                if !SILENT.contains(&last.as_str()) && !cx.text(first).starts_with("[void]") {
                    emit(body, v);
                }
            }
        }
        "flow_control_statement" => {
            let t = cx.text(st).trim_start().to_ascii_lowercase();
            if t.starts_with("return") {
                if let Some(p) = find(st, "pipeline", 1) {
                    let v = eval(cx, p, 0);
                    emit(body, v);
                }
            }
            if t.starts_with("return") || t.starts_with("exit") || t.starts_with("throw") {
                body.stop();
            }
        }
        "function_statement" | "class_statement" | "enum_statement" => {}
        _ => read_nested(cx, st, body),
    });
}

/// The statement blocks nested in a statement (`if`/`else`, loops, `try`/`catch`/`finally`,
/// `switch` clauses, named blocks), read in order.
fn read_nested(cx: &Ctx<'_>, st: Node<'_>, body: &mut Body) {
    let mut c = st.walk();
    let kids: Vec<Node<'_>> = st.named_children(&mut c).take(64).collect();
    for k in kids {
        match k.kind() {
            "statement_block" => {
                if let Some(list) = k.child_by_field_name("statement_list") {
                    read_statements(cx, list, body);
                }
            }
            "else_clause" | "elseif_clauses" | "elseif_clause" | "catch_clauses"
            | "catch_clause" | "finally_clause" | "switch_body" | "switch_clauses"
            | "switch_clause" | "named_block" => read_nested(cx, k, body),
            _ => {}
        }
    }
}

/// The last command word of a pipeline chain (lower-cased), empty when it ends in an
/// expression.
fn last_command_word(cx: &Ctx<'_>, n: Node<'_>) -> String {
    let mut c = n.walk();
    let last = n
        .named_children(&mut c)
        .filter(|x| x.kind() != "redirections")
        .last();
    last.filter(|x| x.kind() == "command")
        .map(|x| command_word(cx, x))
        .unwrap_or_default()
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
        "expandable_string_literal" | "expandable_here_string_literal" => {
            expandable(cx, n, &named, depth)
        }
        "generic_token" => Val::lit(&unbacktick(cx.text(n))),
        "command" => command(cx, n).unwrap_or_default(),
        "pipeline_chain" => chain(cx, n),
        "sub_expression" => match n
            .child_by_field_name("statements")
            .and_then(|l| l.named_child(0))
        {
            Some(st)
                if n.child_by_field_name("statements")
                    .map(|l| l.named_child_count())
                    == Some(1) =>
            {
                eval(cx, st, depth + 1)
            }
            _ => Val::unknown(),
        },
        "member_access" => {
            let member = named
                .iter()
                .find(|x| x.kind() == "member_name")
                .map(|m| cx.text(*m).to_ascii_lowercase())
                .unwrap_or_default();
            if matches!(member.as_str(), "content" | "rawcontent") {
                at(0)
            } else {
                Val::unknown()
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
                let (a, b) = (at(0), at(1));
                match (&a.items, &a.text, &b.text) {
                    // `@('a', 'b') + 'c'`: the list with one more item.
                    (Some(items), None, Some(t)) => {
                        let mut items = items.clone();
                        super::push_item(&mut items, t);
                        let mut out = a.concat(Val { text: None, ..b });
                        out.items = Some(items);
                        out
                    }
                    _ => a.concat(b),
                }
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

/// `"…$x…$(…)…"`: the literal parts (backticks read) and the values of the variables and
/// sub-expressions, in order.
fn expandable(cx: &Ctx<'_>, n: Node<'_>, parts: &[Node<'_>], depth: usize) -> Val {
    let raw = cx.text(n);
    let (open, close) = if n.kind() == "expandable_here_string_literal" {
        ("@\"", "\"@")
    } else {
        ("\"", "\"")
    };
    let base = n.start_byte();
    let body_start = base + if raw.starts_with(open) { open.len() } else { 0 };
    let body_end = n.end_byte()
        - if raw.ends_with(close) && raw.len() > open.len() {
            close.len()
        } else {
            0
        };
    let mut v = Val::empty_text();
    let mut at = body_start;
    let lit = |from: usize, to: usize| {
        let t = raw
            .get(from.saturating_sub(base)..to.saturating_sub(base))
            .unwrap_or("");
        let mut l = Val::lit(&unbacktick(t));
        if t.contains('`') {
            l.pieces = 2;
        }
        l
    };
    for p in parts {
        if p.start_byte() > at {
            v = v.concat(lit(at, p.start_byte()));
        }
        v = v.concat(eval(cx, *p, depth + 1));
        at = p.end_byte();
    }
    if body_end > at {
        v = v.concat(lit(at, body_end));
    }
    v.pieces = v.pieces.max(1);
    v
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
    if is_create(cx, n) {
        cx.defer_sink(n, Sink::Eval, "[scriptblock]::Create", &arg);
        return arg;
    }
    let call_args = || -> Vec<Val> {
        named
            .iter()
            .find(|x| x.kind() == "argument_list")
            .and_then(|a| find(*a, "argument_expression_list", 1))
            .map(|l| {
                let mut c = l.walk();
                let items: Vec<Node<'_>> = l.named_children(&mut c).take(16).collect();
                items.iter().map(|x| eval(cx, *x, depth + 1)).collect()
            })
            .unwrap_or_default()
    };
    // `$get.Invoke($u)`: a script block of the file called.
    if matches!(member.as_str(), "invoke" | "invokereturnasis") {
        if let Some(var) = named.first().filter(|v| v.kind() == "variable") {
            let key = format!("&{}", var_name(cx, *var));
            if cx.has_function(&key) {
                return call_through(cx, n, &key, &call_args()).unwrap_or_default();
            }
        }
    }
    // `$this.Fetch($u)`, `$src.Fetch($u)`: a method of a class of the file, read through
    // like a function (by name, whatever the object).
    let method = format!("{METHOD}{member}");
    if !member.is_empty() && cx.has_function(&method) {
        return call_through(cx, n, &method, &call_args()).unwrap_or_default();
    }
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
