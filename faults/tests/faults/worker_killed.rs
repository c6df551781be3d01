//! A worker process that stops mid-step, two ways, on every dialect
//! (databases of their own on the shared servers, an SQLite file shared by
//! the processes: nothing is restarted here).
//!
//! - **Killed**: a `fault-worker` child claims its fifth step, writes the
//!   ledger row and holds the step; it is SIGKILLed there.
//! - **Paused**: the same child is SIGSTOPped there instead, and stays
//!   frozen past its claim deadline; once another worker has run the step
//!   again it is resumed (SIGCONT) and sends its completion, late.
//!
//! Meanwhile a second worker process works every other step and exits once
//! nothing is claimable. The held step is `running` with a claim deadline
//! ([`CLAIM_TIMEOUT`] after its claim); the test waits for that deadline in
//! real time, runs one recovery pass, which must take back exactly that
//! claim (attempt 1 failed with the claim-expired error), and a third
//! worker process (the heir) then runs the step once more, as attempt 2.
//! The paused worker's late completion must be refused (`ClaimLost`) and
//! change nothing: the step's result is the heir's.
//!
//! Asserted from the database: every step succeeded exactly once (0 lost,
//! 0 doubled, 0 stuck); the held step's ledger holds the stopped worker's
//! attempt 1 and the heir's attempt 2 and nothing else, its history attempt
//! 1 failed by claim expiry and attempt 2 succeeded with the heir's result.
//! Time to heal: from the fault to the held step succeeded again.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowstate_core::ports::StepStore as _;
use flowstate_core::step_claim::claim_expired_error;
use flowstate_core::{Clock as _, StepId, StepStatus, SystemClock};
use flowstate_faults::child::{Hold, WorkerChild};
use flowstate_faults::load::{CLAIM_TIMEOUT, result_of, seed};
use flowstate_faults::recovery::{Recovery, recovery_pass};
use flowstate_faults::{Heal, Scenario, SharedDb, Verdict};
use flowstate_store_diesel::{Dialect, DieselStore};

use crate::support::{bounded, store};

/// How the holding worker stops.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// SIGKILL.
    Killed,
    /// SIGSTOP past the claim deadline, SIGCONT after the retry.
    Paused,
}

/// How long any child may take to say what it is waited for.
const CHILD_BOUND: Duration = Duration::from_secs(60);

/// The step and attempt of a child's `holding <step> <attempt>` line.
fn held(line: &str) -> (StepId, u32) {
    let mut words = line.split_whitespace().skip(1);
    let step = words
        .next()
        .and_then(|id| id.parse::<StepId>().ok())
        .unwrap_or_else(|| panic!("no step in {line:?}"));
    let attempt = words
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no attempt in {line:?}"));
    (step, attempt)
}

/// Waits until `store`'s step `id` has a claim deadline in the past, on
/// this machine's clock (the database's clock: the same machine), plus a
/// margin; answers the deadline's distance from the fault.
async fn wait_out_the_deadline(store: &DieselStore, id: StepId) -> Duration {
    let step = store.get_step(id).await.expect("read the held step");
    assert_eq!(
        step.status,
        StepStatus::Running,
        "the held step moved before its deadline: {step:?}"
    );
    let deadline = step.claimed_until.expect("a running step has a deadline");
    let left = deadline.as_micros() - SystemClock.now().as_micros();
    let wait = Duration::from_micros(u64::try_from(left.max(0)).unwrap_or(0));
    tokio::time::sleep(wait + Duration::from_millis(250)).await;
    wait
}

