//! PostgreSQL past one server (issue 34): stores through PgBouncer in
//! transaction mode, PgBouncer restarted under load, a Patroni primary
//! killed under load, and a planned Patroni switchover that demotes the
//! primary under load, each reached directly by a multi-host URL and
//! through PgBouncer.
//!
//! Each scenario runs 8 in-process workers per store over seeded steps, a
//! ledger row per execution, and ends like every scenario: one recovery
//! pass, the drain, the verdict read from the database. A failover's time
//! to heal runs from the standby taking writes (and, through PgBouncer,
//! PgBouncer pointed at it, as a Patroni callback would) to the first call
//! that succeeded on every worker; the promotion itself (Patroni's leader
//! TTL, 10 s here) is in the note.
//!
//! A switchover demotes the old primary: Patroni stops it with a fast
//! shutdown (every session on it ends, 57P01) and starts it again as a
//! standby of the new primary. Through PgBouncer still pointed at it,
//! every write is then refused with 25006 (`cannot execute UPDATE in a
//! read-only transaction`) until PgBouncer is retargeted: the scenario
//! waits until the workers met such refusals (each one a pooled connection
//! the store drops, the calls retried) and fails if they met none.
//! Directly, on the multi-host URL, no session outlives the demotion and
//! no new one picks a read-only server (`target_session_attrs`): the
//! scenario proves the first with a session of its own held on the old
//! primary across the switchover, and counts what the workers met.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flowstate_faults::cluster::{Patroni, PgBouncer};
use flowstate_faults::ledger::{self, Ledger};
use flowstate_faults::load::{Crew, CrewOptions, seed};
use flowstate_faults::recovery::{recover_and_drain, store_past_deadlines};
use flowstate_faults::shared::SharedDb;
use flowstate_faults::sql::RawConn;
use flowstate_faults::{Scenario, Verdict};
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig};

use crate::support::{StepRun, bounded, store};

/// Workers that wait out a failover rather than give up: the promotion
/// alone takes Patroni's leader TTL.
fn patient() -> CrewOptions {
    CrewOptions {
        patience: Duration::from_secs(30),
        deadline: Duration::from_secs(60),
        // A call made as the primary dies waits (in PgBouncer, or on the
        // connect) through Patroni's promotion, about 9-10 s here: delayed,
        // not hung. The default 10 s counted three such calls as hung once.
        call_timeout: Duration::from_secs(20),
        ..CrewOptions::default()
    }
}

/// `url` with `?pool_mode=transaction` (or `&...`).
fn pooled(url: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}pool_mode=transaction")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_stores_through_pgbouncer_transaction_mode_postgres() {
    const STORES: usize = 3;
    let db = SharedDb::migrated(Dialect::Postgres)
        .await
        .expect("the scenario's database");
    // Four server connections for 24 client connections: every server
    // connection serves every store's statements in turn.
    let bouncer = PgBouncer::start("127.0.0.1", 5432, 4)
        .await
        .expect("pgbouncer");
    let url = pooled(&bouncer.url(&db.name));
    let options = CrewOptions::default();
    let ledger = Arc::new(Ledger::new(&db.url, 8));
    let mut crews = Vec::new();
    let mut all = Vec::new();
    for i in 0..STORES {
        let store = store(&url, 8).await;
        let steps: Arc<[_]> = seed(&store, 20, 10).await.expect("seed").into();
        all.extend(steps.iter().cloned());
        let name = ["a", "b", "c"][i];
        crews.push(Crew::start(name, &store, &ledger, &steps, options));
    }
    let mut scenario = Scenario::new(
        "three stores through PgBouncer in transaction mode",
        Dialect::Postgres,
        format!("{STORES} stores x 200 steps, 8 workers each, 4 server connections"),
        "none: statements of three pools on four shared server connections".into(),
    );
    let mut errors = 0;
    for crew in crews {
        let report = bounded("a crew", Duration::from_secs(120), crew.join())
            .await
            .expect("the crew's workers");
        scenario.wrong += report.total.not_retryable + report.total.hung + report.total.claims_lost;
        errors += report.total.retries + report.total.gave_up + report.total.pool_timeouts;
        if let Some(sample) = report.total.samples.first() {
            scenario.note(format!("first error: {sample}"));
        }
    }
    let past = store_past_deadlines(&db.url).await.expect("recovery store");
    let recovery = bounded(
        "the recovery pass",
        Duration::from_secs(60),
        recover_and_drain(past, ledger, &all),
    )
    .await
    .expect("the recovery pass");
    let wrong = scenario.wrong;
    Verdict::judge(&mut scenario, &db.url, None, &recovery)
        .await
        .expect("read the verdict");
    scenario.wrong += wrong;
    // Through a transaction-mode pooler nothing fails: not even a
    // retryable error is allowed here.
    scenario.wrong += errors;
    scenario.note(format!("{errors} retried errors"));
    scenario.finish();
}

