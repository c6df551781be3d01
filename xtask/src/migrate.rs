//! `cargo xtask migrate up|down|status|new`: the schema commands.
//!
//! `up`, `down` and `status` call `flowstate_store_diesel::migrate`, which
//! applies the migrations embedded in the library itself, so the CLI and the
//! library can never disagree about the schema. `new` adds an empty
//! migration folder for every dialect, under `store-diesel/migrations/`.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use flowstate_store_diesel::{Dialect, migrate};

use crate::backend;

/// What to do to the schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Apply every pending migration.
    Up,
    /// Revert the last `steps` applied migrations.
    Down {
        /// How many.
        steps: usize,
    },
    /// List every migration, applied or pending.
    Status,
    /// Add an empty migration `name` for every dialect.
    New {
        /// The migration's name: lowercase ascii letters, digits, underscores.
        name: String,
    },
}

/// Runs `action` on `url` (default: `$DATABASE_URL`, else
/// `target/flowstate.db`).
pub async fn run(action: Action, url: Option<String>) -> Result<()> {
    if let Action::New { name } = &action {
        if url.is_some() {
            bail!("`migrate new` writes files and touches no database: drop --database-url");
        }
        return new(
            &backend::workspace_root().join("store-diesel/migrations"),
            name,
            SystemTime::now(),
        );
    }
    let url = url.unwrap_or_else(|| backend::default_url("flowstate.db"));
    let shown = backend::redact(&url);
    let on = backend::parse_url(&url)?.dialect.name();
    if action == Action::Up {
        backend::prepare(&url, false).await?;
    }
    match action {
        Action::Up => {
            println!("migrate up: {on} {shown}");
            let applied = migrate::up(&url).await.context("migrate up failed")?;
            if applied.is_empty() {
                println!("  schema is current: nothing to apply");
            }
            for version in &applied {
                println!("  applied   {version}");
            }
        }
        Action::Down { steps } => {
            println!("migrate down --steps {steps}: {on} {shown}");
            let reverted = migrate::down(&url, steps)
                .await
                .context("migrate down failed")?;
            if reverted.is_empty() {
                println!("  nothing applied: nothing to revert");
            }
            for version in &reverted {
                println!("  reverted  {version}");
            }
        }
        Action::Status => {
            println!("migrate status: {on} {shown}");
            let states = migrate::status(&url)
                .await
                .context("migrate status failed")?;
            let pending = states.iter().filter(|s| !s.applied).count();
            for state in &states {
                let mark = if state.applied { "applied" } else { "pending" };
                println!("  {mark:<9} {}", state.name);
            }
            println!(
                "  {} migrations, {} applied, {pending} pending",
                states.len(),
                states.len() - pending
            );
        }
        Action::New { .. } => unreachable!("handled above"),
    }
    Ok(())
}

/// Creates `<dir>/<dialect>/<YYYY-MM-DD-HHMMSS>_<name>/{up,down}.sql` for
/// every dialect.
fn new(dir: &Path, name: &str, now: SystemTime) -> Result<()> {
    check_name(name)?;
    for dialect in Dialect::ALL {
        let existing = std::fs::read_dir(dir.join(dialect.name()))
            .into_iter()
            .flatten()
            .flatten();
        if let Some(clash) = existing
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .find(|folder| folder.split_once('_').is_some_and(|(_, n)| n == name))
        {
            bail!("a migration named {name:?} already exists: {dialect}/{clash}");
        }
    }
    let folder = format!("{}_{name}", version_of(now));
    let mut created: Vec<PathBuf> = Vec::new();
    for dialect in Dialect::ALL {
        let path = dir.join(dialect.name()).join(&folder);
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        for (file, what) in [("up.sql", "apply"), ("down.sql", "revert what up.sql does")] {
            let text = format!("-- {name} ({dialect}): {what}.\n");
            let file = path.join(file);
            std::fs::write(&file, text)
                .with_context(|| format!("cannot write {}", file.display()))?;
            created.push(file);
        }
    }
    println!("migrate new {name}: created");
    for file in &created {
        println!(
            "  {}",
            file.strip_prefix(backend::workspace_root())
                .unwrap_or(file)
                .display()
        );
    }
    println!(
        "write the SQL for each dialect; the migrations are embedded when flowstate-store-diesel builds"
    );
    if !dir
        .parent()
        .is_some_and(|crate_dir| crate_dir.join("build.rs").exists())
    {
        println!(
            "(a new folder is not noticed by cargo on its own: `touch store-diesel/src/migrate.rs` before the next build)"
        );
    }
    Ok(())
}

/// A migration name: lowercase ascii letters, digits and underscores,
/// starting with a letter.
fn check_name(name: &str) -> Result<()> {
    let well_formed = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !well_formed {
        bail!(
            "migration name {name:?}: use lowercase ascii letters, digits and underscores, starting with a letter"
        );
    }
    Ok(())
}

/// The version diesel reads from a folder name: `YYYY-MM-DD-HHMMSS`, UTC.
fn version_of(now: SystemTime) -> String {
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}-{:02}{:02}{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn versions_are_utc_timestamps() {
        let at = |secs| version_of(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01-000000");
        assert_eq!(at(951_782_400), "2000-02-29-000000");
        assert_eq!(at(1_767_225_599), "2025-12-31-235959");
        assert_eq!(at(1_709_210_096), "2024-02-29-123456");
    }

    #[test]
    fn names_are_checked() {
        for good in ["add_leases", "v2", "a_1_b"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "Add", "2fast", "has-dash", "has space", "../up", "é"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn new_creates_both_files_for_every_dialect_and_refuses_a_clash() {
        let dir = std::env::temp_dir().join(format!("xtask-migrate-new-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let at = UNIX_EPOCH + Duration::from_secs(1_709_210_096);
        new(&dir, "add_leases", at).unwrap();
        for dialect in ["postgres", "mysql", "sqlite"] {
            for file in ["up.sql", "down.sql"] {
                let path = dir
                    .join(dialect)
                    .join("2024-02-29-123456_add_leases")
                    .join(file);
                assert!(path.is_file(), "{}", path.display());
            }
        }
        let later = at + Duration::from_secs(60);
        assert!(new(&dir, "add_leases", later).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
