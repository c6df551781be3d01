//! The demo's end: the store read back and checked against what ran, the
//! summary printed, and the verdict.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use flowstate_core::ports::{RunStore, StepStore};
use flowstate_core::{RunStatus, StepStatus};
use flowstate_store_diesel::DieselStore;

use super::dispatch::Tally;
use super::ledger::Totals;
use super::worker::Job;

/// What the store holds once the work is over.
#[derive(Debug, Default)]
pub struct Check {
    /// Runs not completed, or with a step not succeeded.
    pub unfinished: usize,
    /// Steps whose attempt count or history differs from what ran.
    pub disagreements: Vec<String>,
}

/// Reads every run back: completed, every step succeeded in the attempt the
/// ledger expects, and one history row per attempt.
pub async fn verify(store: &DieselStore, jobs: &[Arc<Job>], runs: usize) -> Result<Check> {
    let mut check = Check::default();
    let mut by_run: Vec<Vec<&Job>> = vec![Vec::new(); runs];
    for job in jobs {
        by_run[job.run_index].push(job);
    }
    for group in by_run.iter().filter(|g| !g.is_empty()) {
        let run = group[0].run;
        let steps = store.list_steps(run).await.context("reading steps back")?;
        let history = store
            .step_history(run)
            .await
            .context("reading history back")?;
        let status = store
            .get_run(run)
            .await
            .context("reading the run back")?
            .status;
        let all_succeeded =
            steps.len() == group.len() && steps.iter().all(|s| s.status == StepStatus::Succeeded);
        if status != RunStatus::Completed || !all_succeeded {
            check.unfinished += 1;
        }
        for job in group {
            let expected = if job.flaky { 2 } else { 1 };
            let Some(step) = steps.iter().find(|s| s.name == job.name) else {
                check
                    .disagreements
                    .push(format!("run {run}: step {} missing", job.name));
                continue;
            };
            let rows = history.iter().filter(|h| h.step == step.id).count();
            if step.attempt != expected || rows != expected as usize {
                check.disagreements.push(format!(
                    "run {run} step {}: attempt {} with {rows} history rows, expected {expected}",
                    job.name, step.attempt
                ));
            }
        }
    }
    Ok(check)
}

/// Everything the demo counted and found.
pub struct Summary {
    /// Runs created.
    pub runs: usize,
    /// Steps created.
    pub steps: usize,
    /// Steps whose first attempt fails.
    pub flaky: usize,
    /// Runs the completer marked completed.
    pub completed: u64,
    /// What the dispatcher counted.
    pub tally: Tally,
    /// What the ledger counted.
    pub totals: Totals,
    /// What the store held afterwards.
    pub check: Check,
    /// How long claiming and completing took.
    pub elapsed: Duration,
}

impl Summary {
    /// Prints the summary table, then the first errors found.
    pub fn print(&self, completion_errors: &[String]) {
        let secs = self.elapsed.as_secs_f64();
        let t = &self.tally;
        println!("summary");
        println!("  runs                          {:>8}", self.runs);
        println!("  runs completed                {:>8}", self.completed);
        println!(
            "  runs unfinished               {:>8}   (must be 0)",
            self.check.unfinished
        );
        println!("  steps                         {:>8}", self.steps);
        println!(
            "  steps executed (attempts)     {:>8}",
            self.totals.executed
        );
        println!(
            "  retries                       {:>8}   ({} steps fail once)",
            self.totals.retries, self.flaky
        );
        println!("  deliveries                    {:>8}", t.deliveries);
        println!(
            "  duplicate deliveries refused  {:>8}   (claims answered None)",
            t.refused
        );
        println!(
            "  double executions             {:>8}   (must be 0)",
            self.totals.double
        );
        println!(
            "  executions after success      {:>8}   (must be 0)",
            self.totals.after_success
        );
        println!(
            "  store disagreements           {:>8}   (must be 0)",
            self.check.disagreements.len()
        );
        println!(
            "  store errors                  {:>8}",
            t.errors.len() + completion_errors.len()
        );
        println!("  wall time                     {secs:>8.2} s");
        println!(
            "  throughput                    {:>8.0} steps/s",
            self.steps as f64 / secs.max(1e-9)
        );
        let errors = t
            .errors
            .iter()
            .chain(completion_errors)
            .chain(&self.check.disagreements);
        for line in errors.take(10) {
            println!("    {line}");
        }
    }

    /// Fails if any step ran twice or any run was left unfinished.
    pub fn verdict(&self) -> Result<()> {
        let mut broken = Vec::new();
        if let Some(why) = &self.tally.aborted {
            broken.push(format!("dispatching stopped: {why}"));
        }
        if self.totals.double > 0 {
            broken.push(format!("{} double executions", self.totals.double));
        }
        if self.totals.after_success > 0 {
            broken.push(format!(
                "{} executions after success",
                self.totals.after_success
            ));
        }
        if self.check.unfinished > 0 {
            broken.push(format!("{} runs unfinished", self.check.unfinished));
        }
        let t = &self.tally;
        let answered = t.refused + t.succeeded + t.failed + t.errors.len() as u64;
        if answered != self.tally.deliveries {
            broken.push(format!(
                "{} deliveries but {answered} answered",
                self.tally.deliveries
            ));
        }
        if !self.check.disagreements.is_empty() {
            broken.push(format!(
                "{} steps disagree with the ledger",
                self.check.disagreements.len()
            ));
        }
        if broken.is_empty() {
            println!("demo OK: every step ran once per attempt and every run completed");
            Ok(())
        } else {
            bail!("demo FAILED: {}", broken.join("; "))
        }
    }
}
