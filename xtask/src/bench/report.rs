//! What a bench run found, as one value: printed as the side-by-side table,
//! written with `--json FILE`, and read back by `--compare FILE` to print
//! this run's medians against an earlier run's.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::contention::Contention;
use super::statements::{Counted, OPERATIONS};

/// The rounds of one (column, worker count) pair, in steps per second.
#[derive(Clone, Debug, PartialEq)]
pub struct Rounds {
    /// Workers (and connections).
    pub workers: usize,
    /// Steps per second, one entry per round, in the order they ran.
    pub per_second: Vec<f64>,
}

impl Rounds {
    /// The median round (the mean of the middle two for an even count).
    pub fn median(&self) -> f64 {
        let mut sorted = self.per_second.clone();
        sorted.sort_by(f64::total_cmp);
        match sorted.len() {
            0 => 0.0,
            n if n % 2 == 1 => sorted[n / 2],
            n => f64::midpoint(sorted[n / 2 - 1], sorted[n / 2]),
        }
    }

    /// The slowest round.
    pub fn min(&self) -> f64 {
        self.per_second
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min)
    }

    /// The fastest round.
    pub fn max(&self) -> f64 {
        self.per_second.iter().copied().fold(0.0, f64::max)
    }
}

/// One column of the table: a dialect, or the hand-written baseline.
#[derive(Debug)]
pub struct Column {
    /// `sqlite`, `postgres`, `mysql` or `pg hand SQL`.
    pub label: String,
    /// Claim + succeed per worker count, or why it failed.
    pub throughput: Result<Vec<Rounds>>,
    /// The contention race, where the column runs one.
    pub contention: Option<Result<Contention>>,
    /// What each hot operation sent, or why counting failed.
    pub statements: Result<Vec<Counted>>,
    /// Batched mode only: every statement its rounds sent (claims, flushes,
    /// the empty claim that finds the queue drained), over the steps they
    /// processed.
    pub statements_per_step: Option<f64>,
    /// The other workloads measured on this column's database (run
    /// leases, events), in print order.
    pub workloads: Vec<Workload>,
}

/// One workload beside claim + succeed, per worker count.
#[derive(Debug)]
pub struct Workload {
    /// What it does and in which unit, as the table's section title.
    pub title: &'static str,
    /// Its rounds per worker count (items per second), or why it failed.
    pub rounds: Result<Vec<Rounds>>,
}

/// A workload's median against the claim + succeed median of the same
/// column and worker count ([`Report::step_ratios`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StepRatio {
    /// The column (dialect).
    pub column: String,
    /// The workload's title.
    pub title: &'static str,
    /// Workers (and connections).
    pub workers: usize,
    /// The workload's median, items per second.
    pub workload: f64,
    /// Claim + succeed's median, steps per second.
    pub per_step: f64,
}

impl StepRatio {
    /// The workload's rate over the step rate.
    pub fn ratio(&self) -> f64 {
        self.workload / self.per_step.max(f64::MIN_POSITIVE)
    }

    /// The goal issue 31 sets this workload: run leases at least 0.8x
    /// the step rate, events at least 0.5x.
    pub fn goal(&self) -> Option<f64> {
        if self.title.starts_with("run leases") {
            Some(0.8)
        } else if self.title.starts_with("events") {
            Some(0.5)
        } else {
            None
        }
    }

    /// One line: the column, the workload by its title's part before the
    /// colon, the medians, their ratio and the goal.
    pub fn line(&self) -> String {
        let short = self.title.split(':').next().unwrap_or(self.title);
        let goal = self
            .goal()
            .map_or(String::new(), |g| format!(" (goal: at least {g:.2}x)"));
        format!(
            "{} {short} / per step, {} workers, medians {:.0} / {:.0}: {:.2}x{goal}",
            self.column,
            self.workers,
            self.workload,
            self.per_step,
            self.ratio()
        )
    }
}

