//! Children on SQLite: one `BEGIN IMMEDIATE` write inserting each child
//! row that is not already stored under its key (SQLite takes no multi-row
//! upsert from diesel).

use diesel::prelude::*;

use super::{Pool, TxError, write};
use crate::config::StoreConfig;
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
    write(pool, "create_children", move |conn| {
        let mut inserted = 0;
        for row in &rows {
            inserted += match diesel::insert_into(runs::table)
                .values(row)
                .on_conflict(runs::idempotency_key)
                .do_nothing()
                .execute(conn)
            {
                Ok(n) => n,
                Err(err) => {
                    let err = crate::error::or_missing_run("create_children", parent, err);
                    return Err(TxError::Port(err));
                }
            };
        }
        Ok(inserted)
    })
    .await
}
