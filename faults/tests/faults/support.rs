//! What the scenarios share: a store with small settings, the step
//! scenario's run from seed to verdict, a bound on every wait.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use flowstate_faults::Verdict;
use flowstate_faults::ledger::Ledger;
use flowstate_faults::load::{Crew, CrewOptions, CrewReport, StepRef, probe_heal, seed};
use flowstate_faults::recovery::{recover_and_drain, store_past_deadlines};
use flowstate_faults::{Scenario, Throwaway};
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig};

/// How long after a fault the store has to serve every caller again
/// before it counts as never healed.
pub const HEAL_BOUND: Duration = Duration::from_secs(10);

/// A time to heal from which on the note says, call by call, where the
/// slowest worker's time went.
pub const HEAL_WORTH_ACCOUNTING: Duration = Duration::from_millis(250);

/// A store on `url` with a pool of `size` and an acquire wait of two
/// seconds (the error's whole chain in the panic). A URL with
/// `?pool_mode=transaction` runs its schema check through the pooler too.
pub async fn store(url: &str, size: usize) -> Arc<DieselStore> {
    let config = StoreConfig::default()
        .pool_size(size)
        .acquire_timeout(Duration::from_secs(2));
    Arc::new(
        DieselStore::open(url, config)
            .await
            .unwrap_or_else(|err| panic!("open {url}: {err} ({err:?})")),
    )
}

/// A throw-away server of `dialect` (stopped when dropped) and the URL of
/// the scenario's database, migrated on it.
pub async fn migrated_server(dialect: Dialect) -> (Throwaway, String) {
    let server = Throwaway::start(dialect)
        .await
        .expect("a throw-away server");
    let url = server
        .migrated_database("flowstate")
        .await
        .expect("the scenario's database");
    (server, url)
}

/// `future`, or a panic naming `what` if it takes longer than `limit`.
pub async fn bounded<T>(what: &str, limit: Duration, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, future)
        .await
        .unwrap_or_else(|_| panic!("{what} took longer than {limit:?}"))
}

/// What [`kill_mid_flight`] measured.
pub struct Restarted {
    /// The progress counter when the server was killed.
    pub before_kill: u64,
    /// How long the server took to accept connections again.
    pub recovered_in: Duration,
    /// From the server accepting connections to the counter moving again.
    pub healed: Duration,
}

/// SIGKILLs `server`, waits 300 ms (its clients see the connections drop)
/// and starts it again on the same port and data; answers how long the
/// start took. Every restart scenario's fault.
pub async fn kill_and_restart(server: &mut Throwaway) -> Duration {
    server.kill().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    server
        .restart()
        .await
        .unwrap_or_else(|err| panic!("restart: {err:#}"))
}

/// The fault of a restart scenario whose workers count their progress in
/// `progress`: once it reaches `kill_after`, SIGKILLs `server`, waits
/// 300 ms and starts it again, then waits for `progress` to move (each
/// wait bounded, `what` naming the work in a panic).
pub async fn kill_mid_flight(
    server: &mut Throwaway,
    progress: &AtomicU64,
    kill_after: u64,
    what: &str,
) -> Restarted {
    bounded(
        &format!("{what} under way"),
        Duration::from_secs(60),
        async {
            while progress.load(Ordering::SeqCst) < kill_after {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        },
    )
    .await;
    let before_kill = progress.load(Ordering::SeqCst);
    let recovered_in = kill_and_restart(server).await;
    let back = Instant::now();
    let at_restart = progress.load(Ordering::SeqCst);
    let healed = bounded(&format!("{what} again"), Duration::from_secs(30), async {
        while progress.load(Ordering::SeqCst) <= at_restart {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        back.elapsed()
    })
    .await;
    Restarted {
        before_kill,
        recovered_in,
        healed,
    }
}

/// A step scenario in progress: its steps, its ledger, its crew.
pub struct StepRun {
    pub store: Arc<DieselStore>,
    pub ledger: Arc<Ledger>,
    pub steps: Arc<[StepRef]>,
    pub crew: Crew,
}

impl StepRun {
    /// Seeds `runs` x `per_run` steps through `store` and starts a crew on
    /// them, the ledger written through `ledger_url` with one connection
    /// per worker.
    pub async fn start(
        store: Arc<DieselStore>,
        ledger_url: &str,
        runs: usize,
        per_run: usize,
        options: CrewOptions,
    ) -> Self {
        let steps: Arc<[StepRef]> = seed(&store, runs, per_run)
            .await
            .expect("seed the steps")
            .into();
        let ledger = Arc::new(Ledger::new(ledger_url, options.workers.min(8)));
        let crew = Crew::start("w", &store, &ledger, &steps, options);
        Self {
            store,
            ledger,
            steps,
            crew,
        }
    }

    /// Waits for the crew, runs the recovery pass (on a store whose lease
    /// clock reads past every claim's deadline: the crew is done, so any
    /// step still running is held by nobody) and the drain, and judges the
    /// database at `url` into `scenario`.
    pub async fn finish(self, scenario: &mut Scenario, url: &str) -> CrewReport {
        let progress = Arc::clone(&self.crew.progress);
        let crew = bounded("the crew", Duration::from_secs(120), self.crew.join())
            .await
            .expect("the crew's workers");
        // A crew done before the fault was over, or with a worker that
        // gave up before it was served again (every call failing for good),
        // measured no healing: probes do, before recovery runs.
        let probed = match (crew.heal, progress.healed_from()) {
            (None | Some(Err(_)), Some(since)) => Some(
                probe_heal(
                    Arc::clone(&self.store),
                    self.steps[0].run,
                    self.store.pool_size(),
                    since,
                    HEAL_BOUND,
                )
                .await,
            ),
            _ => None,
        };
        drop(self.store);
        let past = store_past_deadlines(url).await.expect("the recovery store");
        let recovery = bounded(
            "the recovery pass",
            Duration::from_secs(60),
            recover_and_drain(past, self.ledger, &self.steps),
        )
        .await
        .expect("the recovery pass");
        Verdict::judge(scenario, url, Some(&crew), &recovery)
            .await
            .expect("read the verdict");
        if matches!(crew.heal, Some(Ok(took)) if took >= HEAL_WORTH_ACCOUNTING) {
            scenario.note(crew.heal_account());
        }
        if let Some(heal) = probed {
            scenario.heal = heal;
            scenario.note("time to heal probed after the crew (its workers gave up first)");
        }
        crew
    }
}
