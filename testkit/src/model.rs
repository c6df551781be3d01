//! A model-based test: random sequences of operations run on a reference
//! store (the model, [`MemoryStore`](crate::MemoryStore)) and on a store
//! under test, every answer compared.
//!
//! The suite's cases check one guarantee each, in the order their author
//! thought of. This checks the orders nobody thought of: a proptest
//! strategy ([`ops`]) draws sequences of up to a few dozen [`Op`]s over a
//! small universe (three runs, six step names, two functions, three state
//! keys), so claims collide, names repeat and refusals are frequent:
//! runs created with and without idempotency keys and settled in every
//! status, steps inserted with 0 to 2 retries and their own claim timeouts,
//! claims by the right function, the wrong one and for names that do not
//! exist, every transition, fenced writes with the current claim and stale
//! ones, heartbeats, retries, batch claims and completions, state writes,
//! the clock moved on by whole minutes and expired claims taken back.
//! [`run_ops`] runs one sequence on both stores, one op at a time, and
//! stops at the first answer that differs once what may legitimately
//! differ is taken out ([`answer`](Answer)'s rules: generated ids, error
//! messages, deadlines on a lease clock that moves with real time, ties a
//! port leaves unordered); a backend failure is never expected. [`check`]
//! runs many sequences with proptest and, on a difference, shrinks the
//! sequence and panics with the shortest one it found.
//!
//! # Checking your own backend
//!
//! Give [`check`] two factories of [`Harness`]es, each a fresh, empty
//! store on a fresh [`ManualClock`](crate::ManualClock) (the runner moves
//! both clocks in lockstep, so both stores must stamp every time from their
//! harness's clock, and take their lease clock from it too):
//!
//! ```
//! use flowstate_testkit::MemoryHarness;
//! use flowstate_testkit::model::{ModelConfig, check};
//!
//! let config = ModelConfig {
//!     cases: 4,
//!     ..ModelConfig::default()
//! };
//! // Yours: `|| StoreHarness::create(open)`, or a harness of your own
//! // that drops its database in `Harness::teardown`.
//! check(&config, || async { MemoryHarness::new() }, || async {
//!     MemoryHarness::new()
//! });
//! ```
//!
//! A backend whose claim deadlines come from a database clock that only
//! follows the harness clock sets [`ModelConfig::real_time_lease_clock`].
//! The clock moves by whole minutes and claim timeouts are whole minutes,
//! so a deadline never falls within seconds of the time it is checked at:
//! whether a claim expired is the same on both clocks while a sequence runs
//! for less than a minute.

mod answer;
mod apply;
mod lease_clock;
mod ops;
#[cfg(test)]
mod tests;

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use flowstate_core::Clock as _;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

pub use answer::{Answer, Refusal, Reply};
pub use apply::ModelStore;
pub use lease_clock::LeaseClock;
pub use ops::{
    Attempt, FUNCTIONS, NAMES, Op, Outcome, Payload, RUN_SLOTS, STATE_KEYS, StepRef, Target, op,
    ops,
};

use crate::Harness;
use answer::{Ids, unexpected};
use apply::{apply, resolve};
use lease_clock::reconcile;

/// The first op whose answers differ, and the sequence that led to it.
#[derive(Debug)]
pub struct Divergence {
    /// The ops run, the differing one last.
    pub ops: Vec<Op>,
    /// The reference store's answer to it, canonical.
    pub reference: Reply,
    /// The subject store's answer to it, canonical.
    pub subject: Reply,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = self.ops.len().saturating_sub(1);
        writeln!(f, "the stores answered op {last} differently")?;
        for (index, op) in self.ops.iter().enumerate() {
            writeln!(f, "  {index:>3}: {op:?}")?;
        }
        writeln!(f, "  reference: {:?}", self.reference)?;
        write!(f, "  subject:   {:?}", self.subject)
    }
}

impl std::error::Error for Divergence {}

/// Runs `ops` on `reference` and `subject`, one op at a time on each, and
/// answers the first op whose answers differ (after [`Answer`]'s rules) or
/// that either store answered with a backend failure. `lease` says how the
/// subject's lease clock relates to the reference's. Both harnesses must
/// be fresh: slots are numbered from the first run created.
pub async fn run_ops<R, S>(
    reference: &R,
    subject: &S,
    ops: &[Op],
    lease: LeaseClock,
) -> Result<(), Divergence>
where
    R: Harness,
    S: Harness,
    R::Store: ModelStore,
    S::Store: ModelStore,
{
    drive(reference, subject, ops, lease, &mut |_, _| {}).await
}

