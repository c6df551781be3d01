//! [`ThrowawayMariadb`]: a MariaDB 10.11 instance of the suite's own, in a
//! temp directory on a free port, that a scenario may kill and restart (the
//! machine's shared server on 3306 is never touched).
//!
//! How it runs: `mariadb-install-db --no-defaults
//! --auth-root-authentication-method=normal` makes the data directory (root
//! with an empty password, reachable from 127.0.0.1), then `mariadbd
//! --no-defaults` serves it with small settings (16 MB buffer pool, 8 MB
//! redo log, no performance schema, no binary log, 60 connections, a flush
//! per second rather than per commit). As root both take `--user=mysql`:
//! the server drops to that user itself, in the process the test spawned,
//! so a SIGKILL of that process is a crash of the server.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, Result};
use diesel_async::{AsyncConnection as _, AsyncMysqlConnection, SimpleAsyncConnection as _};

use crate::cluster::start_on_free_ports;
use crate::process::{
    Group, START_TIMEOUT, STOP_TIMEOUT, ScratchDir, append_to, find_binary, log_tail, run_bounded,
    running_as_root, system_user, wait_until_ready,
};

/// A throw-away MariaDB server; dropping it stops it and removes its files.
#[derive(Debug)]
pub struct ThrowawayMariadb {
    server: Option<Group>,
    port: u16,
    mariadbd: PathBuf,
    data: PathBuf,
    log: PathBuf,
    user: Option<&'static str>,
    dir: ScratchDir,
}

/// Where the binaries are looked for first: `FLOWSTATE_MARIADB_BIN`, then
/// `/usr/sbin` and `/usr/bin` (then `PATH`).
fn bin_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("FLOWSTATE_MARIADB_BIN")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    dirs.extend(["/usr/sbin", "/usr/bin"].map(PathBuf::from));
    dirs
}

/// The settings shared by the install and the server: small memory.
const SMALL: [&str; 3] = [
    "--innodb-buffer-pool-size=16M",
    "--innodb-log-file-size=8M",
    "--skip-name-resolve",
];

impl ThrowawayMariadb {
    /// Makes a data directory and starts the server on it, both within
    /// [`START_TIMEOUT`] each.
    pub async fn start() -> Result<Self> {
        let install = find_binary("mariadb-install-db", &bin_dirs())?;
        let mariadbd = find_binary("mariadbd", &bin_dirs())?;
        let (user, owner) = if running_as_root() {
            (Some("mysql"), Some(system_user("mysql")?))
        } else {
            (None, None)
        };
        let dir = ScratchDir::new("mariadb", owner)?;
        let data = dir.path().join("data");
        let log = dir.path().join("server.log");
        let install_log = dir.path().join("install.log");
        let mut command = Command::new(install);
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .args(SMALL)
            .stdout(append_to(&install_log)?)
            .stderr(append_to(&install_log)?);
        if let Some(user) = user {
            command.arg(format!("--user={user}"));
        }
        run_bounded(
            &mut command,
            "mariadb-install-db",
            START_TIMEOUT,
            &install_log,
        )
        .await?;
        let mut server = Self {
            server: None,
            port: 0,
            mariadbd,
            data,
            log,
            user,
            dir,
        };
        // A port that was free may be taken before the server binds it:
        // try another then.
        start_on_free_ports("mariadb", 1, &mut server, async |server, ports| {
            server.port = ports[0];
            server.launch().await
        })
        .await?;
        Ok(server)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `name` on it (an empty name: the server), over
    /// TCP: `prefer_socket=false` keeps the driver from switching to the
    /// unix socket (which would bypass a [`FaultProxy`](crate::FaultProxy)
    /// in front of the port).
    pub fn url(&self, name: &str) -> String {
        format!(
            "mysql://root@127.0.0.1:{}/{name}?prefer_socket=false",
            self.port
        )
    }

    /// Creates database `name` and answers its URL.
    pub async fn create_database(&self, name: &str) -> Result<String> {
        crate::sql::check_identifier(name)?;
        let mut admin = AsyncMysqlConnection::establish(&self.url(""))
            .await
            .context("connect to the throw-away mariadb")?;
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await?;
        Ok(self.url(name))
    }

    /// Whether the server process is running (it may still be starting).
    pub fn is_running(&mut self) -> bool {
        self.server
            .as_mut()
            .is_some_and(|group| group.has_exited().is_none())
    }

    /// The temp directory holding its data, socket and logs (removed when
    /// it drops).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The server's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.server.as_ref().map(Group::pid)
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// A clean shutdown (SIGTERM), killing the server if it takes longer
    /// than [`STOP_TIMEOUT`].
    pub async fn stop(&mut self) {
        if let Some(mut group) = self.server.take() {
            if !group.stop("TERM", STOP_TIMEOUT).await {
                tracing::warn!("mariadbd did not stop within {STOP_TIMEOUT:?}: killed");
            }
        }
    }

    /// A crash: SIGKILL to `mariadbd`.
    pub async fn kill(&mut self) {
        if let Some(mut group) = self.server.take() {
            group.kill_now().await;
        }
    }

    /// Starts the server again on the same port and data directory (after
    /// a stop, a kill, or stopping it first if it runs); answers how long
    /// it took to accept connections (crash recovery included).
    pub async fn restart(&mut self) -> Result<Duration> {
        self.stop().await;
        let started = std::time::Instant::now();
        self.launch().await?;
        Ok(started.elapsed())
    }

    async fn launch(&mut self) -> Result<()> {
        let mut command = Command::new(&self.mariadbd);
        command
            .arg("--no-defaults")
            .arg(format!("--datadir={}", self.data.display()))
            .arg(format!("--port={}", self.port))
            .arg(format!(
                "--socket={}",
                self.dir.path().join("mariadb.sock").display()
            ))
            .arg(format!(
                "--pid-file={}",
                self.dir.path().join("mariadbd.pid").display()
            ))
            .arg("--bind-address=127.0.0.1")
            .args(SMALL)
            .args([
                "--performance-schema=OFF",
                "--max-connections=60",
                "--innodb-flush-log-at-trx-commit=2",
                "--skip-log-bin",
            ])
            .stdout(append_to(&self.log)?)
            .stderr(append_to(&self.log)?);
        if let Some(user) = self.user {
            command.arg(format!("--user={user}"));
        }
        let mut group = Group::spawn(&mut command).context("spawn mariadbd")?;
        let url = self.url("");
        let took = wait_until_ready(&mut group, "mariadbd", &self.log, || probe(&url)).await?;
        tracing::debug!(port = self.port, ?took, "throw-away mariadb up");
        self.server = Some(group);
        Ok(())
    }
}

/// Whether a connection and a `SELECT 1` succeed within two seconds.
async fn probe(url: &str) -> bool {
    let attempt = async {
        let mut conn = AsyncMysqlConnection::establish(url).await.ok()?;
        conn.batch_execute("SELECT 1").await.ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), attempt).await,
        Ok(Some(()))
    )
}

impl Drop for ThrowawayMariadb {
    fn drop(&mut self) {
        if let Some(mut group) = self.server.take() {
            group.stop_blocking("TERM", STOP_TIMEOUT);
        }
    }
}
