//! [`Scenario`]: one row of the fault table (scenario x dialect: load,
//! fault, lost, doubled, stuck, wrong, time to heal, note), printed at the
//! end of each scenario test (seen with `--nocapture`) and written to the
//! report directory, `target/fault-report/` (or
//! `FLOWSTATE_FAULT_REPORT_DIR`): one file per row
//! (`<scenario>--<dialect>.md`) beside `00-header.md`, so that
//! `cat target/fault-report/*.md` prints the table in order.
//!
//! Every run starts a fresh table: the first row a test process publishes
//! empties the directory of what an earlier run left. After each row the
//! whole table is also written to `target/fault-report.md` (or
//! `FLOWSTATE_FAULT_REPORT`), replaced in one rename.
//!
//! [`Scenario::finish`] then asserts what every scenario must hold: 0 lost,
//! 0 doubled, 0 stuck, healed if it measured healing, and no wrong answer.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use flowstate_store_diesel::Dialect;

/// How long the store took to serve every worker again after a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heal {
    /// The scenario has no outage to heal from.
    NotMeasured,
    /// From the server (or connections) back to the first call that
    /// succeeded on every worker.
    Healed(Duration),
    /// Some worker made no successful call after the fault within this
    /// long.
    Never(Duration),
}

impl std::fmt::Display for Heal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotMeasured => f.write_str("-"),
            Self::Healed(took) => write!(f, "{} ms", took.as_millis()),
            Self::Never(waited) => write!(f, "never ({} s)", waited.as_secs()),
        }
    }
}

/// One scenario on one dialect, as it ended.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The scenario's name (`server restart under load`).
    pub name: &'static str,
    /// The dialect it ran on.
    pub dialect: Dialect,
    /// What it did (`400 steps, 8 workers`).
    pub load: String,
    /// What went wrong on purpose (`SIGKILL of the server, restart`).
    pub fault: String,
    /// Work lost: steps not succeeded at the end, or what the scenario
    /// counts as lost (a run not settled as its holder said).
    pub lost: u64,
    /// Work done twice: an attempt executed twice, a run held twice.
    pub doubled: u64,
    /// Work stuck: pending or running after the recovery pass, or a call
    /// that never answered.
    pub stuck: u64,
    /// Calls answered otherwise than the scenario allows (an untyped error
    /// where a typed one is due, a non-retryable error from an outage):
    /// listed in the note, and failing the scenario.
    pub wrong: u64,
    /// Time to heal.
    pub heal: Heal,
    /// What else to know (statuses at the end, errors seen).
    pub note: String,
}

/// The table's header and separator lines.
pub const HEADER: &str = "| scenario | dialect | load | fault | lost | doubled | stuck | wrong | time to heal | note |\n\
     | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |\n";

impl Scenario {
    /// A scenario with nothing counted yet.
    pub fn new(name: &'static str, dialect: Dialect, load: String, fault: String) -> Self {
        Self {
            name,
            dialect,
            load,
            fault,
            lost: 0,
            doubled: 0,
            stuck: 0,
            wrong: 0,
            heal: Heal::NotMeasured,
            note: String::new(),
        }
    }

    /// Appends `text` to the note.
    pub fn note(&mut self, text: impl AsRef<str>) {
        if !self.note.is_empty() {
            self.note.push_str("; ");
        }
        self.note.push_str(text.as_ref());
    }

    /// Whether it held: nothing lost, doubled, stuck or wrong, and healed
    /// if healing was measured.
    pub fn held(&self) -> bool {
        self.lost == 0
            && self.doubled == 0
            && self.stuck == 0
            && self.wrong == 0
            && !matches!(self.heal, Heal::Never(_))
    }

    /// The table row (one line, ending in a newline).
    pub fn row(&self) -> String {
        let note = self.note.replace('|', "/").replace('\n', " ");
        format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            self.name,
            self.dialect,
            self.load,
            self.fault,
            self.lost,
            self.doubled,
            self.stuck,
            self.wrong,
            self.heal,
            note.trim_end_matches("; "),
        )
    }

    /// The name of its row's file in the report directory:
    /// `<scenario>--<dialect>.md`, the scenario's name in lower case with
    /// a dash for anything not a letter or digit.
    pub fn row_file(&self) -> String {
        let mut slug = String::new();
        for c in self.name.chars() {
            if c.is_ascii_alphanumeric() {
                slug.push(c.to_ascii_lowercase());
            } else if !slug.ends_with('-') {
                slug.push('-');
            }
        }
        format!("{}--{}.md", slug.trim_matches('-'), self.dialect)
    }

    /// Prints the row under the header, writes it to the report directory
    /// and the table to the report file (see the module doc).
    pub fn publish(&self) {
        let row = self.row();
        println!("\n{HEADER}{row}");
        if let Err(err) = publish_row(&report_dir(), &report_path(), &self.row_file(), &row) {
            eprintln!("cannot write the fault report: {err}");
        }
    }

    /// Publishes the row, then fails the test unless the scenario held.
    pub fn finish(self) {
        self.publish();
        let mut failed = String::new();
        for (what, n) in [
            ("lost", self.lost),
            ("doubled", self.doubled),
            ("stuck", self.stuck),
            ("wrong answers", self.wrong),
        ] {
            if n > 0 {
                let _ = write!(failed, "{n} {what}, ");
            }
        }
        if let Heal::Never(waited) = self.heal {
            let _ = write!(failed, "not healed within {} s, ", waited.as_secs());
        }
        assert!(
            failed.is_empty(),
            "{} on {}: {}({})",
            self.name,
            self.dialect,
            failed,
            self.note
        );
    }
}

