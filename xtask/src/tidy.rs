//! Tidy: invariants of the whole workspace that no compiler checks, run
//! under plain `cargo test` (as rust-analyzer's `xtask/src/tidy.rs` does).
//! Each check is its own test and names every offending file.

use std::path::{Path, PathBuf};

use crate::backend::workspace_root;

/// Crates `flowstate-core` must not depend on: anything that does I/O.
const IO_CRATES: &[&str] = &[
    "tokio",
    "async-std",
    "smol",
    "mio",
    "diesel",
    "diesel-async",
    "diesel_migrations",
    "deadpool",
    "sqlx",
    "mysql",
    "mysql_async",
    "mysqlclient-sys",
    "postgres",
    "tokio-postgres",
    "pq-sys",
    "sqlite",
    "libsqlite3-sys",
    "rusqlite",
    "hyper",
    "reqwest",
];

/// Every `.rs` file of the workspace, `target*` and hidden folders left out.
fn rust_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && !name.starts_with("target") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&workspace_root(), &mut files);
    files.sort();
    assert!(
        files.len() > 10,
        "tidy found only {} .rs files: is the root right?",
        files.len()
    );
    files
}

/// The workspace members, read from the root `Cargo.toml`.
fn members() -> Vec<String> {
    let manifest = read(&workspace_root().join("Cargo.toml"));
    let start = manifest
        .find("members")
        .expect("the root Cargo.toml lists members");
    let list = &manifest[start..];
    let list =
        &list[list.find('[').expect("members = [")..=list.find(']').expect("members = [...]")];
    let members: Vec<String> = list
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    assert!(!members.is_empty(), "no members read from {list}");
    members
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

fn shown(path: &Path) -> String {
    path.strip_prefix(workspace_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Fails listing `offenders`, if there are any.
fn check(offenders: &[String], what: &str) {
    assert!(
        offenders.is_empty(),
        "{what}:\n  {}",
        offenders.join("\n  ")
    );
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let offenders: Vec<String> = rust_files()
        .iter()
        .filter(|path| !read(path).starts_with("//!"))
        .map(|path| shown(path))
        .collect();
    check(&offenders, "these files do not start with a `//!` doc");
}

#[test]
fn no_test_is_ignored_and_nothing_is_left_undone() {
    // Spelled in pieces so this file does not trip its own check.
    let needles = [
        concat!("#[", "ignore"),
        concat!("todo", "!("),
        concat!("unimplemented", "!("),
    ];
    let mut offenders = Vec::new();
    for path in rust_files() {
        for (number, line) in read(&path).lines().enumerate() {
            if let Some(needle) = needles.iter().find(|n| line.contains(*n)) {
                offenders.push(format!("{}:{}: {needle}", shown(&path), number + 1));
            }
        }
    }
    check(&offenders, "no ignored tests, no todo or unimplemented");
}

/// The dependency names of the sections of `manifest` that ship with the
/// crate: `[dependencies]`, `[build-dependencies]` and their `target.*`
/// forms (`[dev-dependencies]` do not ship).
fn shipped_dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut shipping = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            let section = line.trim_matches(['[', ']']);
            shipping = section.ends_with("dependencies") && !section.ends_with("dev-dependencies");
            // `[dependencies.tokio]` names one dependency in the header.
            if let Some((_, name)) = section.split_once("dependencies.") {
                if !section.contains("dev-dependencies.") {
                    names.push(name.trim_matches('"').to_owned());
                }
            }
        } else if shipping && !line.starts_with('#') {
            if let Some((key, _)) = line.split_once('=') {
                let key = key.trim().split('.').next().unwrap_or_default();
                names.push(key.trim_matches('"').to_owned());
            }
        }
    }
    names
}

