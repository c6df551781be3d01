//! Children on PostgreSQL: one multi-row `INSERT` that skips the keys
//! already taken.

use diesel_async::RunQueryDsl;

use super::Pool;
use crate::config::StoreConfig;
use crate::rows::RunRow;
use crate::schema::flowstate_runs as runs;
use crate::store::conflict::retry_conflicts;

/// Inserts every child row of `parent` not already stored under its key;
/// a missing parent is [`flowstate_core::Error::RunNotFound`].
pub(crate) async fn insert_children(
    pool: &Pool,
    _config: &StoreConfig,
    parent: flowstate_core::RunId,
    rows: Vec<RunRow>,
) -> flowstate_core::Result<usize> {
    let mut conn = pool.get("create_children").await?;
    retry_conflicts!(
        "create_children",
        diesel::insert_into(runs::table)
            .values(&rows)
            .on_conflict(runs::idempotency_key)
            .do_nothing()
            .execute(&mut *conn)
            .await
    )
    .map_err(|err| crate::error::or_missing_run("create_children", parent, err))
}
