//! What SQLite's per-step claim pays for the batch claim's indexes (issue
//! 31, item 5): the same per-step work on a second SQLite file, migrated as
//! the bench's is and then without the two partial indexes the batch
//! claim walks (`flowstate_steps_claimable` and
//! `flowstate_steps_claimable_function`, migration 000005), each round
//! taken in turn with the bench's own ([`super::interleaved`]), so the
//! ratio of the pair is their cost to a per-step claim on this machine
//! now.
//!
//! Why they cost a per-step claim anything: a claim moves its step from
//! `pending` to `running`, out of both partial indexes (their `WHERE
//! status IN ('pending', 'failed')`), so its commit writes each index's
//! leaf page to the WAL beside the step's, the claim-deadline index's and
//! the history row's three; the success writes none of them. The file
//! without them cannot serve a batch claim at all (a scan of the steps
//! table per claim), so it is a measurement, never a configuration.

use anyhow::{Context, Result};
use diesel::connection::SimpleConnection;
use diesel::{Connection, SqliteConnection};

/// The column's label in the table and the JSON.
pub const LABEL: &str = "sqlite without batch indexes";

/// What the file without the batch indexes takes out of flowstate's
/// schema.
pub const DROPPED: [&str; 2] = [
    "DROP INDEX flowstate_steps_claimable",
    "DROP INDEX flowstate_steps_claimable_function",
];

/// The file beside the bench's `url`: `<stem>-without-batch-indexes.db`.
pub fn url_beside(url: &str) -> String {
    match url.strip_suffix(".db") {
        Some(stem) => format!("{stem}-without-batch-indexes.db"),
        None => format!("{url}-without-batch-indexes"),
    }
}

/// Creates the file beside `url` afresh, migrates it and drops
/// [`DROPPED`]; answers its URL.
pub async fn prepare_database(url: &str) -> Result<String> {
    let beside = url_beside(url);
    crate::backend::prepare(&beside, true).await?;
    flowstate_store_diesel::migrate::up(&beside)
        .await
        .context("migrating the file without batch indexes failed")?;
    let path = crate::backend::parse_url(&beside)?.target;
    tokio::task::spawn_blocking(move || {
        let mut conn = SqliteConnection::establish(&path).context("cannot open the file")?;
        for sql in DROPPED {
            conn.batch_execute(sql)
                .with_context(|| format!("{sql} failed"))?;
        }
        Ok::<_, anyhow::Error>(())
    })
    .await
    .context("the index drop panicked")??;
    Ok(beside)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_sits_beside_the_benchs() {
        assert_eq!(
            url_beside("target/bench/flowstate.db"),
            "target/bench/flowstate-without-batch-indexes.db"
        );
        assert_eq!(url_beside("bench"), "bench-without-batch-indexes");
    }

    /// An index's name, as `sqlite_master` lists it.
    #[derive(diesel::QueryableByName)]
    struct Named {
        #[diesel(sql_type = diesel::sql_types::Text)]
        name: String,
    }

    #[tokio::test]
    async fn the_file_has_no_batch_index_and_keeps_the_others() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("flowstate-index-cost-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let url = format!("sqlite://{}", dir.join("bench.db").display());
        let beside = prepare_database(&url).await?;
        let mut conn = SqliteConnection::establish(&crate::backend::parse_url(&beside)?.target)?;
        let names: Vec<String> = diesel::RunQueryDsl::load::<Named>(
            diesel::sql_query(
                "SELECT name FROM sqlite_master WHERE type = 'index' \
                 AND tbl_name = 'flowstate_steps' AND sql IS NOT NULL",
            ),
            &mut conn,
        )?
        .into_iter()
        .map(|n| n.name)
        .collect();
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with("flowstate_steps_claimable")),
            "{names:?}"
        );
        assert!(
            names
                .iter()
                .any(|n| n == "flowstate_steps_claimed_until_idx"),
            "{names:?}"
        );
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
