//! The pool on MySQL: a call that cannot get a connection in time fails
//! with `PoolTimeout` promptly, and works again once one is free.

use std::time::{Duration, Instant};

use flowstate_core::{Error, RunStore};
use flowstate_store_diesel::StoreConfig;
use serde_json::json;

use crate::records;
use crate::support::TestDb;

#[tokio::test]
async fn a_busy_pool_times_out_instead_of_hanging() {
    let db = TestDb::migrated().await;
    let config = StoreConfig::default()
        .pool_size(1)
        .acquire_timeout(Duration::from_millis(200));
    let store = db.store(config).await;
    let run = records::run(&store, json!(1)).await;

    let held = store.pool().get("hold").await.unwrap();
    let started = Instant::now();
    let outcome = store.get_run(run.id).await;
    let waited = started.elapsed();
    assert!(
        matches!(outcome, Err(Error::PoolTimeout { waited_ms: 200 })),
        "{outcome:?}"
    );
    assert!(outcome.unwrap_err().is_retryable());
    assert!(
        waited >= Duration::from_millis(150),
        "gave up after {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(2),
        "waited {waited:?} for a 200 ms timeout"
    );

    drop(held);
    assert_eq!(store.get_run(run.id).await.unwrap().id, run.id);
    db.drop_database().await;
}

#[tokio::test]
async fn a_server_that_is_not_there_is_a_connect_error() {
    let started = Instant::now();
    let config = StoreConfig::default().acquire_timeout(Duration::from_secs(2));
    let outcome =
        flowstate_store_diesel::mysql::MysqlStore::connect("mysql://root@127.0.0.1:1/nope", config)
            .await;
    assert!(
        matches!(
            outcome,
            Err(flowstate_store_diesel::Error::Connect {
                dialect: "mysql",
                ..
            })
        ),
        "{outcome:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}
