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
//!
//! [`PgBouncer::start_with`] takes [`Settings`]: the client and per-user
//! server connection caps, and whether PgBouncer dies with the thread that
//! started it (`setpriv --pdeathsig KILL`), for a PgBouncer kept in a
//! `static` for a whole test binary, whose `Drop` never runs: the kernel
//! kills it when the binary exits, however it exits.

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

/// How a [`PgBouncer`] is set up beyond its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Server connections per database and user (`default_pool_size`).
    pub pool_size: u32,
    /// Client connections it accepts (`max_client_conn`).
    pub max_client_conn: u32,
    /// Server connections per user over every database
    /// (`max_user_connections`; 0: no cap). Idle server connections of one
    /// database are closed to open one for another past the cap.
    pub max_user_connections: u32,
    /// Whether PgBouncer gets SIGKILL when the thread that started it ends
    /// (the process's exit included): it runs under
    /// `setpriv --pdeathsig KILL`. Start it from a thread that lives as
    /// long as it should (not a test's runtime thread).
    pub die_with_parent: bool,
}

impl Settings {
    /// `pool_size` server connections per database, 100 clients, no cap
    /// per user, stopped only by `Drop`.
    pub fn new(pool_size: u32) -> Self {
        Self {
            pool_size,
            max_client_conn: 100,
            max_user_connections: 0,
            die_with_parent: false,
        }
    }
}

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
    settings: Settings,
    setpriv: Option<PathBuf>,
    started_in: Duration,
    dir: ScratchDir,
}

impl PgBouncer {
    /// Starts PgBouncer in transaction mode in front of the PostgreSQL at
    /// `host`:`port`, with `pool_size` server connections per database and
    /// user, and waits (bounded) until a query goes through it.
    pub async fn start(host: &str, port: u16, pool_size: u32) -> Result<Self> {
        Self::start_with(host, port, Settings::new(pool_size)).await
    }

    /// [`Self::start`] with `settings`.
    pub async fn start_with(host: &str, port: u16, settings: Settings) -> Result<Self> {
        let setpriv = if settings.die_with_parent {
            remove_stale_dirs();
            Some(
                find_binary("setpriv", &["/usr/bin", "/bin"].map(PathBuf::from))
                    .context("PgBouncer tied to its parent runs under util-linux's setpriv")?,
            )
        } else {
            None
        };
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
            settings,
            setpriv,
            started_in: Duration::ZERO,
            dir,
        };
        for attempt in 1..=3 {
            bouncer.port = free_ports(1)?[0];
            std::fs::write(&bouncer.config, bouncer.ini(host, port))
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

    fn ini(&self, host: &str, port: u16) -> String {
        let dir = self.dir.path().display();
        let Settings {
            pool_size,
            max_client_conn,
            max_user_connections,
            ..
        } = self.settings;
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
max_client_conn = {max_client_conn}
max_user_connections = {max_user_connections}
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
        std::fs::write(&self.config, self.ini(host, port))
            .with_context(|| format!("write {}", self.config.display()))?;
        let group = self.server.as_ref().context("pgbouncer is not running")?;
        group.signal("HUP");
        Ok(())
    }

    async fn launch(&mut self) -> Result<Duration> {
        let mut command = match &self.setpriv {
            Some(setpriv) => {
                let mut command = Command::new(setpriv);
                command.args(["--pdeathsig", "KILL"]).arg(&self.binary);
                command
            }
            None => Command::new(&self.binary),
        };
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

/// Removes the directories PgBouncers tied to their parent left: the
/// kernel killed them with their test binary, whose `static` never
/// dropped its [`ScratchDir`]. A directory goes only if its pidfile names
/// a process that is gone (a PgBouncer still starting has none yet).
fn remove_stale_dirs() {
    let parent = std::env::temp_dir().join("flowstate-faults");
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let is_ours = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with("pgbouncer-"));
        let pid = std::fs::read_to_string(dir.join("pgbouncer.pid"))
            .ok()
            .and_then(|pid| pid.trim().parse::<u32>().ok());
        if let (true, Some(pid)) = (is_ours, pid)
            && !super::alive(pid)
        {
            let _ = std::fs::remove_dir_all(&dir);
        }
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
