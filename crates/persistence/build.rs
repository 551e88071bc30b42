//! Rebuilds the crate when a migration changes: `embed_migrations!` reads the folders at
//! compile time, and cargo does not watch them on its own.

fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
}
