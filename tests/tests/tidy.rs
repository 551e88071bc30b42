//! Repository conventions, checked in plain Rust.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_domain_depends_on_no_io_crate() {
    let manifest = std::fs::read_to_string(root().join("crates/domain/Cargo.toml")).unwrap();
    let deps = manifest.split("[dependencies]").nth(1).unwrap();
    for banned in [
        "actix", "diesel", "hyper", "tokio", "reqwest", "r2d2", "rustls",
    ] {
        assert!(
            !deps.contains(banned),
            "gc-domain must not depend on {banned}"
        );
    }
}

#[test]
fn the_guard_library_has_no_web_framework() {
    let manifest = std::fs::read_to_string(root().join("crates/guard/Cargo.toml")).unwrap();
    assert!(
        !manifest.contains("actix"),
        "gc-guard must stay usable without a web framework"
    );
}

#[test]
fn every_migration_exists_for_both_backends() {
    let names = |backend: &str| {
        let mut v: Vec<String> = std::fs::read_dir(root().join("migrations").join(backend))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let sqlite = names("sqlite");
    assert!(!sqlite.is_empty());
    assert_eq!(sqlite, names("postgres"));
    for name in &sqlite {
        for backend in ["sqlite", "postgres"] {
            for file in ["up.sql", "down.sql"] {
                assert!(
                    root()
                        .join("migrations")
                        .join(backend)
                        .join(name)
                        .join(file)
                        .exists(),
                    "{backend}/{name}/{file}"
                );
            }
        }
    }
}

#[test]
fn every_annotated_handler_is_in_the_openapi_document() {
    // The document's paths are the route table's handlers (`routes.rs`, `route_table!`): an
    // annotated handler must have its entry there, `METHOD [class] module::handler`.
    let src = root().join("crates/http-api/src");
    let table = std::fs::read_to_string(src.join("routes.rs")).unwrap();
    let declared = |entry: &str| {
        table.match_indices(entry).any(|(at, _)| {
            let before = table[..at].trim_end().ends_with(']');
            let after = table[at + entry.len()..].chars().next();
            before && !after.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
        })
    };
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut checked = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let module = file
            .strip_prefix(&src)
            .unwrap()
            .with_extension("")
            .to_string_lossy()
            .replace('/', "::")
            .trim_end_matches("::mod")
            .to_owned();
        for chunk in text.split("#[utoipa::path(").skip(1) {
            let name = chunk
                .split("pub async fn ")
                .nth(1)
                .and_then(|rest| rest.split('(').next())
                .expect("an annotated handler");
            if name.starts_with('$') {
                // A macro's template (`workspace::records::record_routes!`): the handlers it
                // makes are held by `every_mounted_route_is_in_the_openapi_document`.
                continue;
            }
            let entry = format!("{module}::{name}");
            assert!(
                declared(&entry),
                "{entry} is missing from the route table (routes.rs)"
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "found only {checked} handlers");
}

#[test]
fn no_unsafe_and_no_todo_in_the_sources() {
    let mut files = Vec::new();
    for dir in ["crates", "xtask/src", "tests/src"] {
        rust_files(&root().join(dir), &mut files);
    }
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("unsafe {"), "{}", file.display());
        assert!(!text.contains("todo!("), "{}", file.display());
        assert!(!text.contains("unimplemented!("), "{}", file.display());
    }
}

