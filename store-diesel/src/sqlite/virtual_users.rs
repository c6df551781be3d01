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
use crate::rows::virtual_users::{RUNNING, TranscriptRow};
use crate::schema::{
    JsonText, flowstate_virtual_user_runs as runs, flowstate_virtual_user_transcript as transcript,
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
        let Some(len) = diesel::update(
            runs::table
                .filter(runs::id.eq(&id))
                .filter(runs::status.eq(RUNNING)),
        )
        .set((
            runs::transcript_len.eq(runs::transcript_len + n),
            runs::updated_at.eq(now),
        ))
        .returning(runs::transcript_len)
        .get_result::<i64>(conn)
        .optional()?
        else {
            return Ok(None);
        };
        let rows: Vec<TranscriptRow> = entries
            .into_iter()
            .zip(len - n..)
            .map(|(entry, seq)| TranscriptRow {
                run_id: id.clone(),
                seq,
                entry: JsonText(entry),
                at: now,
            })
            .collect();
        diesel::insert_into(transcript::table)
            .values(&rows)
            .execute(conn)?;
        Ok(Some(len))
    })
    .await
}
