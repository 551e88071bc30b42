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
    for banned in [
        "gc-persistence",
        "gc-auth",
        "gc-gateway",
        "gc-guard",
        "diesel",
        "bcrypt",
        "aes-gcm",
        "hyper-rustls",
    ] {
        assert!(!deps.contains(banned), "gc-http-api reaches {banned}");
    }
}

/// Issue 30, decision 0041: among gc's crates, `gc-http-api` depends on `gc-domain` only
/// (`cargo metadata`); the region gateways and the Guard reach it through the domain's ports,
/// which the binary wires.
#[test]
fn layering_the_http_api_depends_on_the_domain_only() {
    let deps = workspace_deps();
    let http: Vec<&str> = deps["gc-http-api"].iter().map(String::as_str).collect();
    assert_eq!(http, ["gc-domain"], "gc-http-api's gc crates");
    assert_eq!(HTTP_API_DEPS, ["gc-domain"]);
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
        root().join("crates/domain/src/policy/access.rs"),
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
const SERVICE_HANDLERS: [&str; 4] = [
    "guard/scan.rs",
    "admin/ai_keys.rs",
    "admin/diagnostics.rs",
    "gateway/run.rs",
];

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
            "gc_domain::services::admin",
            "gc_domain::services::accounts",
            "gc_domain::services::workspace",
            "gc_domain::services::api_keys",
            "gc_domain::policy::runs",
            "gc_domain::services::system",
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

// ---------------------------------------------------------------------------------------------
// Layering by imports (issue 30, decision 0035): the crates' dependency graph from
// `cargo metadata`, and the `use` paths and calls of http-api's modules read as Rust syntax.

/// Each workspace crate and the workspace crates it may depend on directly (normal
/// dependencies; dev-dependencies are the tests' business). The domain is at the bottom and
/// depends on no other crate of gc; the adapters (`gc-auth`, `gc-persistence`, `gc-gateway`)
/// implement its ports; `gc-guard` and `gc-console` stand alone; `gc-http-api` sees the domain
/// only; the binary wires everything.
const LAYERS: &[(&str, &[&str])] = &[
    ("gc-domain", &[]),
    ("gc-guard", &[]),
    ("gc-console", &[]),
    ("gc-auth", &["gc-domain"]),
    ("gc-persistence", &["gc-domain"]),
    ("gc-gateway", &["gc-domain"]),
    ("gc-http-api", HTTP_API_DEPS),
    (
        "gc-server",
        &[
            "gc-domain",
            "gc-auth",
            "gc-persistence",
            "gc-gateway",
            "gc-guard",
            "gc-console",
            "gc-http-api",
        ],
    ),
];

/// What `gc-http-api` may depend on among gc's crates.
const HTTP_API_DEPS: &[&str] = &["gc-domain"];

/// The adapter crates, as Rust paths: no module of http-api's handler folders names one.
const ADAPTER_CRATES: [&str; 4] = ["gc_persistence", "gc_auth", "gc_gateway", "gc_guard"];

/// The folders of `crates/http-api/src` that hold handlers.
const HANDLER_DIRS: [&str; 6] = ["admin", "auth", "gateway", "guard", "system", "workspace"];

/// The direct normal dependencies of each workspace crate on other workspace crates.
fn workspace_deps() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--no-deps",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    let ours: std::collections::BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .filter(|name| ours.contains(name))
                .collect();
            (p["name"].as_str().unwrap().to_owned(), deps)
        })
        .collect()
}

/// Layering, crates: every gc crate depends (directly, normal dependencies) only on the crates
/// [`LAYERS`] allows it; a crate missing from the table fails too, so a new crate is placed.
#[test]
fn layering_each_crate_depends_only_on_the_crates_below_it() {
    let deps = workspace_deps();
    for (name, uses) in &deps {
        if name == "xtask" || name == "gc-tests" {
            continue;
        }
        let allowed = LAYERS
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name} is not placed in tidy.rs's LAYERS"))
            .1;
        for dep in uses {
            assert!(
                allowed.contains(&dep.as_str()),
                "{name} depends on {dep}; LAYERS allows it {allowed:?}"
            );
        }
    }
    assert!(deps["gc-domain"].is_empty());
}

