//! `fault-worker`: a worker process for the fault suite, which spawns it,
//! may SIGKILL it mid-step, and judges the database afterwards.
//!
//! ```text
//! fault-worker --url <database url> --worker <name> [--idle-exit <n>]
//! ```
//!
//! It opens a `DieselStore` on the URL and loops: claim one step pinned to
//! the suite's function (`BatchStepStore::claim_batch`), write the ledger
//! row, hold the step if told to (`FAULT_WORKER_HOLD_MS`, for the step
//! numbered `FAULT_WORKER_HOLD_AT` or every step), complete it under its
//! claim with `transition_claimed(Succeeded)`. It exits after
//! `--idle-exit` empty claims in a row (default 3, 50 ms apart).
//! Retryable errors are tried again; other errors end that step, and a
//! completion refused because the claim was taken back meanwhile
//! (`ClaimLost`) is said on stdout (`refused <step> <attempt> <error>`).
//! Each event is one line on stdout (see `flowstate_faults::child`).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use flowstate_core::ports::{BatchStepStore as _, StepStore as _};
use flowstate_core::{BatchClaim, Error, StepTransition};
use flowstate_faults::child::{HOLD_AT, HOLD_MS};
use flowstate_faults::ledger::{Entry, Ledger, check_worker};
use flowstate_faults::load::{FUNCTION, result_of};
use flowstate_store_diesel::{DieselStore, StoreConfig};

/// How long a retryable call is tried again.
const PATIENCE: Duration = Duration::from_secs(20);

struct Args {
    url: String,
    worker: String,
    idle_exit: u32,
    hold: Duration,
    hold_at: Option<u32>,
}

fn args() -> Result<Args> {
    let mut url = None;
    let mut worker = None;
    let mut idle_exit = 3;
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let value = given
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--url" => url = Some(value),
            "--worker" => worker = Some(value),
            "--idle-exit" => idle_exit = value.parse()?,
            other => bail!("unknown flag {other}"),
        }
    }
    let worker = worker.context("--worker is required")?;
    check_worker(&worker)?;
    let hold = match std::env::var(HOLD_MS) {
        Ok(ms) => Duration::from_millis(ms.parse().context(HOLD_MS)?),
        Err(_) => Duration::ZERO,
    };
    let hold_at = match std::env::var(HOLD_AT) {
        Ok(n) => Some(n.parse().context(HOLD_AT)?),
        Err(_) => None,
    };
    Ok(Args {
        url: url.context("--url is required")?,
        worker,
        idle_exit,
        hold,
        hold_at,
    })
}

/// Calls `f` until it answers `Ok`, or an error that is not retryable, or
/// patience runs out; answers the last error then.
async fn retrying<T, F, Fut>(what: &str, mut f: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = flowstate_core::Result<T>>,
{
    let started = Instant::now();
    loop {
        match f().await {
            Ok(value) => return Ok(value),
            Err(err) if err.is_retryable() && started.elapsed() < PATIENCE => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(err) => {
                eprintln!("{what}: {err}");
                return Err(err);
            }
        }
    }
}

async fn work(args: Args) -> Result<u64> {
    let config = StoreConfig::default()
        .pool_size(2)
        .acquire_timeout(Duration::from_secs(5));
    let store = DieselStore::open(&args.url, config).await?;
    let ledger = Ledger::new(&args.url, 1);
    println!("ready");
    let claim = BatchClaim::new(1).for_function(FUNCTION);
    let (mut claimed, mut completed, mut idle) = (0u32, 0u64, 0u32);
    while idle < args.idle_exit {
        let Ok(steps) = retrying("claim_batch", || store.claim_batch(&claim)).await else {
            idle += 1;
            continue;
        };
        if steps.is_empty() {
            idle += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        idle = 0;
        for step in steps {
            claimed += 1;
            println!("claimed {} {}", step.id, step.attempt);
            match ledger
                .record(0, step.id, step.attempt, &args.worker)
                .await?
            {
                Entry::First => {}
                Entry::Double => eprintln!("double execution of {} {}", step.id, step.attempt),
            }
            if args.hold_at.is_none_or(|at| at == claimed) && !args.hold.is_zero() {
                println!("holding {} {}", step.id, step.attempt);
                tokio::time::sleep(args.hold).await;
            }
            let result = result_of(&args.worker);
            let done = retrying("transition_claimed", || {
                store.transition_claimed(step.claim(), StepTransition::Succeeded(result.clone()))
            })
            .await;
            match done {
                Ok(()) => {
                    completed += 1;
                    println!("completed {} {}", step.id, step.attempt);
                }
                Err(err @ Error::ClaimLost { .. }) => {
                    println!("refused {} {} {err}", step.id, step.attempt);
                }
                Err(_) => {}
            }
        }
    }
    Ok(completed)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let outcome = match args() {
        Ok(args) => work(args).await,
        Err(err) => Err(err),
    };
    match outcome {
        Ok(completed) => {
            println!("exit {completed}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("fault-worker: {err:#}");
            ExitCode::FAILURE
        }
    }
}
