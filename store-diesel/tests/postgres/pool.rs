//! The pool on PostgreSQL: a call that cannot get a connection within the
//! acquire timeout fails with `Error::PoolTimeout`, promptly, never hangs.

use std::time::{Duration, Instant};

use flowstate_core::{Error, RunStore};
use flowstate_store_diesel::StoreConfig;
use serde_json::json;

use crate::records;
use crate::support;

#[tokio::test]
async fn a_busy_pool_times_out_with_a_typed_error() {
    let config = StoreConfig::default()
        .pool_size(1)
        .acquire_timeout(Duration::from_millis(200));
    let (store, url) = support::store_with(config).await;
    let run = records::run(&store, json!({})).await;

    let held = store.pool().get("test").await.unwrap();
    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(5), store.get_run(run.id))
        .await
        .expect("a call on a busy pool hung instead of timing out");
    let waited = started.elapsed();
    match result {
        Err(err @ Error::PoolTimeout { waited_ms }) => {
            assert_eq!(waited_ms, 200);
            assert!(err.is_retryable());
        }
        other => panic!("expected PoolTimeout, got {other:?}"),
    }
    assert!(
        waited >= Duration::from_millis(190),
        "gave up after {waited:?}, before the timeout"
    );
    assert!(
        waited < Duration::from_secs(2),
        "took {waited:?} to give up"
    );

    drop(held);
    assert_eq!(
        store.get_run(run.id).await.unwrap(),
        run,
        "the released connection serves again"
    );
    support::drop_database(&url).await;
}
