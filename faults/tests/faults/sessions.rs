//! All sessions killed: 8 in-process workers claim and complete 200 steps
//! while every connection is ended at once, either on the wire (the
//! proxy's `cut_all`, both ways, a reset) or by the server's administrator
//! (`pg_terminate_backend`, `KILL`). The server stays up; the same store
//! must serve every worker again. Time to heal runs from the cut to the
//! first call that succeeded on every worker.

use std::time::Duration;

use flowstate_faults::load::CrewOptions;
use flowstate_faults::{FaultProxy, Scenario};
use flowstate_store_diesel::Dialect;

use crate::support::{StepRun, bounded, migrated_server, store};

/// How the sessions die.
#[derive(Clone, Copy)]
enum Cut {
    /// The proxy resets every connection.
    Wire,
    /// The server ends every session of the database.
    Admin,
}

async fn all_sessions_killed(dialect: Dialect, cut: Cut) {
    let (server, url) = migrated_server(dialect).await;
    let proxy = FaultProxy::to_local(server.port())
        .await
        .expect("the proxy");
    // Through the proxy for the wire cut (store and ledger both), straight
    // to the server for the administrator's.
    let work_url = match cut {
        Cut::Wire => server.via_port(&url, proxy.port()),
        Cut::Admin => url.clone(),
    };
    let options = CrewOptions::default();
    let run = StepRun::start(store(&work_url, 8).await, &work_url, 20, 10, options).await;
    bounded(
        "60 completions",
        Duration::from_secs(30),
        run.crew.progress.wait_for(60, Duration::from_secs(30)),
    )
    .await
    .expect("the load is under way");
    let (fault, killed) = match cut {
        Cut::Wire => ("proxy cut_all (reset both ways)", proxy.cut_all()),
        Cut::Admin => {
            let how = match dialect {
                Dialect::Postgres => "pg_terminate_backend of every session",
                _ => "KILL of every session",
            };
            let killed = server
                .kill_sessions("flowstate")
                .await
                .expect("kill the sessions");
            (how, killed)
        }
    };
    run.crew.progress.fault_over();
    let mut scenario = Scenario::new(
        "all sessions killed",
        dialect,
        format!("200 steps, {} workers", options.workers),
        fault.into(),
    );
    scenario.note(format!("{killed} sessions ended"));
    assert!(killed > 0, "the fault ended no session");
    run.finish(&mut scenario, &url).await;
    scenario.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_sessions_cut_on_the_wire_postgres() {
    all_sessions_killed(Dialect::Postgres, Cut::Wire).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_sessions_cut_on_the_wire_mariadb() {
    all_sessions_killed(Dialect::Mysql, Cut::Wire).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_sessions_terminated_by_the_server_postgres() {
    all_sessions_killed(Dialect::Postgres, Cut::Admin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_sessions_terminated_by_the_server_mariadb() {
    all_sessions_killed(Dialect::Mysql, Cut::Admin).await;
}