/// The crates a package reaches through normal (non-dev, non-build) dependencies, transitively,
/// read from `cargo metadata`.
fn reachable(package: &str) -> std::collections::BTreeSet<String> {
    let rustc = std::process::Command::new("rustc")
        .arg("-vV")
        .output()
        .unwrap();
    let host = String::from_utf8_lossy(&rustc.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // Only this platform's packages: the others need not be in the local registry cache.
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let name_of = |id: &str| {
        meta["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == id)
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .unwrap()
    };
    let nodes = meta["resolve"]["nodes"].as_array().unwrap();
    let start = nodes
        .iter()
        .find(|n| name_of(n["id"].as_str().unwrap()) == package)
        .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let mut todo = vec![start["id"].as_str().unwrap().to_owned()];
    while let Some(id) = todo.pop() {
        let node = nodes.iter().find(|n| n["id"] == id.as_str()).unwrap();
        for dep in node["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            let dep_id = dep["pkg"].as_str().unwrap().to_owned();
            if normal && seen.insert(name_of(&dep_id)) {
                todo.push(dep_id);
            }
        }
    }
    seen
}

#[test]
fn the_domain_reaches_no_io_crate_even_transitively() {
    let deps = reachable("gc-domain");
    for banned in [
        "hyper",
        "tokio",
        "diesel",
        "actix-web",
        "actix-http",
        "reqwest",
        "rustls",
        "r2d2",
    ] {
        assert!(
            !deps.contains(banned),
            "gc-domain reaches {banned}: {deps:?}"
        );
    }
}

#[test]
fn the_http_api_reaches_neither_persistence_nor_auth() {
    let deps = reachable("gc-http-api");
    assert!(deps.contains("gc-domain"));
    for banned in ["gc-persistence", "gc-auth", "diesel", "bcrypt", "aes-gcm"] {
        assert!(!deps.contains(banned), "gc-http-api reaches {banned}");
    }
}

/// Handlers call domain functions only, never a port.
#[test]
fn handlers_call_no_port() {
    let src = root().join("crates/http-api/src");
    for dir in ["admin", "auth", "gateway", "guard", "system", "workspace"] {
        let mut files = Vec::new();
        rust_files(&src.join(dir), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for needle in ["store.", "ports.", "require_admin"] {
                assert!(
                    !text.contains(needle),
                    "{} contains `{needle}`",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn every_error_code_is_documented() {
    let api = std::fs::read_to_string(root().join("docs/api.md")).unwrap();
    for code in gc_domain::ErrorCode::ALL {
        assert!(
            api.contains(&format!("`{}`", code.as_str())),
            "docs/api.md does not document the error code `{}`",
            code.as_str()
        );
    }
}

#[test]
fn no_error_code_string_is_made_up_outside_the_enum() {
    // `ApiError` only takes an `ErrorCode`; this catches a code written as text where a JSON
    // error body is built by hand.
    let mut files = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // The mock upstream speaks for OpenAI, not for gc.
        if file.ends_with("domain/src/error.rs")
            || file.ends_with("mock.rs")
            || file.to_string_lossy().contains("/tests")
        {
            continue;
        }
        // Unit tests hold upstream-shaped sample data.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            let line = line.trim();
            if line.starts_with("//") {
                continue;
            }
            assert!(
                !(line.contains("\"code\": \"") || line.contains("\"code\":\"")),
                "{}:{}: an error code written as text; use gc_domain::ErrorCode",
                file.display(),
                n + 1
            );
        }
    }
}

/// `cargo xtask` stays quick to build: it runs the service's binaries instead of linking them.
#[test]
fn xtask_links_no_service_crate() {
    let deps = reachable("xtask");
    for banned in [
        "gc-http-api",
        "gc-server",
        "gc-persistence",
        "actix-web",
        "diesel",
    ] {
        assert!(!deps.contains(banned), "xtask reaches {banned}: {deps:?}");
    }
}

/// The local operator's admin authority is made by the `gc-server admin` command line only.
#[test]
fn only_the_admin_command_line_makes_a_local_operator() {
    let mut files = Vec::new();
    for dir in ["crates", "xtask/src", "tests"] {
        rust_files(&root().join(dir), &mut files);
    }
    let allowed = [
        root().join("crates/domain/src/access.rs"),
        root().join("crates/server/src/admin_cli.rs"),
        root().join("tests/tests/tidy.rs"),
    ];
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // Unit tests may make one to reach the administration functions.
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        if text.contains("at_the_console(") || text.contains("LocalOperator {") {
            assert!(
                allowed.contains(&file),
                "{} makes a LocalOperator; only `gc-server admin` may",
                file.display()
            );
        }
    }
}

#[test]
fn every_mounted_route_is_in_the_openapi_document() {
    let doc: serde_json::Value = serde_json::from_str(&gc_http_api::openapi::document()).unwrap();
    // Parameter names may differ between the two; the shape must not.
    let shape = |path: &str| {
        path.split('/')
            .map(|seg| if seg.starts_with('{') { "{}" } else { seg })
            .collect::<Vec<_>>()
            .join("/")
    };
    let documented: std::collections::BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, ops)| {
            let path = shape(path);
            ops.as_object()
                .unwrap()
                .keys()
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect();
    let mut missing = Vec::new();
    for route in gc_http_api::routes::all() {
        let path = format!("/api/v1{}", route.path);
        let method = route.method.to_ascii_lowercase();
        if !documented.contains(&(method, shape(&path))) {
            missing.push(format!("{} {path}", route.method));
        }
    }
    assert!(
        missing.is_empty(),
        "mounted but not documented: {missing:?}"
    );
}

/// `.env.sample`, the README and the config module's table name every variable the server
/// reads.
#[test]
fn every_configuration_variable_is_documented() {
    let config = std::fs::read_to_string(root().join("crates/server/src/config.rs")).unwrap();
    let sample = std::fs::read_to_string(root().join(".env.sample")).unwrap();
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let mut names = Vec::new();
    for chunk in config.split("env = \"").skip(1) {
        names.push(chunk.split('"').next().unwrap().to_owned());
    }
    assert!(names.len() > 25, "found only {names:?}");
    for name in &names {
        assert!(
            sample.contains(&format!("{name}=")),
            ".env.sample lacks {name}"
        );
        assert!(readme.contains(name), "README.md lacks {name}");
        assert!(
            config.contains(&format!("`{name}`")),
            "the config module's table lacks {name}"
        );
    }
}

/// The handler files converted to feature services (issue 30): the files
/// `service_handlers_make_one_service_call_and_import_no_adapter` checks.
const SERVICE_HANDLERS: [&str; 3] = ["guard/scan.rs", "admin/ai_keys.rs", "admin/diagnostics.rs"];

/// The `pub async fn` handlers of a file, each with its text up to the closing brace at the
/// start of a line.
fn handler_fns(text: &str) -> Vec<(String, String)> {
    text.split("pub async fn ")
        .skip(1)
        .map(|chunk| {
            let name = chunk.split('(').next().unwrap().to_owned();
            let end = chunk.find("\n}\n").map_or(chunk.len(), |i| i + 2);
            (name, chunk[..end].to_owned())
        })
        .collect()
}

/// How many calls `module::function(` a text makes: `module::` (not the tail of a longer
/// segment) followed by a lower-case identifier and an opening parenthesis (no turbofish:
/// these calls use none).
fn calls_into(text: &str, module: &str) -> usize {
    let needle = format!("{module}::");
    text.match_indices(&needle)
        .filter(|(i, _)| {
            let before = text[..*i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                return false;
            }
            let rest = &text[i + needle.len()..];
            let ident: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            ident.chars().next().is_some_and(char::is_lowercase)
                && rest[ident.len()..].starts_with('(')
        })
        .count()
}

/// Issue 30: a handler with a feature service is extract, one service call, map. Each file of
/// [`SERVICE_HANDLERS`]:
/// - imports exactly one feature module, `use gc_domain::services::<feature>`;
/// - names no adapter crate (`gc_guard`, `gc_gateway`, `gc_persistence`, `gc_auth`), neither
///   the domain's other feature modules (`admin`, `accounts`, `workspace_service`,
///   `workspace_keys`, `runs`, `system`) nor its ports;
/// - makes no storage trip of its own (`.db(`, `.read(`, `.with_hasher(`) and no gateway or
///   scanner call (`gateways()`, `.executor`, `.probe(`, `check_reachable`,
///   `admit_anonymous`), anywhere in the file;
/// - and each of its `pub async fn` calls a function of `<feature>` exactly once, counted in
///   the handler's text.
///
/// It reads text: a call made through a helper function of the same file is not counted (the
/// bans above still hold for such a helper, since they apply to the whole file).
#[test]
fn service_handlers_make_one_service_call_and_import_no_adapter() {
    let src = root().join("crates/http-api/src");
    for rel in SERVICE_HANDLERS {
        let text = std::fs::read_to_string(src.join(rel)).unwrap();
        let features: Vec<String> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("use gc_domain::services::"))
            .map(|rest| {
                rest.chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect()
            })
            .collect();
        assert_eq!(
            features.len(),
            1,
            "{rel} must import one feature service (use gc_domain::services::<feature>)"
        );
        let feature = &features[0];
        for banned in [
            "gc_guard",
            "gc_gateway",
            "gc_persistence",
            "gc_auth",
            "gc_domain::admin",
            "gc_domain::accounts",
            "gc_domain::workspace_service",
            "gc_domain::workspace_keys",
            "gc_domain::runs",
            "gc_domain::system",
            "gc_domain::ports",
            ".db(",
            ".read(",
            ".with_hasher(",
            "gateways()",
            ".executor",
            ".probe(",
            "check_reachable",
            "admit_anonymous",
        ] {
            assert!(!text.contains(banned), "{rel} contains `{banned}`");
        }
        let handlers = handler_fns(&text);
        assert!(!handlers.is_empty(), "{rel} has no handler");
        for (name, body) in handlers {
            assert_eq!(
                calls_into(&body, feature),
                1,
                "{rel}: {name} must make exactly one call into services::{feature}"
            );
        }
    }
}

#[test]
fn the_service_call_counter_counts_calls_only() {
    let body =
        "let a = ai_keys::create(x).await?;\nlet b: ai_keys::NewAiKey = y;\nmy_ai_keys::list(z);";
    assert_eq!(calls_into(body, "ai_keys"), 1);
    let two = format!("{body}\nai_keys::list(state.get_ref(), p, id).await?;");
    assert_eq!(calls_into(&two, "ai_keys"), 2);
    let fns = handler_fns("pub async fn a() {\n    x::f();\n}\n\npub async fn b() {\n}\n");
    assert_eq!(fns.len(), 2);
    assert_eq!(fns[0].0, "a");
    assert_eq!(calls_into(&fns[0].1, "x"), 1);
    assert_eq!(calls_into(&fns[1].1, "x"), 0);
}
