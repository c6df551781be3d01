//! What the PostgreSQL-only tests share, over `common::db`.

use std::sync::Arc;

use flowstate_store_diesel::{Dialect, DieselStore, StatementLog, StoreConfig};

use crate::common::db::TestDb;

/// A fresh, empty database (no schema); answers its URL.
pub async fn fresh_database() -> String {
    let db = TestDb::empty(Dialect::Postgres).await;
    db.url.clone()
}

/// Drops the database at `url`.
pub async fn drop_database(url: &str) {
    let name = url.rsplit('/').next().expect("a database url").to_owned();
    TestDb {
        dialect: Dialect::Postgres,
        name,
        url: url.to_owned(),
    }
    .drop_database()
    .await;
}

/// A store on a fresh migrated database recording every statement in the
/// log it answers, and the database's URL.
pub async fn logged_store() -> (DieselStore, Arc<StatementLog>, String) {
    let db = TestDb::migrated(Dialect::Postgres).await;
    let log = StatementLog::new();
    let store = db
        .store(StoreConfig::default().statement_log(log.clone()))
        .await;
    (store, log, db.url.clone())
}
