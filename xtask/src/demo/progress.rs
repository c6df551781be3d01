//! What the user watches while the demo runs: on a terminal, three
//! `indicatif` bars (events dispatched, runs settled, steps executed, each
//! with its rate); otherwise (CI, a pipe) a plain line every two seconds,
//! with the step rate between the last two readings and since the start. Every
//! figure is read from the database (by [`super::verify::totals`], a task
//! of its own), not counted in memory.
//!
//! Each reading of the totals is kept, so the summary can show the rate
//! over each fifth of the work ([`Rates`]): whether a long run slowed as
//! it went, and the machine's load average beside it, since on a shared
//! machine that is what moves the rate most.

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

/// The display and the readings behind the rates.
pub struct Progress {
    /// Bars or lines.
    display: Display,
    /// When the work started.
    started: Instant,
    /// Each reading of the totals: when (since `started`) and the steps
    /// executed by then.
    samples: Vec<(Duration, u64)>,
    /// The machine's load average when the work started.
    load_at_start: Option<f64>,
}

/// How the figures are shown.
enum Display {
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
        /// When the last line was printed.
        last: Instant,
        /// How often to print.
        every: Duration,
    },
}

/// The step rate over the work, read back from the progress readings.
#[derive(Clone, Debug, Default)]
pub struct Rates {
    /// Steps per second over each fifth of the work (fewer if the work was
    /// too short to read the totals that often).
    pub fifths: Vec<f64>,
    /// The machine's 1-minute load average when the work started and when
    /// it ended (`/proc/loadavg`; none where there is no such file).
    pub load: (Option<f64>, Option<f64>),
}

impl Progress {
    /// Bars if stdout is a terminal, lines otherwise.
    pub fn new() -> Self {
        let display = if std::io::stdout().is_terminal() {
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
            Display::Bars {
                events: bar("events dispatched", &style),
                runs: bar("runs settled", &style),
                steps: bar("steps executed", &counter),
                multi,
            }
        } else {
            Display::Lines {
                now: Snapshot::default(),
                slowest: Duration::ZERO,
                last: Instant::now(),
                every: Duration::from_secs(2),
            }
        };
        Self {
            display,
            started: Instant::now(),
            samples: vec![(Duration::ZERO, 0)],
            load_at_start: load_average(),
        }
    }

    /// Shows `read`, the totals and when they were read, if there is a
    /// new reading; `took` is how long the demo's poll took.
    pub fn update(&mut self, read: Option<(Snapshot, Instant)>, took: Duration) {
        if let Some((now, at)) = read {
            self.samples
                .push((at.saturating_duration_since(self.started), now.steps));
        }
        let now = read.map(|(now, _)| now);
        match &mut self.display {
            Display::Bars {
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
            Display::Lines {
                now: shown,
                slowest,
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
                line(*shown, self.started, lately(&self.samples), *slowest);
                *last = Instant::now();
                *slowest = Duration::ZERO;
            }
        }
    }

    /// Leaves the bars as they are, drawn for the last time (or prints
    /// the last line), and answers the rates over the work.
    pub fn finish(self) -> Rates {
        match self.display {
            Display::Bars {
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
            Display::Lines { now, slowest, .. } => {
                line(now, self.started, lately(&self.samples), slowest);
            }
        }
        Rates {
            fifths: fifths(&self.samples),
            load: (self.load_at_start, load_average()),
        }
    }
}

/// The step rate between the last two readings of the totals (they come
/// a second apart or more, further apart as the session grows).
fn lately(samples: &[(Duration, u64)]) -> f64 {
    match samples {
        [.., (t0, s0), (t1, s1)] if t1 > t0 => {
            s1.saturating_sub(*s0) as f64 / t1.saturating_sub(*t0).as_secs_f64()
        }
        _ => 0.0,
    }
}

/// One plain line: the figures `now`, the step rate `lately` (between the
/// last two readings) and since `started`, the slowest poll since the last
/// line.
fn line(now: Snapshot, started: Instant, lately: f64, slowest: Duration) {
    let secs = started.elapsed().as_secs_f64();
    println!(
        "  [{secs:>6.1} s] events {}/{} dispatched, runs {}/{} settled, {} steps executed \
         ({:.0} steps/s lately, {:.0} overall; poll {} ms)",
        now.dispatched,
        now.events,
        now.settled,
        now.runs,
        now.steps,
        lately,
        now.steps as f64 / secs.max(1e-9),
        slowest.as_millis(),
    );
}

/// The step rate over each fifth of the readings' span: for each fifth,
/// the readings nearest its ends (a reading of the totals comes every
/// second or more, so a fifth of a long run holds many).
fn fifths(samples: &[(Duration, u64)]) -> Vec<f64> {
    let Some(&(end, _)) = samples.last() else {
        return Vec::new();
    };
    let at = |t: Duration| {
        *samples
            .iter()
            .min_by_key(|(s, _)| s.abs_diff(t))
            .expect("at least one reading")
    };
    let mut rates = Vec::new();
    for k in 0..5 {
        let (a, b) = (at(end * k / 5), at(end * (k + 1) / 5));
        if b.0 > a.0 {
            rates.push(b.1.saturating_sub(a.1) as f64 / b.0.saturating_sub(a.0).as_secs_f64());
        }
    }
    rates
}

/// The machine's 1-minute load average, where `/proc/loadavg` says it.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// Rates rounded to whole steps a second, to compare exactly.
    fn whole(rates: &[f64]) -> Vec<u64> {
        rates.iter().map(|r| r.round() as u64).collect()
    }

    #[test]
    fn fifths_show_a_rate_that_falls() {
        // 100 steps/s for 50 s, then 50 steps/s for 50 s, read every 10 s.
        let samples: Vec<_> = (0..=10)
            .map(|k| {
                let t = 10 * k;
                let steps = if t <= 50 {
                    100 * t
                } else {
                    5_000 + 50 * (t - 50)
                };
                (secs(t), steps)
            })
            .collect();
        let rates = fifths(&samples);
        assert_eq!(whole(&rates), vec![100, 100, 75, 50, 50]);
    }

    #[test]
    fn lately_is_the_rate_between_the_last_two_readings() {
        assert_eq!(
            whole(&[lately(&[(secs(0), 0), (secs(2), 100), (secs(6), 300)])]),
            vec![50]
        );
        assert_eq!(whole(&[lately(&[(secs(0), 0)])]), vec![0]);
    }

    #[test]
    fn too_few_readings_give_fewer_fifths() {
        assert!(fifths(&[(Duration::ZERO, 0)]).is_empty());
        assert_eq!(
            whole(&fifths(&[(Duration::ZERO, 0), (secs(2), 10)])),
            vec![5]
        );
        assert!(fifths(&[]).is_empty());
    }
}
