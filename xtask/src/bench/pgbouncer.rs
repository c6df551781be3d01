//! PostgreSQL through PgBouncer in transaction mode, beside the direct
//! connection (issue 34): the bench starts a throw-away PgBouncer of its own
//! (`flowstate_faults::cluster::PgBouncer`: a temp directory, a free
//! loopback port, killed when the bench ends, however it ends) in front of
//! the PostgreSQL it benches, and measures the same claim + succeed work,
//! per step and batched, through it with `?pool_mode=transaction`, its
//! rounds taken in turn with the direct ones (`bench::interleaved`), so
//! the ratio of each pair is fair.
//!
//! PgBouncer gets as many server connections per database as the most
//! workers measured, plus the batched setup's: the direct connection and
//! the pooled one get the same number of server connections.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use flowstate_faults::cluster::{PgBouncer, PgBouncerSettings};

use crate::backend::ServerUrl;

/// The per-step column's label through PgBouncer.
pub const LABEL: &str = "pgbouncer";

/// A PgBouncer the bench started, and the bench database through it.
pub struct Bouncer {
    /// Killed and its files removed when this drops.
    _bouncer: PgBouncer,
    /// The bench database through it, in transaction-pooler mode.
    pub url: String,
}

/// Starts a PgBouncer in front of the PostgreSQL of `url` for up to
/// `workers` workers; `Ok(None)`, said loudly, if PgBouncer is not
/// installed.
pub async fn start(url: &str, workers: usize) -> Result<Option<Bouncer>> {
    let found = flowstate_faults::process::find_binary(
        "pgbouncer",
        &["/usr/sbin", "/usr/bin"].map(PathBuf::from),
    );
    if let Err(err) = found {
        println!(
            "  !! PgBouncer is not installed ({err:#}): the bench measures nothing through it; \
             install pgbouncer (Debian: `apt-get install pgbouncer`) for the pooled columns"
        );
        return Ok(None);
    }
    let server = ServerUrl::split(url)?;
    let (host, port) = server.endpoint(5432);
    let database = server.database.context("the bench URL names no database")?;
    let pool_size = u32::try_from(workers.max(8) + 2).unwrap_or(u32::MAX);
    let settings = PgBouncerSettings {
        pool_size,
        max_client_conn: 1000,
        max_user_connections: 0,
        die_with_parent: true,
    };
    let bouncer = PgBouncer::start_with(&host, port, settings)
        .await
        .context("cannot start PgBouncer")?;
    println!(
        "  pgbouncer (transaction mode, {pool_size} server connections) on port {} in front of \
         {host}:{port}, up in {:?}",
        bouncer.port(),
        bouncer.started_in()
    );
    let url = format!("{}?pool_mode=transaction", bouncer.url(database));
    Ok(Some(Bouncer {
        _bouncer: bouncer,
        url,
    }))
}