async fn worker_stops_mid_step(dialect: Dialect, stop: Stop) {
    let db = SharedDb::migrated(dialect).await.expect("a database");
    let store = store(&db.url, 2).await;
    let steps = seed(&store, 10, 10).await.expect("seed the steps");
    let binary = Path::new(env!("CARGO_BIN_EXE_fault-worker"));
    // Killed: held for good. Paused: the hold is over by the time it is
    // resumed, so it goes straight on to its completion.
    let hold = Hold {
        for_: match stop {
            Stop::Killed => Duration::from_secs(600),
            Stop::Paused => CLAIM_TIMEOUT + Duration::from_secs(1),
        },
        at: Some(5),
    };
    let mut victim = WorkerChild::spawn(binary, &db.url, "victim", hold).expect("a worker");
    let line = victim
        .wait_line("holding", CHILD_BOUND)
        .await
        .expect("the worker holds a step");
    let (step, attempt) = held(&line);
    let faulted = Instant::now();
    match stop {
        Stop::Killed => victim.kill().await,
        Stop::Paused => victim.pause().await.expect("pause the worker"),
    }
    assert!(
        !victim
            .lines()
            .iter()
            .any(|l| l.starts_with(&format!("completed {step}"))),
        "the worker completed its step before it was stopped: the hold was too short"
    );
    let steady = Hold {
        for_: Duration::from_millis(2),
        at: None,
    };
    let mut survivor = WorkerChild::spawn(binary, &db.url, "survivor", steady).expect("a worker");
    let status = survivor.wait(CHILD_BOUND).await.expect("the survivor ends");
    assert!(
        status.success(),
        "the survivor failed: {}",
        survivor.stderr_text()
    );

    // Nothing took the held step back before its deadline; one pass after
    // it takes back exactly that claim.
    let waited = wait_out_the_deadline(&store, step).await;
    let (pass, runs) = bounded(
        "the recovery pass",
        Duration::from_secs(30),
        recovery_pass(Arc::clone(&store)),
    )
    .await;
    let report = pass.clone().expect("the recovery pass");
    let expired: Vec<(StepId, u32, bool)> = report
        .expiry
        .expired
        .iter()
        .map(|claim| (claim.step, claim.attempt, claim.retrying))
        .collect();
    assert_eq!(
        expired,
        [(step, attempt, true)],
        "the pass took back other claims than the held one"
    );

    // Another worker runs it again, as its next attempt.
    let mut heir = WorkerChild::spawn(binary, &db.url, "heir", Hold::default()).expect("a worker");
    heir.wait_line(&format!("completed {step} {}", attempt + 1), CHILD_BOUND)
        .await
        .expect("the heir runs the held step again");
    let healed = faulted.elapsed();
    let status = heir.wait(CHILD_BOUND).await.expect("the heir ends");
    assert!(status.success(), "the heir failed: {}", heir.stderr_text());

    let mut late = None;
    if stop == Stop::Paused {
        victim.resume();
        let refused = victim
            .wait_line(&format!("refused {step} {attempt}"), CHILD_BOUND)
            .await
            .expect("the resumed worker's completion is refused");
        let status = victim
            .wait(CHILD_BOUND)
            .await
            .expect("the resumed worker ends");
        assert!(
            status.success(),
            "the resumed worker failed: {}",
            victim.stderr_text()
        );
        late = Some(refused);
    }

    let (name, fault) = match stop {
        Stop::Killed => (
            "worker killed mid-step",
            "SIGKILL of a worker process holding a step",
        ),
        Stop::Paused => (
            "worker paused past its claim",
            "SIGSTOP of a worker process holding a step, past its claim deadline; SIGCONT after the retry",
        ),
    };
    let mut scenario = Scenario::new(
        name,
        dialect,
        format!(
            "{} steps, 3 worker processes, claims of {} s",
            steps.len(),
            CLAIM_TIMEOUT.as_secs()
        ),
        fault.into(),
    );
    let recovery = Recovery {
        pass,
        runs,
        drain: None,
    };
    Verdict::judge(&mut scenario, &db.url, None, &recovery)
        .await
        .expect("read the verdict");
    scenario.heal = Heal::Healed(healed);
    judge_the_held_step(&mut scenario, &store, &db.url, step, attempt).await;
    if let Some(refused) = late {
        // The worker says `refused` for a `ClaimLost` answer only.
        scenario.note(format!("late completion: {refused}"));
    }
    scenario.note(format!(
        "claim ran out {} ms after the fault",
        waited.as_millis()
    ));
    scenario.finish();
}

/// The held step: succeeded in attempt `attempt + 1` with the heir's
/// result; attempt `attempt` failed by claim expiry; the ledger holds the
/// stopped worker's attempt and the heir's, nothing else.
async fn judge_the_held_step(
    scenario: &mut Scenario,
    store: &DieselStore,
    url: &str,
    id: StepId,
    attempt: u32,
) {
    let step = store.get_step(id).await.expect("read the held step");
    if step.status != StepStatus::Succeeded || step.attempt != attempt + 1 {
        scenario.lost += 1;
        scenario.note(format!(
            "held step ended {} in attempt {}",
            step.status, step.attempt
        ));
    }
    if step.result != Some(result_of("heir")) {
        scenario.wrong += 1;
        scenario.note(format!("held step's result: {:?}", step.result));
    }
    let ledger = Verdict::ledger_of(url, id).await.expect("read the ledger");
    let expected = vec![
        (i64::from(attempt), "victim".to_owned()),
        (i64::from(attempt) + 1, "heir".to_owned()),
    ];
    if ledger != expected {
        scenario.doubled += 1;
        scenario.note(format!("held step's ledger: {ledger:?}"));
    }
    let history = store
        .step_history(step.run)
        .await
        .expect("read the history");
    let attempts: Vec<_> = history.iter().filter(|a| a.step == id).collect();
    let expired_first = attempts.first().is_some_and(|a| {
        a.attempt == attempt
            && a.status == StepStatus::Failed
            && a.error == Some(claim_expired_error())
    });
    let then_succeeded = attempts.get(1).is_some_and(|a| {
        a.attempt == attempt + 1
            && a.status == StepStatus::Succeeded
            && a.result == Some(result_of("heir"))
    });
    if attempts.len() != 2 || !expired_first || !then_succeeded {
        scenario.wrong += 1;
        scenario.note(format!(
            "held step's history: {:?}",
            attempts
                .iter()
                .map(|a| (a.attempt, a.status, a.error.clone()))
                .collect::<Vec<_>>()
        ));
    }
    scenario.note(format!(
        "held step: attempt {attempt} by the stopped worker, expired; attempt {} by the heir",
        attempt + 1
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_killed_mid_step_postgres() {
    worker_stops_mid_step(Dialect::Postgres, Stop::Killed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_killed_mid_step_mariadb() {
    worker_stops_mid_step(Dialect::Mysql, Stop::Killed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_killed_mid_step_sqlite() {
    worker_stops_mid_step(Dialect::Sqlite, Stop::Killed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_paused_past_its_claim_postgres() {
    worker_stops_mid_step(Dialect::Postgres, Stop::Paused).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_paused_past_its_claim_mariadb() {
    worker_stops_mid_step(Dialect::Mysql, Stop::Paused).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_paused_past_its_claim_sqlite() {
    worker_stops_mid_step(Dialect::Sqlite, Stop::Paused).await;
}