/// A file of Rust read as syntax: its `use` items expanded to whole paths (`alias -> path`),
/// and its functions.
struct Module {
    file: syn::File,
    /// Each name a `use` brings in (its alias, or its last segment) and the whole path.
    uses: Vec<(String, String)>,
}

fn path_text(path: &syn::Path) -> String {
    path.segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

fn expand_use(tree: &syn::UseTree, prefix: &str, out: &mut Vec<(String, String)>) {
    let join = |name: &str| {
        if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}::{name}")
        }
    };
    match tree {
        syn::UseTree::Path(p) => expand_use(&p.tree, &join(&p.ident.to_string()), out),
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                let last = prefix.rsplit("::").next().unwrap_or(prefix).to_owned();
                out.push((last, prefix.to_owned()));
            } else {
                out.push((name.clone(), join(&name)));
            }
        }
        syn::UseTree::Rename(r) if r.ident == "self" => {
            out.push((r.rename.to_string(), prefix.to_owned()));
        }
        syn::UseTree::Rename(r) => out.push((r.rename.to_string(), join(&r.ident.to_string()))),
        syn::UseTree::Glob(_) => out.push(("*".into(), join("*"))),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                expand_use(t, prefix, out);
            }
        }
    }
}

impl Module {
    fn read(path: &Path) -> Self {
        let text = std::fs::read_to_string(path).unwrap();
        let file = syn::parse_file(&text)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
        let mut uses = Vec::new();
        for item in &file.items {
            if let syn::Item::Use(u) = item {
                expand_use(&u.tree, "", &mut uses);
            }
        }
        Self { file, uses }
    }

    /// A path as written, its first segment replaced by what a `use` of the file names.
    fn resolve(&self, path: &str) -> String {
        let (first, rest) = path.split_once("::").unwrap_or((path, ""));
        let whole = self
            .uses
            .iter()
            .find(|(alias, _)| alias == first)
            .map_or_else(|| first.to_owned(), |(_, whole)| whole.clone());
        if rest.is_empty() {
            whole
        } else {
            format!("{whole}::{rest}")
        }
    }

    /// Every path the file names: in `use` items, in code and in types (macro bodies, which
    /// syn keeps as tokens, are not read).
    fn named_paths(&self) -> Vec<String> {
        struct Paths(Vec<String>);
        impl<'ast> syn::visit::Visit<'ast> for Paths {
            fn visit_path(&mut self, p: &'ast syn::Path) {
                self.0.push(path_text(p));
                syn::visit::visit_path(self, p);
            }
        }
        let mut v = Paths(self.uses.iter().map(|(_, p)| p.clone()).collect());
        syn::visit::Visit::visit_file(&mut v, &self.file);
        v.0
    }

    /// The free functions of the file, by name.
    fn fns(&self) -> Vec<&syn::ItemFn> {
        self.file
            .items
            .iter()
            .filter_map(|i| match i {
                syn::Item::Fn(f) => Some(f),
                _ => None,
            })
            .collect()
    }

