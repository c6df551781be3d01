//! The demo on every dialect, small: `xtask demo` run as a user runs it, on
//! an SQLite file, a PostgreSQL database and a MariaDB/MySQL database of
//! the test's own (created by the demo, dropped after), asserting it exits
//! 0 with every invariant held. So the demo, the whole of flowstate working
//! together, cannot rot unnoticed.
//!
//! The servers are `FLOWSTATE_PG_URL` and `FLOWSTATE_MYSQL_URL` (defaults
//! `postgres://postgres@127.0.0.1:5432` and `mysql://root@127.0.0.1:3306`),
//! as the store's own tests read them. Databases are named `fst_demo_...`,
//! which CI drops if a run leaves one behind.

use std::process::Command;

use diesel_async::{AsyncConnection, SimpleAsyncConnection};

/// A server's base URL: its variable, else the default.
fn server(var: &str, default: &str) -> String {
    std::env::var(var)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
        .trim_end_matches('/')
        .to_owned()
}

/// A database name no other test run uses.
fn fresh_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("fst_demo_{}_{nanos}", std::process::id())
}

/// Runs a small demo on `url` (with `extra` flags) and asserts it held
/// every invariant.
fn demo(url: &str, extra: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "demo",
            "--fresh",
            "--database-url",
            url,
            "--events",
            "150",
            "--workers",
            "3",
            "--emitters",
            "2",
            "--dispatchers",
            "2",
        ])
        .args(extra)
        .env_remove("RUST_LOG")
        .output()
        .expect("xtask runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("demo OK"),
        "the demo on {url} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    for label in [
        "double executions",
        "effects repeated",
        "lost or unsettled runs",
        "events with the wrong runs",
        "orders failed",
    ] {
        // As the summary prints a row: the label, then its figure.
        let line = format!("{label:<34}{:>9}", 0);
        assert!(stdout.contains(&line), "no `{line}` in:\n{stdout}");
    }
    assert!(
        stdout.contains("(0 left stranded: must be 0)"),
        "an effect left begun and never settled:\n{stdout}"
    );
    assert!(
        stdout.contains("timeline of run"),
        "no timeline in:\n{stdout}"
    );
    // The rate a larger run is judged by, over each fifth of the work
    // (whether it slowed as it went).
    assert!(
        stdout.contains("steps/s by fifth of the work"),
        "no rates by fifth in:\n{stdout}"
    );
}

/// Drops database `name` on the server of `base` (on a runtime of its
/// own, after the demo, whatever it answered).
fn drop_database(base: &str, name: &str) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        if base.starts_with("postgres") {
            let mut conn = diesel_async::AsyncPgConnection::establish(&format!("{base}/postgres"))
                .await
                .map_err(|e| e.to_string())?;
            conn.batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                .await
                .map_err(|e| e.to_string())
        } else {
            let mut conn = diesel_async::AsyncMysqlConnection::establish(base)
                .await
                .map_err(|e| e.to_string())?;
            conn.batch_execute(&format!("DROP DATABASE IF EXISTS `{name}`"))
                .await
                .map_err(|e| e.to_string())
        }
    })
}

/// Drops the database when the test ends, failed or not (a failure to drop
/// is reported, never a second panic while the first unwinds).
struct Dropped<'a>(&'a str, &'a str);

impl Drop for Dropped<'_> {
    fn drop(&mut self) {
        if let Err(err) = drop_database(self.0, self.1) {
            eprintln!("could not drop the demo's database {}: {err}", self.1);
        }
    }
}

#[test]
fn demo_holds_every_invariant_on_sqlite() {
    let dir = std::env::temp_dir().join(fresh_name());
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let url = format!("sqlite://{}", dir.join("demo.db").display());
    demo(&url, &[]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Most orders cancelled, so the run the crash strands an effect of is
/// usually cancelled before any later attempt comes back to resolve it:
/// the demo must still settle that effect (from the provider), never
/// leave it begun.
#[test]
fn a_crashed_run_cancelled_meanwhile_leaves_no_effect_stranded_on_sqlite() {
    let dir = std::env::temp_dir().join(fresh_name());
    std::fs::create_dir_all(&dir).expect("a temporary folder");
    let url = format!("sqlite://{}", dir.join("demo.db").display());
    demo(&url, &["--cancel-percent", "90"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn demo_holds_every_invariant_on_postgres() {
    let base = server("FLOWSTATE_PG_URL", "postgres://postgres@127.0.0.1:5432");
    let name = fresh_name();
    let _dropped = Dropped(&base, &name);
    demo(&format!("{base}/{name}"), &[]);
}

#[test]
fn demo_holds_every_invariant_on_mysql() {
    let base = server("FLOWSTATE_MYSQL_URL", "mysql://root@127.0.0.1:3306");
    let name = fresh_name();
    let _dropped = Dropped(&base, &name);
    demo(&format!("{base}/{name}"), &[]);
}
