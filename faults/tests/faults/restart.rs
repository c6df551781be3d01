//! Server restart under load: 8 in-process workers claim and complete 400
//! steps through one store while the throw-away server is SIGKILLed and
//! started again; the same store (no new process, no new pool) must serve
//! every worker again, nothing lost, nothing run twice, nothing stuck.
//! Time to heal runs from the server accepting connections again to the
//! first call that succeeded on every worker.

use std::time::Duration;

use flowstate_faults::Scenario;
use flowstate_faults::load::CrewOptions;
use flowstate_store_diesel::Dialect;

use crate::support::{StepRun, bounded, kill_and_restart, migrated_server, store};

async fn server_restart_under_load(dialect: Dialect) {
    let (mut server, url) = migrated_server(dialect).await;
    let options = CrewOptions::default();
    let run = StepRun::start(store(&url, 8).await, &url, 40, 10, options).await;
    bounded(
        "100 completions",
        Duration::from_secs(30),
        run.crew.progress.wait_for(100, Duration::from_secs(30)),
    )
    .await
    .expect("the load is under way");
    let recovered_in = kill_and_restart(&mut server).await;
    run.crew.progress.fault_over();
    let mut scenario = Scenario::new(
        "server restart under load",
        dialect,
        format!("400 steps, {} workers", options.workers),
        "SIGKILL of the server, restart".into(),
    );
    scenario.note(format!("server back in {} ms", recovered_in.as_millis()));
    run.finish(&mut scenario, &url).await;
    if !scenario.held() {
        scenario.note(format!("server log: {}", server.log_tail(3)));
    }
    scenario.finish();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_under_load_postgres() {
    server_restart_under_load(Dialect::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_under_load_mariadb() {
    server_restart_under_load(Dialect::Mysql).await;
}
