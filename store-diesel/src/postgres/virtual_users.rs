//! Appending to a virtual-user run's transcript on PostgreSQL: the guarded
//! `UPDATE ... RETURNING transcript_len` that admits the chunk and takes
//! its positions, then the chunk's one multi-row `INSERT`, in one
//! transaction.

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};

use flowstate_core::Result;

use super::Pool;
use crate::config::StoreConfig;
use crate::conflict::leased;
use crate::error::backend;
use crate::rows::virtual_users::{chunk_admitted, running_run, transcript_rows};
use crate::schema::{
    flowstate_virtual_user_runs as runs, flowstate_virtual_user_transcript as transcript,
};

/// Appends `entries` (JSON text) to running run `id` at `now`: the new
/// transcript length, or `None` if no running run `id` matched.
pub(super) async fn append_transcript(
    pool: &Pool,
    _config: &StoreConfig,
    id: String,
    entries: Vec<String>,
    now: i64,
) -> Result<Option<i64>> {
    let op = "append_transcript";
    let n = entries.len() as i64;
    leased!(pool, op, |conn| conn
        .transaction(async |conn| {
            let Some(len) = diesel::update(running_run(&id))
                .set(chunk_admitted(n, now))
                .returning(runs::transcript_len)
                .get_result::<i64>(conn)
                .await
                .optional()?
            else {
                return Ok(None);
            };
            diesel::insert_into(transcript::table)
                .values(transcript_rows(&id, &entries, len, now))
                .execute(conn)
                .await?;
            Ok(Some(len))
        })
        .await)
    .map_err(|err| backend(op, err))
}