/// A fleet starting at once through PgBouncer in transaction mode on a
/// database never migrated: every store's `open_migrated` (the migrations
/// under their transaction-scoped lock, then the schema check, all on the
/// pooler's kind of connection) succeeds, each migration applied once,
/// and a store opened after them finds the schema current.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_opens_migrated_through_pgbouncer_at_once_postgres() {
    const STORES: usize = 6;
    let db = SharedDb::empty(Dialect::Postgres)
        .await
        .expect("the scenario's database");
    // Fewer server connections than migrators: every server connection
    // serves several of them in turn, as `s100 does not exist` needed.
    let bouncer = PgBouncer::start("127.0.0.1", 5432, 3)
        .await
        .expect("pgbouncer");
    let url = pooled(&bouncer.url(&db.name));
    let started = Instant::now();
    let opens: Vec<_> = (0..STORES)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                let config = StoreConfig::default()
                    .pool_size(2)
                    .acquire_timeout(Duration::from_secs(5));
                DieselStore::open_migrated(&url, config).await
            })
        })
        .collect();
    let mut failed = Vec::new();
    for open in opens {
        match bounded("an open_migrated", Duration::from_secs(120), open)
            .await
            .expect("the open's task")
        {
            Ok(store) => drop(store),
            Err(err) => failed.push(format!("{err} ({err:?})")),
        }
    }
    let took = started.elapsed();
    assert!(
        failed.is_empty(),
        "{} of {STORES} open_migrated through PgBouncer failed: {failed:?}\npgbouncer log: {}",
        failed.len(),
        bouncer.log_tail(5)
    );
    let states = flowstate_store_diesel::migrate::status(&url)
        .await
        .expect("status through PgBouncer");
    assert!(
        !states.is_empty() && states.iter().all(|s| s.applied),
        "{states:?}"
    );
    // Each version recorded once: diesel's table has as many rows as
    // there are migrations.
    let recorded = count_migrations(&db.url).await;
    assert_eq!(recorded, states.len(), "versions recorded once each");
    let _after = store(&url, 2).await;
    eprintln!(
        "{STORES} open_migrated at once through PgBouncer (3 server connections): \
         all succeeded in {} ms, {recorded} migrations applied once",
        took.as_millis()
    );
}

