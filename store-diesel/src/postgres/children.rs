//! Children on PostgreSQL: one multi-row `INSERT ... ON CONFLICT
//! (idempotency_key) DO NOTHING`, so a child already stored under its key
//! is skipped.

use diesel_async::RunQueryDsl;

use super::Pool;
use crate::config::StoreConfig;
use crate::conflict::leased;
use crate::error::or_missing_run;
use crate::rows::RunRow;
use crate::schema::flowstate_runs as runs;

/// Inserts every child row of `parent` not already stored under its key;
/// a missing parent is [`flowstate_core::Error::RunNotFound`].
pub(super) async fn insert_children(
    pool: &Pool,
    _config: &StoreConfig,
    parent: flowstate_core::RunId,
    rows: Vec<RunRow>,
) -> flowstate_core::Result<usize> {
    let op = "create_children";
    leased!(pool, op, |conn| diesel::insert_into(runs::table)
        .values(&rows)
        .on_conflict(runs::idempotency_key)
        .do_nothing()
        .execute(conn)
        .await)
    .map_err(|err| or_missing_run(op, parent, err))
}
