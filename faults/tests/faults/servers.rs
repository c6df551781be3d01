//! The throw-away servers themselves: a database on one survives a crash
//! and a restart on the same port, and dropping the server stops every
//! process it started and removes its directory.

use std::path::Path;
use std::time::Duration;

use flowstate_faults::Throwaway;
use flowstate_faults::sql::RawConn;
use flowstate_store_diesel::Dialect;

async fn crash_restart_and_drop(dialect: Dialect) {
    let mut server = Throwaway::start(dialect)
        .await
        .expect("a throw-away server");
    let (port, dir) = (server.port(), server.dir().to_owned());
    let url = server
        .migrated_database("flowstate")
        .await
        .expect("a database");
    let mut conn = RawConn::connect(&url).await.expect("connect");
    conn.run_sql("INSERT INTO fault_ledger VALUES ('s', 1, 'w', 0)")
        .await
        .expect("write a row");
    drop(conn);
    let first = server.pid().expect("running");
    server.kill().await;
    assert!(!alive(first), "the killed server still runs");
    server.restart().await.expect("a restart");
    assert_eq!(server.port(), port, "restarted on another port");
    let mut conn = RawConn::connect(&url)
        .await
        .expect("connect after the restart");
    let rows = conn
        .count("SELECT COUNT(*) AS n FROM fault_ledger")
        .await
        .expect("read after the restart");
    assert_eq!(rows, 1, "a committed row did not survive the crash");
    drop(conn);
    let second = server.pid().expect("running");
    drop(server);
    assert!(!alive(second), "the dropped server still runs");
    assert!(!dir.exists(), "{} is left behind", dir.display());
}

/// Whether process `pid` exists (and is not a zombie), within a second.
fn alive(pid: u32) -> bool {
    for _ in 0..100 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
        let gone = stat.map_or(true, |stat| stat.contains(") Z "));
        if gone || !Path::new(&format!("/proc/{pid}")).exists() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throwaway_postgres_survives_a_crash_and_leaves_nothing() {
    crash_restart_and_drop(Dialect::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throwaway_mariadb_survives_a_crash_and_leaves_nothing() {
    crash_restart_and_drop(Dialect::Mysql).await;
}
