//! The pool on PostgreSQL: a call that cannot get a connection within the
//! acquire timeout fails with a typed, retryable `Error::PoolTimeout`
//! instead of hanging, and the connection serves again once given back.

use std::time::Duration;

use flowstate_core::Error;
use flowstate_core::ports::RunStore;
use flowstate_store_diesel::{Dialect, StoreConfig};
use serde_json::json;

use crate::common::db::TestDb;
use crate::common::records;

/// A bound on a call that must answer (with an error) after the 200 ms
/// acquire timeout: a hang guard, far above any answer, not a timing check.
const HANG_GUARD: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_busy_pool_times_out_with_a_typed_error() {
    let db = TestDb::migrated(Dialect::Postgres).await;
    let config = StoreConfig::default()
        .pool_size(1)
        .acquire_timeout(Duration::from_millis(200));
    let store = db.store(config).await;
    let run = records::run(&store, json!({})).await;

    let held = store.reserve_connection().await.unwrap();
    let result = tokio::time::timeout(HANG_GUARD, store.get_run(run.id))
        .await
        .expect("a call on a busy pool hung instead of timing out");
    match result {
        Err(err @ Error::PoolTimeout { waited_ms }) => {
            assert_eq!(waited_ms, 200, "the error reports the configured wait");
            assert!(err.is_retryable(), "{err}");
        }
        other => panic!("expected PoolTimeout, got {other:?}"),
    }
    // A reservation waits the same way as a call.
    match store.reserve_connection().await {
        Err(Error::PoolTimeout { waited_ms: 200 }) => {}
        other => panic!("expected PoolTimeout for a second reservation, got {other:?}"),
    }

    drop(held);
    assert_eq!(
        store.get_run(run.id).await.unwrap(),
        run,
        "the released connection serves again"
    );
    drop(store);
    db.drop_database().await;
}