/// The rounds of workload `title` in `column`, if it ran that workload.
fn workload_of<'c>(column: &'c Column, title: &str) -> Option<&'c Result<Vec<Rounds>>> {
    column
        .workloads
        .iter()
        .find(|w| w.title == title)
        .map(|w| &w.rounds)
}

/// The JSON of rounds per worker count.
fn rounds_json(all: &[Rounds]) -> Vec<Value> {
    all.iter()
        .map(|r| {
            json!({
                "workers": r.workers,
                "rounds": r.per_second,
                "median": r.median(),
                "min": r.min(),
                "max": r.max(),
            })
        })
        .collect()
}

impl Column {
    /// A column of claim + succeed rounds alone (a baseline, a peer, a
    /// batched mode): no contention, statements or workloads of its own.
    pub fn rounds(label: &str, throughput: Result<Vec<Rounds>>) -> Self {
        Self {
            label: label.to_owned(),
            throughput,
            contention: None,
            statements: Ok(Vec::new()),
            statements_per_step: None,
            workloads: Vec::new(),
        }
    }

    /// The failures of this column, one line each.
    pub fn failures(&self) -> Vec<String> {
        let label = &self.label;
        let mut out = Vec::new();
        if let Err(err) = &self.throughput {
            out.push(format!("{label} throughput: {err:#}"));
        }
        if let Some(Err(err)) = &self.contention {
            out.push(format!("{label} contention: {err:#}"));
        }
        if let Err(err) = &self.statements {
            out.push(format!("{label} statements: {err:#}"));
        }
        for workload in &self.workloads {
            if let Err(err) = &workload.rounds {
                out.push(format!("{label} {}: {err:#}", workload.title));
            }
        }
        out
    }
}

/// A whole bench run.
#[derive(Debug)]
pub struct Report {
    /// Steps claimed and succeeded per round.
    pub steps: usize,
    /// Rounds per worker count.
    pub rounds: usize,
    /// The columns, in print order.
    pub columns: Vec<Column>,
    /// The pairs of column labels whose rounds were taken in turn, `(ours,
    /// theirs)`: their round-by-round ratios ([`Report::paired_rounds`])
    /// are printed under the table and written in the JSON.
    pub pairs: Vec<(String, String)>,
    /// What `--backlog` seeded on each dialect, as JSON.
    pub backlogs: Vec<Value>,
    /// What `--soak` found on each dialect, as JSON.
    pub soaks: Vec<Value>,
    /// The pairs of columns whose rounds of one workload (by its title)
    /// were taken in turn, `(ours, theirs, title)`: their ratios
    /// ([`Report::paired_workload_rounds`]) are printed and written as
    /// [`Report::pairs`]' are, with the workload named.
    pub workload_pairs: Vec<(String, String, &'static str)>,
    /// What `--galera` found beside its rounds (the cluster, its settings,
    /// the conflicts retried and surfaced, the nodes' counters), as JSON.
    pub galera: Option<Value>,
}

impl Report {
    /// The report as JSON, for `--json FILE` (failed measurements are left
    /// out; their errors are in the `errors` list).
    pub fn to_json(&self) -> Value {
        let columns: Vec<Value> = self
            .columns
            .iter()
            .map(|c| {
                let throughput: Vec<Value> = c
                    .throughput
                    .as_ref()
                    .map_or(Vec::new(), |all| rounds_json(all));
                let workloads: serde_json::Map<String, Value> = c
                    .workloads
                    .iter()
                    .filter_map(|w| {
                        let all = w.rounds.as_ref().ok()?;
                        Some((w.title.to_owned(), json!(rounds_json(all))))
                    })
                    .collect();
                let statements: serde_json::Map<String, Value> = c.statements.as_ref().map_or_else(
                    |_| serde_json::Map::new(),
                    |all| {
                        all.iter()
                            .map(|s| (s.operation.to_owned(), json!(s.statements.len())))
                            .collect()
                    },
                );
                let contention = match &c.contention {
                    Some(Ok(race)) => json!({
                        "workers": race.workers,
                        "steps": race.steps,
                        "claims": race.claims,
                        "wins": race.wins,
                        "seconds": race.elapsed.as_secs_f64(),
                    }),
                    _ => Value::Null,
                };
                json!({
                    "label": c.label,
                    "throughput": throughput,
                    "contention": contention,
                    "statements": statements,
                    "statements_per_step": c.statements_per_step,
                    "workloads": workloads,
                    "errors": c.failures(),
                })
            })
            .collect();
        let ratio = |ours: &str, theirs: &str, workload: Option<&str>, ratios: Rounds| {
            let mut entry = json!({
                "ours": ours,
                "theirs": theirs,
                "workers": ratios.workers,
                "rounds": ratios.per_second,
                "median": ratios.median(),
                "min": ratios.min(),
                "max": ratios.max(),
            });
            if let Some(title) = workload {
                entry["workload"] = json!(title);
            }
            entry
        };
        let mut ratios: Vec<Value> = self
            .pairs
            .iter()
            .flat_map(|(ours, theirs)| {
                self.paired_rounds(ours, theirs)
                    .into_iter()
                    .map(|ratios| ratio(ours, theirs, None, ratios))
            })
            .collect();
        for (ours, theirs, title) in &self.workload_pairs {
            ratios.extend(
                self.paired_workload_rounds(ours, theirs, title)
                    .into_iter()
                    .map(|ratios| ratio(ours, theirs, Some(title), ratios)),
            );
        }
        let step_ratios: Vec<Value> = self
            .step_ratios()
            .iter()
            .map(|r| {
                json!({
                    "column": r.column,
                    "workload": r.title,
                    "workers": r.workers,
                    "workload_median": r.workload,
                    "per_step_median": r.per_step,
                    "ratio": r.ratio(),
                    "goal": r.goal(),
                })
            })
            .collect();
        json!({
            "build": if cfg!(debug_assertions) { "debug" } else { "release" },
            "steps": self.steps,
            "rounds": self.rounds,
            "columns": columns,
            "ratios": ratios,
            "workload_step_ratios": step_ratios,
            "backlogs": self.backlogs,
            "soaks": self.soaks,
            "galera": self.galera,
        })
    }

