//! [`Scenario`]: one row of the fault table (scenario x dialect: load,
//! fault, lost, doubled, stuck, time to heal), printed at the end of each
//! scenario test (seen with `--nocapture`) and appended to
//! `target/fault-report.md` (or `FLOWSTATE_FAULT_REPORT`), where CI prints
//! the table from. Remove the file before a run to start a fresh table.
//!
//! [`Scenario::finish`] then asserts what every scenario must hold: 0 lost,
//! 0 doubled, 0 stuck, healed if it measured healing, and no wrong answer.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
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
    /// Set for a scenario known to fail until a named fix lands: the row
    /// says so in capitals, and the assertions still run.
    pub expected_failure: Option<&'static str>,
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
            expected_failure: None,
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
        let mut note = self.note.replace('|', "/").replace('\n', " ");
        if let Some(until) = self.expected_failure {
            let verdict = if self.held() { "held" } else { "FAILED" };
            note = format!("EXPECTED TO FAIL until {until} ({verdict}); {note}");
        }
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

    /// Prints the row under the header and appends it to the report file.
    pub fn publish(&self) {
        let row = self.row();
        println!("\n{HEADER}{row}");
        let path = report_path();
        if let Err(err) = append(&path, &row) {
            eprintln!("cannot append to {}: {err}", path.display());
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

/// Where rows are appended: `FLOWSTATE_FAULT_REPORT`, or
/// `fault-report.md` in the workspace's target directory.
pub fn report_path() -> PathBuf {
    if let Some(path) = std::env::var_os("FLOWSTATE_FAULT_REPORT") {
        return PathBuf::from(path);
    }
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace.join("target"), |dir| workspace.join(dir));
    target.join("fault-report.md")
}

/// Appends `row` to the file at `path`, writing the header first if this
/// call creates the file; one `write` per row, so rows of tests running
/// at once do not interleave.
fn append(path: &std::path::Path, row: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if let Ok(mut new) = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        new.write_all(format!("# flowstate fault suite\n\n{HEADER}").as_bytes())?;
    }
    let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
    file.write_all(row.as_bytes())
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
    fn a_row_names_every_count_and_marks_an_expected_failure() {
        let mut scenario = Scenario::new(
            "worker killed",
            Dialect::Sqlite,
            "200 steps".into(),
            "SIGKILL".into(),
        );
        scenario.stuck = 1;
        scenario.heal = Heal::Healed(Duration::from_millis(42));
        scenario.note("running 1");
        scenario.expected_failure = Some("claim expiry");
        assert_eq!(
            scenario.row(),
            "| worker killed | sqlite | 200 steps | SIGKILL | 0 | 0 | 1 | 0 | 42 ms | \
             EXPECTED TO FAIL until claim expiry (FAILED); running 1 |\n"
        );
        assert!(!scenario.held());
        assert_eq!(table(&[scenario]).lines().count(), 3);
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