/// [`run_ops`], showing `observe` every op and the reference's answer.
async fn drive<R, S>(
    reference: &R,
    subject: &S,
    ops: &[Op],
    lease: LeaseClock,
    observe: &mut dyn FnMut(&Op, &Reply),
) -> Result<(), Divergence>
where
    R: Harness,
    S: Harness,
    R::Store: ModelStore,
    S::Store: ModelStore,
{
    let (mut ours, mut theirs) = (Ids::default(), Ids::default());
    for (at, op) in ops.iter().enumerate() {
        if let Op::AdvanceClock { minutes } = op {
            let by = Duration::from_secs(60 * minutes);
            reference.clock().advance(by);
            subject.clock().advance(by);
            continue;
        }
        let now = reference.clock().now();
        let resolved = resolve(reference.store().as_ref(), &ours, now, op).await;
        let mut expected = apply(reference.store().as_ref(), &mut ours, op, &resolved).await;
        let mut got = apply(subject.store().as_ref(), &mut theirs, op, &resolved).await;
        reconcile(lease, &mut expected, &mut got);
        observe(op, &expected);
        if expected != got || unexpected(&expected) || unexpected(&got) {
            return Err(Divergence {
                ops: ops[..=at].to_vec(),
                reference: expected,
                subject: got,
            });
        }
    }
    Ok(())
}

/// How many sequences [`check`] runs, how long they are, and what it may
/// assume of the subject.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    /// Sequences to run (the `PROPTEST_CASES` environment variable
    /// overrides it).
    pub cases: u32,
    /// The most ops in a sequence (at least one).
    pub max_ops: usize,
    /// How many smaller sequences to try once one fails, looking for the
    /// shortest that still fails (each runs on fresh stores).
    pub max_shrink_iters: u32,
    /// Whether the subject's claim deadlines are read on a clock that
    /// follows the harness clock plus real time
    /// ([`LeaseClock::AheadByRealTimeSince`], measured from just before the
    /// subject is made); otherwise they must match to the microsecond.
    pub real_time_lease_clock: bool,
}

impl Default for ModelConfig {
    /// 32 sequences of up to 40 ops, 512 shrink steps, exact deadlines.
    fn default() -> Self {
        Self {
            cases: 32,
            max_ops: 40,
            max_shrink_iters: 512,
            real_time_lease_clock: false,
        }
    }
}

/// Runs [`ModelConfig::cases`] random sequences ([`ops`]) through
/// [`run_ops`], each on a fresh reference (from `reference`) and a fresh
/// subject (from `subject`), torn down after it, on a tokio runtime of its
/// own (call it from a plain `#[test]`). On a difference it shrinks the
/// sequence and panics with the shortest failing one and its answers.
pub fn check<R, S, FR, FS, FutR, FutS>(config: &ModelConfig, reference: FR, subject: FS)
where
    R: Harness,
    S: Harness,
    R::Store: ModelStore,
    S::Store: ModelStore,
    FR: Fn() -> FutR,
    FS: Fn() -> FutS,
    FutR: Future<Output = R>,
    FutS: Future<Output = S>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(config.cases);
    let mut runner = TestRunner::new(Config {
        cases,
        max_shrink_iters: config.max_shrink_iters,
        failure_persistence: None,
        ..Config::default()
    });
    let (runs, ops_run) = (Cell::new(0u32), Cell::new(0usize));
    let started = Instant::now();
    let outcome = runner.run(&ops(config.max_ops), |ops| {
        runs.set(runs.get() + 1);
        ops_run.set(ops_run.get() + ops.len());
        runtime
            .block_on(async {
                let reference = reference().await;
                let since = Instant::now();
                let subject = subject().await;
                let lease = if config.real_time_lease_clock {
                    LeaseClock::AheadByRealTimeSince(since)
                } else {
                    LeaseClock::Same
                };
                let outcome = run_ops(&reference, &subject, &ops, lease).await;
                reference.teardown().await;
                subject.teardown().await;
                outcome
            })
            .map_err(|divergence| TestCaseError::fail(divergence.to_string()))
    });
    eprintln!(
        "model: {} sequences, {} ops, in {:.1?}",
        runs.get(),
        ops_run.get(),
        started.elapsed()
    );
    if let Err(error) = outcome {
        panic!("{error}");
    }
}