    /// The service calls `body` makes, following calls to the file's own free functions (so a
    /// call hidden behind a helper still counts): each `module::function(..)` call whose path,
    /// resolved through the file's `use` items, goes into a module of `gc_domain` that is not
    /// one of its [`VALUE_MODULES`] (so a new module counts until it is named there) and ends
    /// in a lower-case module and function; and each method called on the run orchestration
    /// the state holds (`state.runs.execute(..)`). Other method calls, calls through a local
    /// variable (`let runs = state.runs.clone(); runs.x()`) and calls inside macros are not
    /// seen.
    fn service_calls(&self, body: &syn::Block) -> Vec<String> {
        struct Calls<'m> {
            module: &'m Module,
            found: Vec<String>,
            helpers: Vec<String>,
        }
        impl<'ast> syn::visit::Visit<'ast> for Calls<'_> {
            fn visit_expr_call(&mut self, call: &'ast syn::ExprCall) {
                if let syn::Expr::Path(p) = call.func.as_ref() {
                    let written = path_text(&p.path);
                    let whole = self.module.resolve(&written);
                    let segments: Vec<&str> = whole.split("::").collect();
                    let lower = |s: &str| s.chars().next().is_some_and(char::is_lowercase);
                    if whole.starts_with("gc_domain::")
                        && !VALUE_MODULES
                            .contains(&segments[if segments[1] == "policy" { 2 } else { 1 }])
                        && segments.len() >= 3
                        && lower(segments[segments.len() - 1])
                        && lower(segments[segments.len() - 2])
                    {
                        self.found.push(whole);
                    } else if segments.len() == 1 && !self.helpers.contains(&written) {
                        self.helpers.push(written);
                    }
                }
                syn::visit::visit_expr_call(self, call);
            }
            fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
                // A method of the run orchestration the state holds (`state.runs.execute(..)`,
                // `state.runs.quotas().refill_due()`), but its `clone`.
                let mut receiver = call.receiver.as_ref();
                loop {
                    match receiver {
                        syn::Expr::MethodCall(m) => receiver = m.receiver.as_ref(),
                        syn::Expr::Field(f) => {
                            let runs = matches!(&f.member, syn::Member::Named(n) if n == "runs");
                            let state = matches!(f.base.as_ref(), syn::Expr::Path(p) if p.path.is_ident("state"));
                            if runs && state && call.method != "clone" {
                                // The outermost method of the chain only.
                                self.found.push(format!("state.runs.{}", call.method));
                                for arg in &call.args {
                                    syn::visit::Visit::visit_expr(self, arg);
                                }
                                return;
                            }
                            break;
                        }
                        _ => break,
                    }
                }
                syn::visit::visit_expr_method_call(self, call);
            }
        }
        let mut calls = Calls {
            module: self,
            found: Vec::new(),
            helpers: Vec::new(),
        };
        syn::visit::Visit::visit_block(&mut calls, body);
        // The file's own functions called from the body, once each, transitively.
        let mut seen = Vec::new();
        while let Some(name) = calls.helpers.pop() {
            if seen.contains(&name) {
                continue;
            }
            seen.push(name.clone());
            if let Some(f) = self.fns().into_iter().find(|f| f.sig.ident == name) {
                syn::visit::Visit::visit_block(&mut calls, &f.block);
            }
        }
        calls.found
    }
}

/// The handlers of the route table (`routes.rs`): each `METHOD [class] module::handler`
/// entry of `route_table!`, as its module path and function name.
fn declared_handlers() -> Vec<(String, String)> {
    use proc_macro2::TokenTree;
    fn walk(tokens: proc_macro2::TokenStream, out: &mut Vec<(String, String)>) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) if g.delimiter() == proc_macro2::Delimiter::Bracket => {
                    // `[class]` is followed by the handler path `a::b::c`.
                    let mut path = Vec::new();
                    let mut j = i + 1;
                    while let Some(TokenTree::Ident(id)) = tokens.get(j) {
                        path.push(id.to_string());
                        let colons = matches!(tokens.get(j + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':')
                            && matches!(tokens.get(j + 2), Some(TokenTree::Punct(p)) if p.as_char() == ':');
                        if !colons {
                            break;
                        }
                        j += 3;
                    }
                    if path.len() >= 2 {
                        let name = path.pop().unwrap();
                        out.push((path.join("::"), name));
                    }
                    i = j.max(i + 1);
                }
                TokenTree::Group(g) => {
                    walk(g.stream(), out);
                    i += 1;
                }
                _ => i += 1,
            }
        }
    }
    let routes = Module::read(&root().join("crates/http-api/src/routes.rs"));
    let mut out = Vec::new();
    for item in &routes.file.items {
        if let syn::Item::Macro(m) = item {
            if m.mac.path.is_ident("route_table") {
                walk(m.mac.tokens.clone(), &mut out);
            }
        }
    }
    assert!(out.len() > 40, "found only {} handlers", out.len());
    out
}

/// The file of an http-api module path (`admin::ai_keys` is `admin/ai_keys.rs` or
/// `admin/ai_keys/mod.rs`).
fn module_file(module: &str) -> PathBuf {
    let src = root().join("crates/http-api/src");
    let rel = module.replace("::", "/");
    let flat = src.join(format!("{rel}.rs"));
    if flat.exists() {
        flat
    } else {
        src.join(rel).join("mod.rs")
    }
}

