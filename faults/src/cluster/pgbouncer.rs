//! [`PgBouncer`]: PgBouncer 1.18 in `pool_mode = transaction` in front of
//! a PostgreSQL (the machine's, or a [`Patroni`](super::Patroni)
//! primary), on a free loopback port, from a temp directory.
//!
//! How it runs: one `pgbouncer.ini` routing every database name (`* =`) to
//! the given host and port, trust authentication (the one user,
//! `postgres`, in its `userlist.txt`), a pool of a given size per
//! database and user, its unix socket in the temp directory. As root it
//! runs as `postgres` (PgBouncer refuses root). [`PgBouncer::restart`]
//! stops it (SIGTERM: immediate shutdown, every client cut) and starts it
//! again on the same port.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use diesel_async::{AsyncConnection as _, AsyncPgConnection, SimpleAsyncConnection as _};

use super::{as_user, free_ports};
use crate::process::{
    Group, STOP_TIMEOUT, ScratchDir, append_to, find_binary, log_tail, running_as_root,
    system_user, wait_until_ready,
};

/// A PgBouncer of the suite's own; dropping it kills it and removes its
/// files.
#[derive(Debug)]
pub struct PgBouncer {
    server: Option<Group>,
    binary: PathBuf,
    port: u16,
    config: PathBuf,
    log: PathBuf,
    user: Option<(u32, u32)>,
    pool_size: u32,
    started_in: Duration,
    dir: ScratchDir,
}

impl PgBouncer {
    /// Starts PgBouncer in transaction mode in front of the PostgreSQL at
    /// `host`:`port`, with `pool_size` server connections per database and
    /// user, and waits (bounded) until a query goes through it.
    pub async fn start(host: &str, port: u16, pool_size: u32) -> Result<Self> {
        let binary = find_binary("pgbouncer", &["/usr/sbin", "/usr/bin"].map(PathBuf::from))?;
        let user = if running_as_root() {
            Some(system_user("postgres")?)
        } else {
            None
        };
        let dir = ScratchDir::new("pgbouncer", user)?;
        let config = dir.path().join("pgbouncer.ini");
        let log = dir.path().join("pgbouncer.log");
        std::fs::write(dir.path().join("userlist.txt"), "\"postgres\" \"\"\n")?;
        let mut bouncer = Self {
            server: None,
            binary,
            port: 0,
            config,
            log,
            user,
            pool_size,
            started_in: Duration::ZERO,
            dir,
        };
        for attempt in 1..=3 {
            bouncer.port = free_ports(1)?[0];
            std::fs::write(&bouncer.config, bouncer.ini(host, port, pool_size))
                .with_context(|| format!("write {}", bouncer.config.display()))?;
            match bouncer.launch().await {
                Ok(took) => {
                    bouncer.started_in = took;
                    return Ok(bouncer);
                }
                Err(err) if attempt < 3 && log_tail(&bouncer.log, 30).contains("in use") => {
                    tracing::warn!(%err, "pgbouncer port taken, trying another");
                }
                Err(err) => return Err(err),
            }
        }
        unreachable!("the last attempt returns")
    }

    fn ini(&self, host: &str, port: u16, pool_size: u32) -> String {
        let dir = self.dir.path().display();
        format!(
            "[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir = {dir}
pidfile = {dir}/pgbouncer.pid
auth_type = trust
auth_file = {dir}/userlist.txt
admin_users = postgres
pool_mode = transaction
default_pool_size = {pool_size}
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 100
server_reset_query =
server_login_retry = 1
ignore_startup_parameters = extra_float_digits
",
            listen = self.port,
        )
    }

    /// How long the first start took, to a query through it.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `name` through it.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Its pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.server.as_ref().map(Group::pid)
    }

    /// The temp directory holding its files (removed when it drops).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The last lines of its log.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// Stops it (SIGTERM, every client connection cut; killed past
    /// [`STOP_TIMEOUT`]) and starts it again on the same port; answers how
    /// long until a query went through it again.
    pub async fn restart(&mut self) -> Result<Duration> {
        let started = Instant::now();
        if let Some(mut group) = self.server.take() {
            group.stop("TERM", STOP_TIMEOUT).await;
        }
        self.launch().await?;
        Ok(started.elapsed())
    }

    /// Points every database at the PostgreSQL at `host`:`port` from now
    /// on (what a Patroni `on_role_change` callback does after a
    /// failover): rewrites its configuration and reloads it (SIGHUP); its
    /// server connections to the old target are closed, its clients stay
    /// connected.
    pub fn retarget(&mut self, host: &str, port: u16) -> Result<()> {
        std::fs::write(&self.config, self.ini(host, port, self.pool_size))
            .with_context(|| format!("write {}", self.config.display()))?;
        let group = self.server.as_ref().context("pgbouncer is not running")?;
        group.signal("HUP");
        Ok(())
    }

    async fn launch(&mut self) -> Result<Duration> {
        let mut command = Command::new(&self.binary);
        command
            .arg(&self.config)
            .stdout(append_to(&self.log)?)
            .stderr(append_to(&self.log)?);
        as_user(&mut command, self.user);
        let mut group = Group::spawn(&mut command).context("spawn pgbouncer")?;
        let url = self.url("postgres");
        let took = wait_until_ready(&mut group, "pgbouncer", &self.log, || probe(&url)).await?;
        self.server = Some(group);
        Ok(took)
    }
}

/// Whether a connection and a `SELECT 1` through it succeed within two
/// seconds.
async fn probe(url: &str) -> bool {
    let attempt = async {
        let mut conn = AsyncPgConnection::establish(url).await.ok()?;
        conn.batch_execute("SELECT 1").await.ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), attempt).await,
        Ok(Some(()))
    )
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        if let Some(mut group) = self.server.take() {
            group.kill();
        }
    }
}