    /// Writes [`Report::to_json`] to `path`.
    pub fn write_json(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(&self.to_json())?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// `ours` against `theirs`, column labels whose rounds were taken in
    /// turn (`bench::interleaved`): for each worker count both measured,
    /// the ratio of each round of `ours` to the round of `theirs` taken
    /// beside it. Empty when either column is missing or failed.
    pub fn paired_rounds(&self, ours: &str, theirs: &str) -> Vec<Rounds> {
        let rounds = |label: &str| {
            self.columns
                .iter()
                .find(|c| c.label == label)
                .and_then(|c| c.throughput.as_ref().ok())
        };
        match (rounds(ours), rounds(theirs)) {
            (Some(ours), Some(theirs)) => pair_rounds(ours, theirs),
            _ => Vec::new(),
        }
    }

    /// [`Report::paired_rounds`] of workload `title` in columns `ours` and
    /// `theirs`.
    pub fn paired_workload_rounds(&self, ours: &str, theirs: &str, title: &str) -> Vec<Rounds> {
        let rounds = |label: &str| {
            let column = self.columns.iter().find(|c| c.label == label)?;
            workload_of(column, title)?.as_ref().ok()
        };
        match (rounds(ours), rounds(theirs)) {
            (Some(ours), Some(theirs)) => pair_rounds(ours, theirs),
            _ => Vec::new(),
        }
    }

    /// Each workload of each column against that column's claim + succeed,
    /// for each worker count both measured: their medians (taken in
    /// different sections of the run, so not paired round by round).
    pub fn step_ratios(&self) -> Vec<StepRatio> {
        let mut out = Vec::new();
        for column in &self.columns {
            let Ok(steps) = &column.throughput else {
                continue;
            };
            for workload in &column.workloads {
                let Ok(rounds) = &workload.rounds else {
                    continue;
                };
                for r in rounds {
                    let Some(step) = steps.iter().find(|s| s.workers == r.workers) else {
                        continue;
                    };
                    out.push(StepRatio {
                        column: column.label.clone(),
                        title: workload.title,
                        workers: r.workers,
                        workload: r.median(),
                        per_step: step.median(),
                    });
                }
            }
        }
        out
    }

    /// [`Report::paired_rounds`] as one line per worker count, with the
    /// median, min and max of the ratios.
    pub fn paired_ratios(&self, ours: &str, theirs: &str) -> Vec<String> {
        ratio_lines(
            &format!("{ours} / {theirs}"),
            &self.paired_rounds(ours, theirs),
        )
    }

    /// [`Report::paired_workload_rounds`] as lines, as
    /// [`Report::paired_ratios`]; the workload named by its title's part
    /// before the colon (`run leases`, `events`).
    pub fn paired_workload_ratios(&self, ours: &str, theirs: &str, title: &str) -> Vec<String> {
        let short = title.split(':').next().unwrap_or(title);
        ratio_lines(
            &format!("{ours} / {theirs} ({short})"),
            &self.paired_workload_rounds(ours, theirs, title),
        )
    }

    /// The side-by-side table, and with `verbose` the SQL of each operation.
    pub fn table(&self, verbose: bool) -> String {
        const W: usize = 18;
        let mut out = String::new();
        let mut row = |label: &str, cells: Vec<String>| {
            if cells.is_empty() {
                let _ = writeln!(out, "{label}");
                return;
            }
            let _ = write!(out, "{label:<34}");
            for cell in cells {
                let _ = write!(out, "{cell:>W$}");
            }
            out.push('\n');
        };
        row("", self.columns.iter().map(|c| c.label.clone()).collect());
        let mut workers: Vec<usize> = self
            .columns
            .iter()
            .filter_map(|c| c.throughput.as_ref().ok())
            .flatten()
            .map(|r| r.workers)
            .collect();
        workers.sort_unstable();
        workers.dedup();
        let title = format!(
            "claim + succeed, steps/s, {} round{} of {} steps",
            self.rounds,
            if self.rounds == 1 { "" } else { "s" },
            self.steps
        );
        row(&title, Vec::new());
        for n in workers {
            let cell = |c: &Column, f: &dyn Fn(&Rounds) -> String| match &c.throughput {
                Ok(all) => all
                    .iter()
                    .find(|r| r.workers == n)
                    .map_or("-".to_owned(), f),
                Err(_) => "error".to_owned(),
            };
            let cells = |f: &dyn Fn(&Rounds) -> String| {
                self.columns.iter().map(|c| cell(c, f)).collect::<Vec<_>>()
            };
            row(
                &format!("  {n} workers, median"),
                cells(&|r| format!("{:.0}", r.median())),
            );
            row(
                "    min-max",
                cells(&|r| format!("{:.0}-{:.0}", r.min(), r.max())),
            );
        }
        if let Some(Some(Ok(race))) = self.columns.iter().map(|c| c.contention.as_ref()).next() {
            row(
                &format!("contention: {} workers, {} steps", race.workers, race.steps),
                Vec::new(),
            );
        }
        row(
            "  wins (each step exactly once)",
            self.columns
                .iter()
                .map(|c| match &c.contention {
                    Some(Ok(race)) => race.wins.to_string(),
                    Some(Err(_)) => "error".to_owned(),
                    None => "-".to_owned(),
                })
                .collect(),
        );
        row(
            "  claims/s (wins and losses)",
            self.columns
                .iter()
                .map(|c| match &c.contention {
                    Some(Ok(race)) => format!("{:.0}", race.claims_per_second()),
                    Some(Err(_)) => "error".to_owned(),
                    None => "-".to_owned(),
                })
                .collect(),
        );
        row("statements per operation (BEGIN, COMMIT count)", Vec::new());
        for operation in OPERATIONS {
            row(
                &format!("  {operation}"),
                self.columns
                    .iter()
                    .map(|c| match &c.statements {
                        Ok(counted) => counted
                            .iter()
                            .find(|s| s.operation == operation)
                            .map_or("-".to_owned(), |s| s.statements.len().to_string()),
                        Err(_) => "error".to_owned(),
                    })
                    .collect(),
            );
        }
        if self.columns.iter().any(|c| c.statements_per_step.is_some()) {
            row(
                "statements per step (batched mode)",
                self.columns
                    .iter()
                    .map(|c| {
                        c.statements_per_step
                            .map_or("-".to_owned(), |n| format!("{n:.4}"))
                    })
                    .collect(),
            );
        }
        let titles: Vec<&str> = self
            .columns
            .iter()
            .flat_map(|c| c.workloads.iter().map(|w| w.title))
            .fold(Vec::new(), |mut seen, title| {
                if !seen.contains(&title) {
                    seen.push(title);
                }
                seen
            });
        for title in titles {
            row(title, Vec::new());
            let of = |c| workload_of(c, title);
            let mut counts: Vec<usize> = self
                .columns
                .iter()
                .filter_map(|c| of(c)?.as_ref().ok())
                .flatten()
                .map(|r| r.workers)
                .collect();
            counts.sort_unstable();
            counts.dedup();
            for n in counts {
                let cells = self
                    .columns
                    .iter()
                    .map(|c| match of(c) {
                        Some(Ok(all)) => all
                            .iter()
                            .find(|r| r.workers == n)
                            .map_or("-".to_owned(), |r| format!("{:.0}", r.median())),
                        Some(Err(_)) => "error".to_owned(),
                        None => "-".to_owned(),
                    })
                    .collect();
                row(&format!("  {n} workers, median"), cells);
            }
        }
        for column in &self.columns {
            for failure in column.failures() {
                let _ = writeln!(out, "{failure}");
            }
        }
        if verbose {
            for column in &self.columns {
                let Ok(counted) = &column.statements else {
                    continue;
                };
                let _ = writeln!(out, "\n{}: the SQL of each operation", column.label);
                for c in counted {
                    let _ = writeln!(out, "  {}:", c.operation);
                    for sql in &c.statements {
                        let sql = sql.split_whitespace().collect::<Vec<_>>().join(" ");
                        let _ = writeln!(out, "    {sql}");
                    }
                }
            }
        }
        out
    }
}

/// For each worker count both measured, the ratio of each round of `ours`
/// to the round of `theirs` taken beside it.
fn pair_rounds(ours: &[Rounds], theirs: &[Rounds]) -> Vec<Rounds> {
    ours.iter()
        .filter_map(|mine| {
            let other = theirs.iter().find(|r| r.workers == mine.workers)?;
            let ratios = Rounds {
                workers: mine.workers,
                per_second: mine
                    .per_second
                    .iter()
                    .zip(&other.per_second)
                    .map(|(a, b)| a / b.max(f64::MIN_POSITIVE))
                    .collect(),
            };
            (!ratios.per_second.is_empty()).then_some(ratios)
        })
        .collect()
}

/// Paired ratios as lines: `what`, the worker count, the median, min and
/// max, and each round's.
fn ratio_lines(what: &str, paired: &[Rounds]) -> Vec<String> {
    paired
        .iter()
        .map(|ratios| {
            let each: Vec<String> = ratios
                .per_second
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect();
            format!(
                "{what}, {} workers, round by round: {:.2}x ({:.2}-{:.2}; {})",
                ratios.workers,
                ratios.median(),
                ratios.min(),
                ratios.max(),
                each.join(" ")
            )
        })
        .collect()
}

/// This run's medians against an earlier run's (`--compare FILE`): one
/// line per (column, workers) both runs measured, and every statement count
/// that changed.
pub fn compare(now: &Value, then: &Value) -> String {
    let mut out = String::new();
    let columns = |report: &Value| report["columns"].as_array().cloned().unwrap_or_default();
    let _ = writeln!(
        out,
        "{:<34}{:>14}{:>14}{:>10}",
        "compared with the earlier run", "then", "now", "now/then"
    );
    for column in columns(now) {
        let label = column["label"].as_str().unwrap_or("?");
        let Some(earlier) = columns(then)
            .into_iter()
            .find(|c| c["label"].as_str() == Some(label))
        else {
            let _ = writeln!(out, "  {label}: not in the earlier run");
            continue;
        };
        for entry in column["throughput"].as_array().into_iter().flatten() {
            let workers = entry["workers"].as_u64();
            let before = earlier["throughput"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e["workers"].as_u64() == workers);
            let (Some(now), Some(then)) = (
                entry["median"].as_f64(),
                before.and_then(|e| e["median"].as_f64()),
            ) else {
                continue;
            };
            let _ = writeln!(
                out,
                "  {:<32}{then:>14.0}{now:>14.0}{:>10.2}",
                format!("{label}, {} workers", workers.unwrap_or(0)),
                now / then.max(1e-9),
            );
        }
        let per_step = |c: &Value| c["statements_per_step"].as_f64();
        if let (Some(now), Some(then)) = (per_step(&column), per_step(&earlier)) {
            let _ = writeln!(
                out,
                "  {:<32}{then:>14.4}{now:>14.4}{:>10.2}",
                format!("{label}, statements per step"),
                now / then.max(1e-9),
            );
        }
        if let Some(counts) = column["statements"].as_object() {
            for (operation, count) in counts {
                let before = &earlier["statements"][operation];
                if !before.is_null() && before != count {
                    let _ = writeln!(
                        out,
                        "  {label}, {operation}: {before} statements then, {count} now"
                    );
                }
            }
        }
    }
    out
}

/// Reads a report written by `--json`.
pub fn read_json(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a bench report", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rounds(per_second: &[f64]) -> Rounds {
        Rounds {
            workers: 8,
            per_second: per_second.to_vec(),
        }
    }

