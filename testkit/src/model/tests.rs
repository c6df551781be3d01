//! The model test's own checks: two reference stores agree on every
//! sequence, the sequences reach the answers worth comparing, and a store
//! that answers differently is caught and shrunk to the ops that matter.

use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowstate_core::{ClaimOutcome, Timestamp};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;

use super::*;
use crate::{ManualClock, MemoryHarness, MemoryStore, StoreHarness};

/// A reference store that holds a claim one minute, not ten, by default.
async fn one_minute_claims(clock: Arc<ManualClock>) -> MemoryStore {
    MemoryStore::with_clock(clock).with_claim_timeout(Duration::from_secs(60))
}

#[test]
fn two_reference_stores_answer_every_sequence_alike() {
    let config = ModelConfig {
        cases: 128,
        max_ops: 60,
        ..ModelConfig::default()
    };
    check(
        &config,
        || async { MemoryHarness::new() },
        || async { MemoryHarness::new() },
    );
}

/// What an answer shows the sequence reached, if it is one of the answers
/// the model is for.
fn reached(op: &Op, reply: &Reply) -> Option<&'static str> {
    Some(match (op, reply) {
        (_, Ok(Answer::Claimed(Some(step)))) if step.attempt > 1 => "a retry claimed",
        (_, Ok(Answer::Claimed(Some(_)) | Answer::Outcome(ClaimOutcome::Claimed(_)))) => "a claim",
        (_, Ok(Answer::Outcome(ClaimOutcome::NotClaimed(_)))) => "a claim that took nothing",
        (Op::ClaimBatch { .. }, Ok(Answer::Steps(steps))) if !steps.is_empty() => "a batch claim",
        (Op::TransitionClaimed { .. }, Ok(Answer::Done)) => "a fenced write",
        (_, Ok(Answer::Completed(items))) if items.iter().any(Result::is_ok) => "a batch item",
        (_, Ok(Answer::Completed(items))) if items.iter().any(Result::is_err) => {
            "a refused batch item"
        }
        (_, Ok(Answer::Deadline(_))) => "a heartbeat",
        (_, Ok(Answer::Expired(claims))) if !claims.is_empty() => "an expired claim",
        (_, Ok(Answer::NewRun(run))) if !run.inserted => "an idempotent create",
        (_, Ok(Answer::NewStep(step))) if !step.inserted => "a repeated insert",
        (_, Err(Refusal::ClaimLost { .. })) => "a lost claim",
        (_, Err(Refusal::RunSettled { .. })) => "a settled run",
        (_, Err(Refusal::FunctionMismatch { .. })) => "a function mismatch",
        (_, Err(Refusal::StepNameNotFound { .. })) => "no such step",
        (_, Err(Refusal::IllegalStepTransition { .. })) => "an illegal step move",
        (_, Err(Refusal::IllegalRunTransition { .. })) => "an illegal run move",
        (_, Err(Refusal::InvalidInput(_))) => "invalid input",
        _ => return None,
    })
}

#[test]
fn sequences_reach_every_answer_worth_comparing() {
    let mut runner = TestRunner::deterministic();
    let strategy = ops(40);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut seen = BTreeSet::new();
    for _ in 0..128 {
        let sequence = strategy.new_tree(&mut runner).unwrap().current();
        let (a, b) = (MemoryHarness::new(), MemoryHarness::new());
        let mut observe = |op: &Op, reply: &Reply| seen.extend(reached(op, reply));
        runtime
            .block_on(drive(&a, &b, &sequence, LeaseClock::Same, &mut observe))
            .unwrap();
    }
    let expected = [
        "a retry claimed",
        "a claim",
        "a claim that took nothing",
        "a batch claim",
        "a fenced write",
        "a batch item",
        "a refused batch item",
        "a heartbeat",
        "an expired claim",
        "an idempotent create",
        "a repeated insert",
        "a lost claim",
        "a settled run",
        "a function mismatch",
        "no such step",
        "an illegal step move",
        "an illegal run move",
        "invalid input",
    ];
    let missing: Vec<_> = expected.iter().filter(|e| !seen.contains(*e)).collect();
    assert!(
        missing.is_empty(),
        "128 sequences never reached {missing:?}"
    );
}