/// How many rows diesel's migrations table holds on `url` (directly).
async fn count_migrations(url: &str) -> usize {
    use diesel::QueryableByName;
    use diesel_async::{AsyncConnection as _, RunQueryDsl as _};
    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = diesel_async::AsyncPgConnection::establish(url)
        .await
        .expect("a direct connection");
    let count: Count = diesel::sql_query("SELECT count(*) AS n FROM __diesel_schema_migrations")
        .get_result(&mut conn)
        .await
        .expect("count the migrations");
    usize::try_from(count.n).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbouncer_restarted_under_load_postgres() {
    let db = SharedDb::migrated(Dialect::Postgres)
        .await
        .expect("the scenario's database");
    let mut bouncer = PgBouncer::start("127.0.0.1", 5432, 4)
        .await
        .expect("pgbouncer");
    let url = pooled(&bouncer.url(&db.name));
    let options = CrewOptions::default();
    let run = StepRun::start(store(&url, 8).await, &db.url, 40, 10, options).await;
    bounded(
        "100 completions",
        Duration::from_secs(30),
        run.crew.progress.wait_for(100, Duration::from_secs(30)),
    )
    .await
    .expect("the load is under way");
    let back_in = bouncer.restart().await.expect("restart pgbouncer");
    run.crew.progress.fault_over();
    let mut scenario = Scenario::new(
        "PgBouncer restarted under load",
        Dialect::Postgres,
        format!("400 steps, {} workers, transaction mode", options.workers),
        "PgBouncer stopped (every client cut) and started again".into(),
    );
    scenario.note(format!("PgBouncer back in {} ms", back_in.as_millis()));
    run.finish(&mut scenario, &db.url).await;
    if !scenario.held() {
        scenario.note(format!("pgbouncer log: {}", bouncer.log_tail(3)));
    }
    scenario.finish();
}

/// The failover scenario: a Patroni pair, 8 workers through the
/// multi-host URL (or through PgBouncer in front of the primary), the
/// primary's machine lost (postmaster and agent SIGKILLed), the standby
/// promoted.
async fn failover_under_load(through_bouncer: bool) {
    let mut pair = Patroni::start().await.expect("a Patroni pair");
    let direct = pair
        .create_database("flowstate")
        .await
        .expect("the scenario's database");
    flowstate_store_diesel::migrate::up(&direct)
        .await
        .expect("migrate");
    ledger::create(&direct).await.expect("the ledger");
    // The ledger, the recovery and the verdict follow the primary too.
    let multi = format!("{}&connect_timeout=2", pair.multi_host_url("flowstate"));
    let mut bouncer = if through_bouncer {
        Some(
            PgBouncer::start("127.0.0.1", pair.primary_port(), 8)
                .await
                .expect("pgbouncer"),
        )
    } else {
        None
    };
    let url = bouncer
        .as_ref()
        .map_or_else(|| multi.clone(), |b| pooled(&b.url("flowstate")));
    let options = patient();
    let run = StepRun::start(store(&url, 8).await, &multi, 40, 10, options).await;
    bounded(
        "100 completions",
        Duration::from_secs(30),
        run.crew.progress.wait_for(100, Duration::from_secs(30)),
    )
    .await
    .expect("the load is under way");
    let done_before = run.crew.progress.completed();
    pair.kill_primary().await;
    let promoted_in = pair
        .wait_for_promotion()
        .await
        .unwrap_or_else(|err| panic!("promotion: {err:#}"));
    let retargeted = Instant::now();
    if let Some(bouncer) = bouncer.as_mut() {
        bouncer
            .retarget("127.0.0.1", pair.primary_port())
            .expect("point pgbouncer at the new primary");
    }
    run.crew.progress.fault_over();
    let (name, fault) = if through_bouncer {
        (
            "Patroni failover under load through PgBouncer",
            "SIGKILL of the primary and its agent, standby promoted, PgBouncer reloaded onto it",
        )
    } else {
        (
            "Patroni failover under load",
            "SIGKILL of the primary and its agent, standby promoted; multi-host URL",
        )
    };
    let mut scenario = Scenario::new(
        name,
        Dialect::Postgres,
        format!("400 steps, {} workers", options.workers),
        fault.into(),
    );
    scenario.note(format!(
        "{done_before} done before the kill; standby promoted {} ms after it{}",
        promoted_in.as_millis(),
        if through_bouncer {
            format!(
                ", PgBouncer reloaded in {} ms",
                retargeted.elapsed().as_millis()
            )
        } else {
            String::new()
        }
    ));
    run.finish(&mut scenario, &multi).await;
    if !scenario.held() {
        scenario.note(format!(
            "members' logs: {} / {}",
            pair.log_tail(0, 3),
            pair.log_tail(1, 3)
        ));
    }
    scenario.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patroni_failover_under_load_postgres() {
    failover_under_load(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patroni_failover_through_pgbouncer_postgres() {
    failover_under_load(true).await;
}

/// How long PgBouncer keeps serving the demoted primary once the workers
/// met its first read-only refusal.
const ON_THE_STANDBY: Duration = Duration::from_secs(1);

/// Runs of 10 steps the switchover scenarios seed.
const RUNS: usize = 120;

/// The switchover scenario: a Patroni pair, 8 workers through the
/// multi-host URL (or through PgBouncer in front of the primary), a
/// planned switchover (Patroni's REST API) demoting the primary to a
/// standby of the promoted one; through PgBouncer, PgBouncer keeps
/// pointing at the demoted primary until the workers met its read-only
/// refusals, then is retargeted onto the new primary.
async fn switchover_under_load(through_bouncer: bool) {
    let mut pair = Patroni::start().await.expect("a Patroni pair");
    let direct = pair
        .create_database("flowstate")
        .await
        .expect("the scenario's database");
    flowstate_store_diesel::migrate::up(&direct)
        .await
        .expect("migrate");
    ledger::create(&direct).await.expect("the ledger");
    // The ledger and the recovery follow the primary.
    let multi = format!("{}&connect_timeout=2", pair.multi_host_url("flowstate"));
    let old = pair.primary_member();
    let mut bouncer = if through_bouncer {
        Some(
            PgBouncer::start("127.0.0.1", pair.primary_port(), 8)
                .await
                .expect("pgbouncer"),
        )
    } else {
        None
    };
    let url = bouncer
        .as_ref()
        .map_or_else(|| multi.clone(), |b| pooled(&b.url("flowstate")));
    // Each step held 20 ms: the load outlasts the switchover, the old
    // primary's return as a standby and (through PgBouncer) its refusals.
    let options = CrewOptions {
        hold: Duration::from_millis(20),
        ..patient()
    };
    let run = StepRun::start(store(&url, 8).await, &multi, RUNS, 10, options).await;
    bounded(
        "100 completions",
        Duration::from_secs(30),
        run.crew.progress.wait_for(100, Duration::from_secs(30)),
    )
    .await
    .expect("the load is under way");
    // A session of our own on the old primary, held across the
    // switchover: does any session outlive the demotion?
    let mut witness = bounded(
        "a session on the primary",
        Duration::from_secs(5),
        RawConn::connect(&pair.member_url(old, "flowstate")),
    )
    .await
    .expect("a session on the primary");
    let sessions = bounded(
        "count the sessions on the primary",
        Duration::from_secs(5),
        witness.count(
            "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE datname = 'flowstate' \
             AND backend_type = 'client backend' AND pid <> pg_backend_pid()",
        ),
    )
    .await
    .expect("count the sessions on the primary");
    let postmaster_before = pair.postmaster_pid(old);
    let done_before = run.crew.progress.completed();
    let switched_in = pair
        .switchover()
        .await
        .unwrap_or_else(|err| panic!("switchover: {err:#}"));
    let switched = Instant::now();
    if !through_bouncer {
        run.crew.progress.fault_over();
    }
    let standby_in = pair
        .wait_for_standby()
        .await
        .unwrap_or_else(|err| panic!("the old primary as a standby: {err:#}"));
    let postmaster_after = pair.postmaster_pid(old);
    let witness_after = bounded(
        "a statement on the session held across the switchover",
        Duration::from_secs(5),
        witness.run_sql("SELECT 1"),
    )
    .await;
    drop(witness);
    let mut read_only_at_retarget = 0;
    let mut retargeted_in = Duration::ZERO;
    if let Some(bouncer) = bouncer.as_mut() {
        // PgBouncer still sends every statement to the old primary, now a
        // standby: the workers' writes are refused there until it moves.
        // Once the first is met, PgBouncer stays on it a while longer.
        let met = run
            .crew
            .progress
            .wait_for_read_only(1, Duration::from_secs(10))
            .await;
        if let Err(err) = met {
            panic!(
                "through PgBouncer on the demoted primary: {err:#}; pgbouncer log: {}",
                bouncer.log_tail(10)
            );
        }
        tokio::time::sleep(ON_THE_STANDBY).await;
        read_only_at_retarget = run.crew.progress.read_only();

        retargeted_in = switched.elapsed();
        bouncer
            .retarget("127.0.0.1", pair.primary_port())
            .expect("point pgbouncer at the new primary");
        run.crew.progress.fault_over();
    }
    let (name, fault) = if through_bouncer {
        (
            "Patroni switchover under load through PgBouncer",
            "planned switchover (REST POST /switchover): the primary demoted to a standby; \
             PgBouncer still on it until writes were refused read-only, then reloaded onto the \
             new primary",
        )
    } else {
        (
            "Patroni switchover under load",
            "planned switchover (REST POST /switchover): the primary demoted to a standby; \
             multi-host URL",
        )
    };
    let mut scenario = Scenario::new(
        name,
        Dialect::Postgres,
        format!("{} steps, {} workers", RUNS * 10, options.workers),
        fault.into(),
    );
    scenario.note(format!(
        "{done_before} done before the switchover, {sessions} sessions on the old primary; \
         switchover {} ms (request to the new primary taking writes), old primary streaming \
         as a standby {} ms after it (postmaster {} then {}){}",
        switched_in.as_millis(),
        standby_in.as_millis(),
        postmaster_before.map_or_else(|| "-".into(), |pid| pid.to_string()),
        postmaster_after.map_or_else(|| "-".into(), |pid| pid.to_string()),
        if through_bouncer {
            format!(
                ", PgBouncer left on it {} ms ({read_only_at_retarget} read-only refusals met by \
                 then)",
                retargeted_in.as_millis()
            )
        } else {
            String::new()
        }
    ));
    let survived = witness_after.is_ok();
    scenario.note(match &witness_after {
        Ok(()) => "a session held on the old primary outlived the demotion".to_owned(),
        Err(err) => format!("a session held on the old primary ended with the demotion: {err}"),
    });
    // Verdict read on the new primary.
    let crew = run
        .finish(&mut scenario, &pair.primary_url("flowstate"))
        .await;
    let read_only = crew.total.read_only;
    // What the old primary itself logged: writes it refused read-only,
    // and the store's health check of a pooled connection failing on it
    // (its text, from the check store-diesel sends on PostgreSQL).
    let refused = pair.log_lines(old, "in a read-only transaction");
    let checks = pair.log_lines(old, "the server takes no writes");
    scenario.note(format!(
        "{read_only} read-only refusals (25006) met by the workers and retried; the old \
         primary logged {refused} writes refused read-only and {checks} failed health checks \
         (pooled connections dropped)"
    ));
    if !scenario.held() {
        scenario.note(format!(
            "members' logs: {} / {}",
            pair.log_tail(0, 3),
            pair.log_tail(1, 3)
        ));
    }
    scenario.finish();
    // Not vacuous: through PgBouncer the workers met the read-only server;
    // directly, they met it or no session could (the demotion ended them).
    assert!(
        crew.total.retries >= 1,
        "no worker met the switchover: the load ended before it"
    );
    if through_bouncer {
        assert!(
            read_only >= 1,
            "no worker met the demoted primary's read-only refusal"
        );
    } else {
        assert!(
            read_only >= 1 || !survived,
            "a session outlived the demotion, yet no worker met a read-only refusal"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patroni_switchover_under_load_postgres() {
    switchover_under_load(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patroni_switchover_through_pgbouncer_postgres() {
    switchover_under_load(true).await;
}