/// The domain's modules of values and pure rules: calling one (parsing a value, a default, a
/// clock reading) is part of extracting or mapping, not a service call.
const VALUE_MODULES: &[&str] = &[
    "access",
    "error",
    "model",
    "values",
    "page",
    "secret",
    "workspace",
    "records",
    "quota",
    "prices",
    "models",
];

/// Handlers that still make more than one service call, with the reason; each is work left
/// (issue 30). A handler listed here that makes one call or none fails the check, so the
/// list only shrinks.
const MORE_THAN_ONE_CALL: &[(&str, &str)] = &[];

/// Handler modules that still name an adapter crate (file under `crates/http-api/src`, the
/// crate, why): each is work left (issue 30); a file listed here that no longer names the
/// crate fails [`layering_the_adapter_exceptions_are_still_needed`], so the list only shrinks.
const ADAPTER_PATHS_LEFT: &[(&str, &str, &str)] = &[];

/// Layering, handlers: no module in http-api's handler folders names an adapter crate
/// (`gc_persistence`, `gc_auth`, `gc_gateway`, `gc_guard`) or the domain's ports, in a `use`
/// or in a path in its code; and nothing in http-api names `gc_persistence` or `gc_auth`.
/// Read as syntax (syn), so an alias (`use gc_gateway as gw`) or a grouped `use` is seen; a
/// path written only inside a macro's arguments is not.
#[test]
fn layering_no_handler_module_imports_an_adapter() {
    let src = root().join("crates/http-api/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut handler_files = 0;
    let mut found = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let handler = HANDLER_DIRS
            .iter()
            .any(|d| rel.starts_with(&format!("{d}/")));
        handler_files += usize::from(handler);
        let module = Module::read(&file);
        for path in module.named_paths() {
            let first = path.split("::").next().unwrap_or_default();
            let banned = if handler {
                ADAPTER_CRATES.contains(&first)
                    || path.starts_with("gc_domain::ports")
                    || path.starts_with("crate::adapters")
            } else {
                first == "gc_persistence" || first == "gc_auth"
            };
            let excused = ADAPTER_PATHS_LEFT
                .iter()
                .any(|(f, krate, _)| *f == rel && *krate == first);
            let what = if ADAPTER_CRATES.contains(&first) {
                first.to_owned()
            } else {
                path.clone()
            };
            if banned && !excused && !found.contains(&format!("{rel}: {what}")) {
                found.push(format!("{rel}: {what}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a handler reaches adapters only through the domain's services and the ports the \
         server wires; these name an adapter (file: crate or module):\n{}",
        found.join("\n")
    );
    assert!(
        handler_files > 20,
        "found only {handler_files} handler files"
    );
}

/// Each of [`ADAPTER_PATHS_LEFT`] still names its crate (else it is to be taken off).
#[test]
fn layering_the_adapter_exceptions_are_still_needed() {
    let src = root().join("crates/http-api/src");
    for (file, krate, _) in ADAPTER_PATHS_LEFT {
        let module = Module::read(&src.join(file));
        assert!(
            module
                .named_paths()
                .iter()
                .any(|p| p.split("::").next() == Some(*krate)),
            "{file} no longer names {krate}: take it off ADAPTER_PATHS_LEFT"
        );
    }
}

/// Layering, handlers: each handler of the route table makes at most one service call
/// (`Module::service_calls`: a call into a `gc_domain` module's function, resolved through the
/// file's imports and followed through the file's own helper functions). Statically, from the
/// syntax: a call made through a method (`state.runs.execute(..)`), through another file's
/// helper or inside a macro's arguments is not counted, and a handler generated by a macro
/// (`record_routes!`: skills, memory, sources, drafts) is read as its template is not; those
/// are named in the failure message's count of handlers not found and checked by their
/// service's tests instead. Exceptions are listed in [`MORE_THAN_ONE_CALL`].
#[test]
fn layering_each_handler_makes_at_most_one_service_call() {
    let mut checked = 0;
    let mut generated = Vec::new();
    let mut over = Vec::new();
    for (module, name) in declared_handlers() {
        let parsed = Module::read(&module_file(&module));
        let Some(f) = parsed.fns().into_iter().find(|f| f.sig.ident == name) else {
            generated.push(format!("{module}::{name}"));
            continue;
        };
        checked += 1;
        let calls = parsed.service_calls(&f.block);
        let entry = format!("{module}::{name}");
        let excused = MORE_THAN_ONE_CALL.iter().any(|(h, _)| *h == entry);
        if calls.len() > 1 && !excused {
            over.push(format!("{entry}: {calls:?}"));
        }
        if excused {
            assert!(
                calls.len() > 1,
                "{entry} makes {} service call(s) now: take it off MORE_THAN_ONE_CALL",
                calls.len()
            );
        }
    }
    assert!(
        over.is_empty(),
        "handlers with more than one service call:\n{}",
        over.join("\n")
    );
    assert!(checked > 40, "checked only {checked} handlers");
    // Only the record kinds' handlers are generated (by `record_routes!`).
    for g in &generated {
        assert!(
            [
                "workspace::skills::",
                "workspace::memory::",
                "workspace::sources::",
                "workspace::drafts::"
            ]
            .iter()
            .any(|m| g.starts_with(m)),
            "{g} is declared in the route table but is no function of its module"
        );
    }
}

/// The service-call counter sees calls through imports and helpers, and nothing else.
#[test]
fn the_import_based_call_counter_counts_service_calls_only() {
    let module = |text: &str| {
        let file = syn::parse_file(text).unwrap();
        let mut uses = Vec::new();
        for item in &file.items {
            if let syn::Item::Use(u) = item {
                expand_use(&u.tree, "", &mut uses);
            }
        }
        Module { file, uses }
    };
    let m = module(
        "use gc_domain::services::{ai_keys, guard_scan as scan};\n\
         use gc_domain::DomainError;\n\
         use crate::cursor;\n\
         async fn h() { ai_keys::list(a).await; DomainError::invalid(b); cursor::encode(c); helper(); }\n\
         fn helper() { let _ = |s| scan::scan(s); }\n\
         async fn one() { gc_domain::services::admin::list_users(x); Vec::new(); }",
    );
    let calls = |name: &str| {
        let f = m.fns().into_iter().find(|f| f.sig.ident == name).unwrap();
        m.service_calls(&f.block)
    };
    assert_eq!(
        calls("h"),
        vec![
            "gc_domain::services::ai_keys::list".to_owned(),
            "gc_domain::services::guard_scan::scan".to_owned()
        ]
    );
    assert_eq!(
        calls("one"),
        vec!["gc_domain::services::admin::list_users".to_owned()]
    );
    // A run handler as it was before decision 0041 (the domain's preparation, then the
    // orchestration's execute) makes two calls; as it is now, one.
    let m = module(
        "use gc_domain::policy::runs::prepare_for;\n\
         use gc_domain::services::run::{self, RunRequest};\n\
         async fn before() { let plan = caller.read(&state, |s, p| prepare_for(k, s, p)); \
         refill(&state); state.runs.execute(plan, r).await; }\n\
         fn refill(state: &S) { let _ = state.runs.quotas().refill_due(); }\n\
         async fn after() { let ran = run::run(&state.run_ports(), RunRequest { kind }).await; \
         answer(&caller, ran) }\n\
         fn answer(c: &C, ran: R) { c.authenticated(ran.principal.as_ref()); }",
    );
    let calls = |name: &str| {
        let f = m.fns().into_iter().find(|f| f.sig.ident == name).unwrap();
        m.service_calls(&f.block)
    };
    assert_eq!(
        calls("before"),
        vec![
            "gc_domain::policy::runs::prepare_for".to_owned(),
            "state.runs.execute".to_owned(),
            "state.runs.refill_due".to_owned(),
        ]
    );
    assert_eq!(
        calls("after"),
        vec!["gc_domain::services::run::run".to_owned()]
    );
    let paths =
        module("use gc_gateway::{self as gw, Gateways};\nfn f() { gw::x(); }").named_paths();
    assert!(paths.contains(&"gc_gateway".to_owned()));
    assert!(paths.contains(&"gc_gateway::Gateways".to_owned()));
}