#[tokio::test]
async fn a_deadline_minutes_off_is_a_divergence() {
    let reference = MemoryHarness::new();
    let since = Instant::now();
    let subject = StoreHarness::create(one_minute_claims).await;
    let step = StepRef { run: 0, name: "s0" };
    let sequence = [
        Op::CreateRun { key: None },
        Op::InsertStep {
            step,
            function: Some("f"),
            retries: 0,
            retry_delay: false,
            claim_timeout_minutes: None,
        },
        Op::ClaimStep {
            step,
            function: "f",
        },
    ];
    let lease = LeaseClock::AheadByRealTimeSince(since);
    let divergence = run_ops(&reference, &subject, &sequence, lease)
        .await
        .unwrap_err();
    assert_eq!(divergence.ops, sequence);
    let deadline = |reply: &Reply| match reply {
        Ok(Answer::Claimed(Some(step))) => step.claimed_until,
        other => panic!("not a claim: {other:?}"),
    };
    let at = ManualClock::START;
    let minutes = |m: u64| Some(at.plus(Duration::from_secs(60 * m)));
    assert_eq!(deadline(&divergence.reference), minutes(10));
    assert_eq!(deadline(&divergence.subject), minutes(1));
}

#[test]
fn a_divergence_is_shrunk_to_the_ops_that_cause_it() {
    let config = ModelConfig {
        cases: 64,
        ..ModelConfig::default()
    };
    let failed = std::panic::catch_unwind(AssertUnwindSafe(|| {
        check(
            &config,
            || async { MemoryHarness::new() },
            || StoreHarness::create(one_minute_claims),
        );
    }))
    .expect_err("a store with another default claim timeout differs");
    let message = failed.downcast::<String>().expect("a message");
    // A run, a step without a timeout of its own, and one move to running
    // that sets a deadline: the shortest sequence that shows it is three ops.
    // Shrinking removes one op at a time, and cannot remove a `CreateRun`
    // in front of the run the step names (the step would name another
    // run), so it may stop with spare runs first: the sequence is those
    // runs, the step, and the move, which diverges.
    let (_, minimal) = message
        .split_once("minimal failing input")
        .unwrap_or_else(|| panic!("no minimal failing input: {message}"));
    let ops: Vec<&str> = minimal
        .lines()
        .filter(|l| l.starts_with("    ") && l[4..].starts_with(char::is_uppercase))
        .map(str::trim)
        .collect();
    let runs = ops
        .iter()
        .take_while(|op| op.starts_with("CreateRun"))
        .count();
    assert!(runs >= 1, "{message}");
    assert_eq!(
        ops.len(),
        runs + 2,
        "runs, the step and the move: {message}"
    );
    assert!(ops[runs].starts_with("InsertStep"), "{message}");
    assert!(
        message.contains(&format!("the stores answered op {} differently", runs + 1)),
        "{message}"
    );
}

#[test]
fn a_deadline_agrees_within_the_real_time_passed() {
    let at = Timestamp::from_micros(1_000_000_000);
    let us = |n: i64| Timestamp::from_micros(at.as_micros() + n);
    assert!(LeaseClock::Same.agrees(at, at));
    assert!(!LeaseClock::Same.agrees(at, us(1)));
    let since = Instant::now()
        .checked_sub(Duration::from_millis(50))
        .expect("a machine up for 50 ms");
    let lease = LeaseClock::AheadByRealTimeSince(since);
    assert!(lease.agrees(at, us(-LeaseClock::SLACK_MICROS)));
    assert!(!lease.agrees(at, us(-LeaseClock::SLACK_MICROS - 1)));
    assert!(lease.agrees(at, us(50_000)));
    assert!(!lease.agrees(at, us(60_000_000)));
}