    #[test]
    #[expect(clippy::float_cmp, reason = "whole numbers and halves are exact")]
    fn median_min_and_max_of_rounds() {
        let odd = rounds(&[300.0, 100.0, 200.0]);
        assert_eq!((odd.median(), odd.min(), odd.max()), (200.0, 100.0, 300.0));
        let even = rounds(&[400.0, 100.0, 300.0, 200.0]);
        assert_eq!(even.median(), 250.0);
        assert_eq!(rounds(&[]).median(), 0.0);
    }

    fn report(median: f64, claim: usize) -> Value {
        let counted = Counted {
            operation: "claim (win)",
            statements: vec!["SELECT 1".to_owned(); claim],
        };
        Report {
            steps: 10,
            rounds: 1,
            pairs: Vec::new(),
            backlogs: Vec::new(),
            soaks: Vec::new(),
            workload_pairs: Vec::new(),
            galera: None,
            columns: vec![Column {
                label: "postgres".to_owned(),
                throughput: Ok(vec![rounds(&[median])]),
                contention: None,
                statements: Ok(vec![counted]),
                statements_per_step: None,
                workloads: Vec::new(),
            }],
        }
        .to_json()
    }

    #[test]
    fn compare_gives_the_ratio_of_medians_and_changed_counts() {
        let text = compare(&report(150.0, 1), &report(100.0, 2));
        assert!(text.contains("postgres, 8 workers"), "{text}");
        assert!(text.contains("1.50"), "{text}");
        assert!(
            text.contains("claim (win): 2 statements then, 1 now"),
            "{text}"
        );
        let same = compare(&report(100.0, 1), &report(100.0, 1));
        assert!(
            same.contains("1.00") && !same.contains("statements then"),
            "{same}"
        );
    }

