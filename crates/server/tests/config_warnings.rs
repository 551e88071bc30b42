//! Start-up warnings about configuration (issue 31): a mistyped `GC_*` variable in `.env` or in
//! the environment is named with the closest known one, and text logs written to a pipe (not a
//! terminal) carry no colour codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use gc_persistence::testing::fresh_sqlite_url;

const BIN: &str = env!("CARGO_BIN_EXE_gc-server");

#[test]
fn mistyped_variables_are_named_with_the_closest_known_one_in_plain_text() {
    let (url, dir) = fresh_sqlite_url();
    let work = std::env::temp_dir().join(format!("gc-config-warnings-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        work.join(".env"),
        "GC_GATWAY_AIHK_URL=http://127.0.0.1:9/v1\nGC_LOG=info\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("migrate")
        .current_dir(&work)
        .env_clear()
        .env("GC_DATABASE_URL", &url)
        .env("GC_BCRYPT_COTS", "4")
        .env(
            "GC_MASTER_KEY",
            "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        )
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&work);
    drop(dir);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr
            .contains("GC_GATWAY_AIHK_URL (in .env) is ignored; did you mean GC_GATEWAY_AIHK_URL?"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "GC_BCRYPT_COTS (in the environment) is ignored; did you mean GC_BCRYPT_COST?"
        ),
        "{stderr}"
    );
    // Known variables are not warned about.
    assert!(!stderr.contains("GC_LOG ("), "{stderr}");
    assert!(!stderr.contains("GC_DATABASE_URL ("), "{stderr}");
    // Standard error is a pipe here: no escape sequences.
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes in a piped log: {stderr:?}"
    );
}
