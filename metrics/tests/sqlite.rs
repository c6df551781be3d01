//! The metered scenario on `DieselStore` over an SQLite file, counted
//! exactly as on `MemoryStore`: the counts come from the ports, so every
//! backend reports the same.

mod support;

use flowstate_store_diesel::{DieselStore, StoreConfig};

#[test]
fn sqlite_store_counts() {
    let path = std::env::temp_dir().join(format!(
        "flowstate-metrics-{}-{}.db",
        std::process::id(),
        flowstate_core::RunId::generate()
    ));
    let url = format!("sqlite://{}", path.display());
    let got = support::recorded(|| async {
        let store = DieselStore::open_migrated(&url, StoreConfig::default().pool_size(2))
            .await
            .expect("an SQLite store");
        Box::pin(support::scenario(store)).await;
    });
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    support::assert_counts(&got);
}