    #[test]
    fn paired_ratios_divide_round_by_round() {
        let column =
            |label: &str, per_second: &[f64]| Column::rounds(label, Ok(vec![rounds(per_second)]));
        let report = Report {
            steps: 10,
            rounds: 3,
            columns: vec![
                column("postgres", &[90.0, 200.0, 50.0]),
                column("pg hand SQL", &[100.0, 200.0, 100.0]),
            ],
            pairs: vec![("postgres".to_owned(), "pg hand SQL".to_owned())],
            backlogs: Vec::new(),
            soaks: Vec::new(),
            workload_pairs: Vec::new(),
            galera: None,
        };
        assert_eq!(
            report.paired_ratios("postgres", "pg hand SQL"),
            [
                "postgres / pg hand SQL, 8 workers, round by round: 0.90x (0.50-1.00; 0.90 1.00 0.50)"
            ]
        );
        assert!(report.paired_ratios("postgres", "mysql").is_empty());
        let json = report.to_json();
        assert_eq!(json["ratios"][0]["theirs"], json!("pg hand SQL"));
        assert_eq!(json["ratios"][0]["rounds"], json!([0.9, 1.0, 0.5]));
    }

    #[test]
    fn workload_pairs_divide_round_by_round_and_name_the_workload() {
        const TITLE: &str = "run leases: claim_run + finish, runs/s";
        let column = |label: &str, per_second: &[f64]| Column {
            workloads: vec![Workload {
                title: TITLE,
                rounds: Ok(vec![rounds(per_second)]),
            }],
            ..Column::rounds(label, Ok(Vec::new()))
        };
        let report = Report {
            steps: 10,
            rounds: 2,
            columns: vec![
                column("galera", &[30.0, 50.0]),
                column("mariadb", &[100.0, 100.0]),
            ],
            pairs: Vec::new(),
            backlogs: Vec::new(),
            soaks: Vec::new(),
            workload_pairs: vec![("galera".to_owned(), "mariadb".to_owned(), TITLE)],
            galera: Some(json!({"nodes": 3})),
        };
        assert_eq!(
            report.paired_workload_ratios("galera", "mariadb", TITLE),
            [
                "galera / mariadb (run leases), 8 workers, round by round: 0.40x (0.30-0.50; 0.30 0.50)"
            ]
        );
        assert!(
            report
                .paired_workload_rounds("galera", "mariadb", "events")
                .is_empty()
        );
        let json = report.to_json();
        assert_eq!(json["ratios"][0]["workload"], json!(TITLE));
        assert_eq!(json["ratios"][0]["rounds"], json!([0.3, 0.5]));
        assert_eq!(json["galera"]["nodes"], json!(3));
    }