#[test]
fn core_depends_on_no_io_crate() {
    let path = workspace_root().join("core/Cargo.toml");
    let offenders: Vec<String> = shipped_dependencies(&read(&path))
        .into_iter()
        .filter(|dep| IO_CRATES.contains(&dep.as_str()))
        .map(|dep| format!("core/Cargo.toml depends on {dep}"))
        .collect();
    check(
        &offenders,
        "flowstate-core must not do I/O, so it must not depend on an I/O crate",
    );
}

#[test]
fn the_dependency_reader_sees_every_form() {
    let manifest = "[dependencies]\nserde.workspace = true\ntokio = \"1\"\n[dependencies.diesel]\nversion = \"2\"\n\
                    [dev-dependencies]\nproptest = \"1\"\n[target.'cfg(unix)'.dependencies]\nmio = \"1\"\n";
    assert_eq!(
        shipped_dependencies(manifest),
        ["serde", "tokio", "diesel", "mio"]
    );
}

#[test]
fn every_crate_uses_the_workspace_lints() {
    let offenders: Vec<String> = members()
        .iter()
        .map(|member| workspace_root().join(member).join("Cargo.toml"))
        .filter(|path| {
            let lines: Vec<String> = read(path).lines().map(|l| l.trim().to_owned()).collect();
            !lines
                .windows(2)
                .any(|w| w[0] == "[lints]" && w[1].replace(' ', "") == "workspace=true")
        })
        .map(|path| shown(&path))
        .collect();
    check(
        &offenders,
        "these manifests lack `[lints]\\nworkspace = true`",
    );
}

#[test]
fn every_member_exists_with_its_own_crate_doc() {
    let mut offenders = Vec::new();
    for member in members() {
        let dir = workspace_root().join(&member);
        if !dir.join("Cargo.toml").is_file() {
            offenders.push(format!("{member}: no Cargo.toml"));
            continue;
        }
        let Some(root) = ["src/lib.rs", "src/main.rs"]
            .iter()
            .map(|f| dir.join(f))
            .find(|p| p.is_file())
        else {
            offenders.push(format!("{member}: no src/lib.rs or src/main.rs"));
            continue;
        };
        let text = read(&root);
        if !text.starts_with("//!") {
            offenders.push(format!(
                "{}: the crate doc must come first, as `//!` lines",
                shown(&root)
            ));
        }
        if text.contains("include_str!(") && text.contains("README") {
            offenders.push(format!(
                "{}: the crate doc is written here, not included from a README",
                shown(&root)
            ));
        }
    }
    check(
        &offenders,
        "every member needs its folder, a manifest and a crate doc of its own",
    );
}

/// Crates that are PostgreSQL or MySQL drivers.
const SERVER_DRIVERS: &[&str] = &[
    "tokio-postgres",
    "postgres-protocol",
    "mysql_async",
    "mysql_common",
    "pq-sys",
    "mysqlclient-sys",
];

/// The normal dependencies of `flowstate-store-diesel` built with `features`
/// alone, one crate name a line, as `cargo tree` resolves them.
fn store_dependencies(features: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = std::process::Command::new(cargo)
        .current_dir(workspace_root())
        .args([
            "tree",
            "-q",
            "-p",
            "flowstate-store-diesel",
            "--no-default-features",
            "--features",
            features,
        ])
        .args(["-e", "normal", "--prefix", "none", "--format", "{p}"])
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn a_sqlite_only_build_compiles_no_server_driver() {
    let sqlite_only = store_dependencies("sqlite");
    let drivers: Vec<String> = sqlite_only
        .iter()
        .filter(|name| SERVER_DRIVERS.contains(&name.as_str()))
        .cloned()
        .collect();
    check(
        &drivers,
        "server drivers in a build of flowstate-store-diesel with only `sqlite`",
    );
    assert!(
        sqlite_only.iter().any(|name| name == "libsqlite3-sys"),
        "the sqlite build has no SQLite"
    );
    // The check can fail: the postgres build does pull its driver in.
    assert!(
        store_dependencies("postgres")
            .iter()
            .any(|name| name == "tokio-postgres"),
        "the postgres build lists no tokio-postgres: the check above proves nothing"
    );
}