/// Publishes every scenario's row, then fails the test unless each held
/// (for a test that judges several scenarios: no row is lost to the first
/// failure).
pub fn finish_all(scenarios: &[Scenario]) {
    for scenario in scenarios {
        scenario.publish();
    }
    let failed: Vec<String> = scenarios
        .iter()
        .filter(|scenario| !scenario.held())
        .map(|scenario| {
            format!(
                "{} on {}: lost {}, doubled {}, stuck {}, wrong {}, healed {} ({})",
                scenario.name,
                scenario.dialect,
                scenario.lost,
                scenario.doubled,
                scenario.stuck,
                scenario.wrong,
                scenario.heal,
                scenario.note
            )
        })
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The target directory: `CARGO_TARGET_DIR` (relative to the workspace
/// unless absolute), or the workspace's `target`.
fn target_dir() -> PathBuf {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace.join("target"), |dir| workspace.join(dir))
}

/// Where the whole table is written: `FLOWSTATE_FAULT_REPORT`, or
/// `fault-report.md` in the target directory.
pub fn report_path() -> PathBuf {
    std::env::var_os("FLOWSTATE_FAULT_REPORT")
        .map_or_else(|| target_dir().join("fault-report.md"), PathBuf::from)
}

/// Where each row is written, one file per row:
/// `FLOWSTATE_FAULT_REPORT_DIR`, or `fault-report/` in the target
/// directory.
pub fn report_dir() -> PathBuf {
    std::env::var_os("FLOWSTATE_FAULT_REPORT_DIR")
        .map_or_else(|| target_dir().join("fault-report"), PathBuf::from)
}

/// The report directory's first file: the title and the table's header.
pub const HEADER_FILE: &str = "00-header.md";

/// Whether this process has started its table yet, and the lock every
/// write of the report takes (tests publish from several threads).
static STARTED: Mutex<bool> = Mutex::new(false);

/// Writes `row` as file `file` in `dir` and the table to `table`; the
/// first call of a process first empties `dir` of the `.md` files an
/// earlier run left, so the table holds this run's rows only.
fn publish_row(dir: &Path, table: &Path, file: &str, row: &str) -> std::io::Result<()> {
    let mut started = STARTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    std::fs::create_dir_all(dir)?;
    if !*started {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|ext| ext == "md") {
                std::fs::remove_file(&path)?;
            }
        }
        std::fs::write(
            dir.join(HEADER_FILE),
            format!("# flowstate fault suite\n\n{HEADER}"),
        )?;
        *started = true;
    }
    std::fs::write(dir.join(file), row)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    files.retain(|path| path.extension().is_some_and(|ext| ext == "md"));
    files.sort();
    let mut whole = String::new();
    for path in files {
        whole.push_str(&std::fs::read_to_string(path)?);
    }
    if let Some(parent) = table.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let partial = table.with_extension("md.partial");
    std::fs::write(&partial, whole)?;
    std::fs::rename(partial, table)
}

/// Renders `scenarios` as one table, header included.
pub fn table(scenarios: &[Scenario]) -> String {
    let mut out = String::from(HEADER);
    for scenario in scenarios {
        out.push_str(&scenario.row());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_names_every_count_and_its_file_the_scenario() {
        let mut scenario = Scenario::new(
            "worker killed mid-step",
            Dialect::Sqlite,
            "200 steps".into(),
            "SIGKILL".into(),
        );
        scenario.stuck = 1;
        scenario.heal = Heal::Healed(Duration::from_millis(42));
        scenario.note("running 1 | or 2");
        assert_eq!(
            scenario.row(),
            "| worker killed mid-step | sqlite | 200 steps | SIGKILL | 0 | 0 | 1 | 0 | 42 ms | \
             running 1 / or 2 |\n"
        );
        assert_eq!(scenario.row_file(), "worker-killed-mid-step--sqlite.md");
        assert!(!scenario.held());
        assert_eq!(table(&[scenario]).lines().count(), 3);
    }

    #[test]
    fn a_run_starts_a_fresh_table_and_keeps_its_rows_in_order() {
        let scratch = std::env::temp_dir().join(format!(
            "flowstate-faults-report-{}",
            uuid::Uuid::now_v7().simple()
        ));
        let dir = scratch.join("rows");
        let table = scratch.join("table.md");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("old--postgres.md"), "| an earlier run |\n").unwrap();
        std::fs::write(dir.join("keep.txt"), "not a row").unwrap();
        // This process has not published yet: the first row clears the
        // earlier run's rows (a unit-test process publishes nothing else).
        publish_row(&dir, &table, "b--sqlite.md", "| b |\n").unwrap();
        publish_row(&dir, &table, "a--mysql.md", "| a |\n").unwrap();
        let whole = std::fs::read_to_string(&table).unwrap();
        assert_eq!(
            whole,
            format!("# flowstate fault suite\n\n{HEADER}| a |\n| b |\n")
        );
        assert!(!dir.join("old--postgres.md").exists());
        assert!(dir.join("keep.txt").exists());
        std::fs::remove_dir_all(&scratch).unwrap();
    }

    #[test]
    fn a_scenario_that_never_healed_did_not_hold() {
        let mut scenario = Scenario::new("x", Dialect::Mysql, String::new(), String::new());
        assert!(scenario.held());
        scenario.heal = Heal::Never(Duration::from_secs(20));
        assert!(!scenario.held());
        assert_eq!(scenario.heal.to_string(), "never (20 s)");
    }
}
