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
    let src = root().join("crates/http-api/src");
    let openapi = std::fs::read_to_string(src.join("openapi.rs")).unwrap();
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
            let entry = format!("{module}::{name},");
            assert!(
                openapi.contains(&entry),
                "{entry} is missing from openapi.rs paths(...)"
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
