//! What the user watches while the demo runs: on a terminal, three
//! `indicatif` bars (events dispatched, runs settled, steps executed, each
//! with its rate); otherwise (CI, a pipe) a plain line every two seconds.
//! Every figure is read from the database by the demo's poll, not counted
//! in memory.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// One poll of the database.
#[derive(Clone, Copy, Debug, Default)]
pub struct Snapshot {
    /// Events of the session that matched an activation.
    pub events: u64,
    /// Of those, dispatched (their runs started).
    pub dispatched: u64,
    /// Runs of the session that exist.
    pub runs: u64,
    /// Of those, settled.
    pub settled: u64,
    /// Step attempts executed.
    pub steps: u64,
}

/// The display.
pub enum Progress {
    /// Bars on a terminal.
    Bars {
        /// Holds the bars together.
        multi: MultiProgress,
        /// Events dispatched.
        events: ProgressBar,
        /// Runs settled.
        runs: ProgressBar,
        /// Steps executed.
        steps: ProgressBar,
    },
    /// Lines, every `every`.
    Lines {
        /// The last figures read.
        now: Snapshot,
        /// The longest poll since the last line.
        slowest: Duration,
        /// When the demo started.
        started: Instant,
        /// When the last line was printed.
        last: Instant,
        /// How often to print.
        every: Duration,
    },
}

impl Progress {
    /// Bars if stdout is a terminal, lines otherwise.
    pub fn new() -> Self {
        if std::io::stdout().is_terminal() {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
            let style = ProgressStyle::with_template(
                "  {prefix:<18} [{bar:30}] {pos:>7}/{len:<7} {per_sec:>10} {elapsed:>4}",
            )
            .expect("a valid template")
            .progress_chars("=> ");
            let counter =
                ProgressStyle::with_template("  {prefix:<18} {pos:>7} {per_sec:>10} {elapsed:>4}")
                    .expect("a valid template");
            let bar = |prefix: &'static str, style: &ProgressStyle| {
                let bar = multi.add(ProgressBar::new(0).with_style(style.clone()));
                bar.set_prefix(prefix);
                bar
            };
            Self::Bars {
                events: bar("events dispatched", &style),
                runs: bar("runs settled", &style),
                steps: bar("steps executed", &counter),
                multi,
            }
        } else {
            let now = Instant::now();
            Self::Lines {
                now: Snapshot::default(),
                slowest: Duration::ZERO,
                started: now,
                last: now,
                every: Duration::from_secs(2),
            }
        }
    }

    /// Shows `now` if the poll read the totals (`None`: only what is in
    /// flight); `took` is how long the poll took.
    pub fn update(&mut self, now: Option<Snapshot>, took: Duration) {
        match self {
            Self::Bars {
                events,
                runs,
                steps,
                ..
            } => {
                if let Some(now) = now {
                    events.set_length(now.events);
                    events.set_position(now.dispatched);
                    runs.set_length(now.runs);
                    runs.set_position(now.settled);
                    steps.set_position(now.steps);
                }
            }
            Self::Lines {
                now: shown,
                slowest,
                started,
                last,
                every,
            } => {
                *slowest = (*slowest).max(took);
                if let Some(now) = now {
                    *shown = now;
                }
                if last.elapsed() < *every {
                    return;
                }
                *last = Instant::now();
                line(*shown, *started, *slowest);
                *slowest = Duration::ZERO;
            }
        }
    }

    /// Leaves the bars as they are, drawn for the last time (or prints
    /// the last line).
    pub fn finish(self) {
        match self {
            Self::Bars {
                multi,
                events,
                runs,
                steps,
            } => {
                for bar in [events, runs, steps] {
                    bar.abandon();
                }
                drop(multi);
            }
            Self::Lines {
                now,
                slowest,
                started,
                ..
            } => line(now, started, slowest),
        }
    }
}

/// One plain line: the figures `now`, the rate since `started`, the
/// slowest poll since the last line.
fn line(now: Snapshot, started: Instant, slowest: Duration) {
    let secs = started.elapsed().as_secs_f64();
    println!(
        "  [{secs:>6.1} s] events {}/{} dispatched, runs {}/{} settled, {} steps executed ({:.0} steps/s; poll {} ms)",
        now.dispatched,
        now.events,
        now.settled,
        now.runs,
        now.steps,
        now.steps as f64 / secs.max(1e-9),
        slowest.as_millis(),
    );
}
