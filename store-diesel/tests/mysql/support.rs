//! What the MySQL-only tests share over `common::db`: a connection of
//! their own to a test database, outside any store, a seeded database with
//! a store that logs what it sends (the plan tests' start), one-column rows
//! for ad-hoc reads, and bounded waits for something that must happen (a
//! lock wait the server reports).

use std::sync::Arc;

use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use flowstate_store_diesel::{Dialect, DieselStore, StatementLog, StoreConfig};

use crate::common::db::TestDb;

/// A connection of its own to `db`, outside any store (it keeps the
/// server's session defaults).
pub async fn connection(db: &TestDb) -> AsyncMysqlConnection {
    AsyncMysqlConnection::establish(&db.url)
        .await
        .unwrap_or_else(|err| panic!("cannot connect to {}: {err}", db.url))
}

/// A fresh migrated database with `seed` (SQL statements) run on it, a
/// connection of its own to it (for `EXPLAIN`), the log of what the store
/// sends, and the store: what the plan tests start from. The test drops
/// the database at the end.
pub async fn seeded(seed: &str) -> (TestDb, AsyncMysqlConnection, Arc<StatementLog>, DieselStore) {
    let db = TestDb::migrated(Dialect::Mysql).await;
    let mut conn = connection(&db).await;
    conn.batch_execute(seed).await.expect("seed");
    let log = StatementLog::new();
    let store = db
        .store(StoreConfig::default().statement_log(log.clone()))
        .await;
    (db, conn, log, store)
}

/// One column of text, for ad-hoc reads.
#[derive(Debug, diesel::QueryableByName)]
pub struct TextRow {
    /// `v`
    #[diesel(sql_type = Text)]
    pub v: String,
}

/// One count, for ad-hoc reads.
#[derive(Debug, diesel::QueryableByName)]
pub struct CountRow {
    /// `n`
    #[diesel(sql_type = BigInt)]
    pub n: i64,
}

/// Runs `sql` (a query selecting `n`) on `conn`.
pub async fn count(conn: &mut AsyncMysqlConnection, sql: &str) -> i64 {
    diesel::sql_query(sql)
        .get_result::<CountRow>(conn)
        .await
        .expect(sql)
        .n
}

/// How many times [`eventually`] looks before it gives up.
const LOOKS: u32 = 150;

/// Waits for `done` to hold, looking every 200 ms, and panics naming
/// `what` if it still does not after 30 s: a bound on something that must
/// happen (a hang guard), not a timing check. Not faster: InnoDB refreshes
/// its `INNODB_TRX` cache only once it has gone 100 ms unread, so polling
/// it more often reads the same stale rows forever.
pub async fn eventually<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..LOOKS {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        if done().await {
            return;
        }
    }
    panic!("never happened: {what}");
}

/// How many transactions on the server wait for a row lock right now.
pub async fn lock_waits(db: &TestDb) -> i64 {
    let mut conn = connection(db).await;
    count(
        &mut conn,
        "SELECT COUNT(*) AS n FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'",
    )
    .await
}
