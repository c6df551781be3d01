//! The pool on MySQL: a call that cannot get a connection in time fails
//! with a typed, retryable `PoolTimeout` instead of hanging, and works
//! again once one is free; a server that is not there is a typed connect
//! error when the store is opened.

use std::time::Duration;

use flowstate_core::Error;
use flowstate_core::ports::RunStore;
use flowstate_store_diesel::{Dialect, DieselStore, StoreConfig};
use serde_json::json;

use crate::common::db::TestDb;
use crate::common::records;

/// A bound on a call that must answer (with an error) after its timeout: a
/// hang guard, far above any answer, not a timing check.
const HANG_GUARD: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_busy_pool_times_out_instead_of_hanging() {
    let db = TestDb::migrated(Dialect::Mysql).await;
    let config = StoreConfig::default()
        .pool_size(1)
        .acquire_timeout(Duration::from_millis(200));
    let store = db.store(config).await;
    let run = records::run(&store, json!(1)).await;

    let held = store.reserve_connection().await.unwrap();
    let outcome = tokio::time::timeout(HANG_GUARD, store.get_run(run.id))
        .await
        .expect("a call on a busy pool hung instead of timing out");
    match outcome {
        Err(err @ Error::PoolTimeout { waited_ms: 200 }) => assert!(err.is_retryable(), "{err}"),
        other => panic!("expected PoolTimeout after 200 ms, got {other:?}"),
    }

    drop(held);
    assert_eq!(store.get_run(run.id).await.unwrap(), run);
    drop(store);
    db.drop_database().await;
}

#[tokio::test]
async fn a_server_that_is_not_there_is_a_connect_error() {
    let config = StoreConfig::default().acquire_timeout(Duration::from_secs(2));
    let outcome = tokio::time::timeout(
        HANG_GUARD,
        DieselStore::open("mysql://root@127.0.0.1:1/nope", config),
    )
    .await
    .expect("opening on a closed port hung");
    match outcome {
        Err(
            err @ flowstate_store_diesel::Error::Connect {
                dialect: Dialect::Mysql,
                ..
            },
        ) => assert!(err.is_retryable(), "{err}"),
        other => panic!("expected a mysql Connect error, got {other:?}"),
    }
}