    #[test]
    fn workloads_are_set_against_the_step_rate_of_their_column() {
        const LEASES: &str = "run leases batched: claim_runs(32) + finish, runs/s";
        let report = Report {
            steps: 10,
            rounds: 1,
            columns: vec![
                Column {
                    workloads: vec![Workload {
                        title: LEASES,
                        rounds: Ok(vec![rounds(&[90.0])]),
                    }],
                    ..Column::rounds("postgres", Ok(vec![rounds(&[100.0])]))
                },
                Column {
                    workloads: vec![Workload {
                        title: LEASES,
                        rounds: Ok(vec![rounds(&[50.0])]),
                    }],
                    ..Column::rounds("mysql", Ok(Vec::new()))
                },
            ],
            pairs: Vec::new(),
            backlogs: Vec::new(),
            soaks: Vec::new(),
            workload_pairs: Vec::new(),
            galera: None,
        };
        let ratios = report.step_ratios();
        assert_eq!(ratios.len(), 1, "mysql measured no per-step rounds");
        assert_eq!(
            ratios[0].line(),
            "postgres run leases batched / per step, 8 workers, medians 90 / 100: 0.90x (goal: at least 0.80x)"
        );
        let json = report.to_json();
        assert_eq!(json["workload_step_ratios"][0]["ratio"], json!(0.9));
        assert_eq!(json["workload_step_ratios"][0]["goal"], json!(0.8));
    }

    #[test]
    fn json_keeps_every_round() {
        let json = report(123.0, 1);
        let column = &json["columns"][0];
        assert_eq!(column["throughput"][0]["rounds"], json!([123.0]));
        assert_eq!(column["statements"]["claim (win)"], json!(1));
        assert_eq!(column["errors"], json!([]));
    }
}
