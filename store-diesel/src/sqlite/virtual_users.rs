//! Appending to a virtual-user run's transcript on SQLite: the guarded
//! `UPDATE` that admits the chunk and takes its positions, then the
//! chunk's one multi-row `INSERT`, as one `BEGIN IMMEDIATE` transaction in
//! one hop. Here rather than in `ports/virtual_users.rs` because diesel
//! builds SQLite's multi-row insert only on its blocking connection, not
//! through diesel-async's wrapper.

use diesel::prelude::*;

use flowstate_core::Result;

use super::{Pool, write};
use crate::config::StoreConfig;
use crate::rows::virtual_users::{chunk_admitted, running_run, transcript_rows};
use crate::schema::{
    flowstate_virtual_user_runs as runs, flowstate_virtual_user_transcript as transcript,
};

/// Appends `entries` (JSON text) to running run `id` at `now`: the new
/// transcript length, or `None` if no running run `id` matched.
#[tracing::instrument(level = "debug", skip_all, fields(run = %id))]
pub(super) async fn append_transcript(
    pool: &Pool,
    _config: &StoreConfig,
    id: String,
    entries: Vec<String>,
    now: i64,
) -> Result<Option<i64>> {
    write(pool, "append_transcript", move |conn| {
        let n = entries.len() as i64;
        let Some(len) = diesel::update(running_run(&id))
            .set(chunk_admitted(n, now))
            .returning(runs::transcript_len)
            .get_result::<i64>(conn)
            .optional()?
        else {
            return Ok(None);
        };
        diesel::insert_into(transcript::table)
            .values(&transcript_rows(&id, &entries, len, now))
            .execute(conn)?;
        Ok(Some(len))
    })
    .await
}
