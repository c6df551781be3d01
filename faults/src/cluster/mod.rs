//! Clusters the tests can start: a 3-node MariaDB Galera cluster
//! ([`Galera`]), a PostgreSQL primary with a synchronous standby under
//! Patroni on a one-member etcd ([`Patroni`]), and PgBouncer in
//! transaction mode in front of any PostgreSQL ([`PgBouncer`]).
//!
//! Like the throw-away servers, each starts from the machine's binaries
//! (`mariadbd` with `galera-4`; `patroni`, `etcd` and PostgreSQL 15;
//! `pgbouncer`) in a temporary directory, on loopback ports picked free,
//! with small memory settings and a time bound on every start, every wait
//! and every recovery; each node runs in a process group of its own that
//! a fault kills with SIGKILL; dropped, a cluster kills everything it
//! started and removes its directory. The machine's own servers (3306,
//! 5432) are never touched, only their binaries used.
//!
//! They are test support for what issues 34 and 35 ask of the store past
//! one server; `tests/clusters.rs` proves the harness itself.

mod galera;
mod patroni;
mod pgbouncer;

pub use galera::{Galera, GaleraStatus};
pub use patroni::{Patroni, SWITCHOVER_TIMEOUT};
pub use pgbouncer::{PgBouncer, Settings as PgBouncerSettings};

use std::collections::HashSet;
use std::future::Future;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::process::{free_port, log_tail};

/// How long a whole cluster may take to come up (every node joined and in
/// sync) before its start is a failure.
pub const CLUSTER_START_TIMEOUT: Duration = Duration::from_secs(90);

/// How long a node may take to rejoin, or a standby to be promoted, before
/// it is a failure.
pub const RECOVER_TIMEOUT: Duration = Duration::from_secs(60);

/// `count` distinct loopback ports that were free a moment ago.
pub(crate) fn free_ports(count: usize) -> Result<Vec<u16>> {
    let mut seen = HashSet::new();
    let mut ports = Vec::with_capacity(count);
    while ports.len() < count {
        let port = free_port()?;
        if seen.insert(port) {
            ports.push(port);
        }
    }
    Ok(ports)
}

/// How many times a throw-away server or cluster is started, each time on
/// ports picked afresh, when a port it was given is taken before it binds
/// it (another process took it between the pick and the bind).
pub(crate) const PORT_ATTEMPTS: u32 = 3;

/// Starts something on `count` free ports: calls `start` with `state` and
/// ports picked afresh ([`free_ports`]) until it succeeds, at most
/// [`PORT_ATTEMPTS`] times, going again only while its error says a port
/// was taken ("Address already in use" in the error's chain: a server's
/// start errors carry the tail of its log; a warning names `what`).
/// Answers what the last start answered: its value, or its error
/// unchanged.
///
/// `state` is what the attempts share (a server whose port each attempt
/// sets); `()` when each attempt builds everything anew.
pub(crate) async fn start_on_free_ports<S, T>(
    what: &str,
    count: usize,
    state: &mut S,
    mut start: impl AsyncFnMut(&mut S, Vec<u16>) -> Result<T>,
) -> Result<T> {
    let mut attempt = 1;
    loop {
        let ports = free_ports(count)?;
        match start(state, ports).await {
            Ok(started) => return Ok(started),
            Err(error) if attempt < PORT_ATTEMPTS && format!("{error:#}").contains("in use") => {
                tracing::warn!(%error, "{what}: a port was taken, starting over on other ports");
            }
            Err(error) => return Err(error),
        }
        attempt += 1;
    }
}

/// Runs `command` as `user` (uid, gid) if given.
pub(crate) fn as_user(command: &mut Command, user: Option<(u32, u32)>) {
    use std::os::unix::process::CommandExt as _;
    if let Some((uid, gid)) = user {
        command.uid(uid).gid(gid);
    }
}

/// Polls `probe` every 100 ms until it answers `true`, for at most `bound`;
/// fails naming `what` with the tail of `log` if the time runs out.
/// Answers how long it took.
pub(crate) async fn poll_until<F, Fut>(
    what: &str,
    bound: Duration,
    log: &Path,
    mut probe: F,
) -> Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if probe().await {
            return Ok(started.elapsed());
        }
        if started.elapsed() >= bound {
            bail!(
                "{what}: not done within {bound:?}; {}:\n{}",
                log.display(),
                log_tail(log, 30)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// SIGKILL to process group `group` (which a process outside our
/// [`Group`](crate::process::Group)s leads: a postmaster Patroni started);
/// a group already gone is not an error.
pub(crate) fn kill_group(group: u32) {
    let _ = Command::new("kill")
        .args(["-s", "KILL", "--", &format!("-{group}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// The process group of live process `pid`, read from `/proc/<pid>/stat`
/// (the third field after the command's closing parenthesis); `None` if it
/// is gone or a zombie.
pub(crate) fn process_group_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    match fields.as_slice() {
        [state, _ppid, pgrp, ..] if *state != "Z" => pgrp.parse().ok(),
        _ => None,
    }
}

/// Whether process `pid` is alive (not gone, not a zombie).
pub fn alive(pid: u32) -> bool {
    process_group_of(pid).is_some()
}

/// Waits (at most `bound`) until process `pid` is gone; answers whether it
/// is.
pub(crate) fn wait_gone_blocking(pid: u32, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    while alive(pid) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}
