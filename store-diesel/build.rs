//! Rebuilds the crate when a migration changes, so `embed_migrations!` never
//! embeds a stale set (a folder made by `cargo xtask migrate new` included).

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
