//! What the throw-away servers share: a scratch directory that goes away
//! with them, a free port, the system user a server runs as when the suite
//! runs as root, finding a server binary, and a child process in a process
//! group of its own that can be signalled, waited for with a bound, and
//! killed with everything it forked.
//!
//! Signals go through the `kill` program (`kill -s KILL -- -<pgid>`): the
//! workspace forbids `unsafe`, so no `libc::kill`.

use std::fs::{self, File};
use std::io::{self, Read as _, Seek as _, SeekFrom};
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

/// How long any server start (initialisation included) may take before it
/// is a failure.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a clean shutdown may take before the server is killed.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A directory under the temp dir, owned by the user a server runs as,
/// removed (with everything in it) when dropped.
#[derive(Debug)]
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// A new directory `flowstate-faults/<prefix>-<uuid>` under the temp dir,
    /// handed to `owner` (uid, gid) if given.
    pub fn new(prefix: &str, owner: Option<(u32, u32)>) -> Result<Self> {
        let parent = std::env::temp_dir().join("flowstate-faults");
        fs::create_dir_all(&parent).with_context(|| format!("create {}", parent.display()))?;
        let path = parent.join(format!("{prefix}-{}", uuid::Uuid::now_v7().simple()));
        fs::create_dir(&path).with_context(|| format!("create {}", path.display()))?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                .with_context(|| format!("chown {} to {uid}:{gid}", path.display()))?;
        }
        Ok(Self { path })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Where [`free_port`] looks first: below Linux's ephemeral range
/// (32768-60999 by default), which the OS also hands to every outgoing
/// connection as its source port. A port picked there by binding port 0
/// can be taken by a test's client connection before the server binds it
/// (a Patroni agent failed so with "Address already in use").
const QUIET_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// A TCP port on 127.0.0.1 that was free a moment ago: one below the
/// ephemeral range, from a random start (so concurrent callers spread),
/// or, if none of those binds, one the OS picks.
pub fn free_port() -> Result<u16> {
    use std::hash::{BuildHasher as _, RandomState};
    let span = u64::from(QUIET_PORTS.end - QUIET_PORTS.start);
    let start = RandomState::new().hash_one(std::process::id()) % span;
    for step in 0..256 {
        let port = QUIET_PORTS.start + u16::try_from((start + step * 97) % span).unwrap_or(0);
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0").context("bind a free port")?;
    Ok(listener.local_addr()?.port())
}

/// Whether this process runs as root (read from `/proc/self/status`, no
/// `libc`).
pub fn running_as_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .and_then(|line| line.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// The uid and gid of system user `name`, from `/etc/passwd`.
pub fn system_user(name: &str) -> Result<(u32, u32)> {
    let passwd = fs::read_to_string("/etc/passwd").context("read /etc/passwd")?;
    for line in passwd.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() > 3 && fields[0] == name {
            return Ok((fields[2].parse()?, fields[3].parse()?));
        }
    }
    bail!("no system user {name:?} in /etc/passwd")
}

/// The first of `candidates` (directories) holding an executable `name`,
/// then `name` on `PATH`.
pub fn find_binary(name: &str, candidates: &[PathBuf]) -> Result<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    candidates
        .iter()
        .chain(on_path.iter())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .with_context(|| format!("{name} not found in {candidates:?} nor on PATH"))
}

/// The last `lines` lines of the file at `path` (at most its last 64 KiB),
/// or why it could not be read.
pub fn log_tail(path: &Path, lines: usize) -> String {
    let read = || -> io::Result<String> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match read() {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(err) => format!("(cannot read {}: {err})", path.display()),
    }
}

/// Opens `path` for appending (creating it), for a child's output.
pub fn append_to(path: &Path) -> Result<File> {
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("open {}", path.display()))
}

/// Runs `command` to its end within `timeout`, killing it past that; fails
/// with `what` and the tail of `log` if it fails or overruns.
pub async fn run_bounded(
    command: &mut Command,
    what: &str,
    timeout: Duration,
    log: &Path,
) -> Result<()> {
    let mut group = Group::spawn(command).with_context(|| format!("start {what}"))?;
    match group.wait_for_exit(timeout).await {
        Some(status) if status.success() => Ok(()),
        Some(status) => bail!("{what} failed ({status}):\n{}", log_tail(log, 30)),
        None => {
            group.kill();
            bail!(
                "{what} did not finish within {timeout:?}:\n{}",
                log_tail(log, 30)
            )
        }
    }
}

/// Polls `probe` (a connection attempt, bounded by the probe itself) until
/// it answers `true`, for at most [`START_TIMEOUT`]; fails with `what` and
/// the tail of `log` if the process exits first or the time runs out, and
/// kills the group then.
pub async fn wait_until_ready<F, Fut>(
    group: &mut Group,
    what: &str,
    log: &Path,
    mut probe: F,
) -> Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if let Some(status) = group.has_exited() {
            bail!(
                "{what} exited while starting ({status}):\n{}",
                log_tail(log, 30)
            );
        }
        if probe().await {
            return Ok(started.elapsed());
        }
        if started.elapsed() >= START_TIMEOUT {
            group.kill_now().await;
            bail!(
                "{what} did not accept connections within {START_TIMEOUT:?}:\n{}",
                log_tail(log, 30)
            );
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A child process that leads a process group of its own, so that it and
/// everything it forks (PostgreSQL's backends) are signalled together.
/// Dropping it kills the group.
#[derive(Debug)]
pub struct Group {
    child: Child,
    exited: Option<ExitStatus>,
}

impl Group {
    /// Spawns `command` as the leader of a new process group, with no stdin.
    pub fn spawn(command: &mut Command) -> io::Result<Self> {
        let child = command.process_group(0).stdin(Stdio::null()).spawn()?;
        Ok(Self {
            child,
            exited: None,
        })
    }

    /// The leader's piped stdout, once.
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// The leader's piped stderr, once.
    pub fn take_stderr(&mut self) -> Option<std::process::ChildStderr> {
        self.child.stderr.take()
    }

    /// The leader's pid (also the group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the leader has exited (reaping it if so).
    pub fn has_exited(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
        self.exited
    }

    /// Sends `signal` (`"INT"`, `"TERM"`, `"KILL"`) to every process of the
    /// group; a group already gone is not an error.
    pub fn signal(&self, signal: &str) {
        let _ = Command::new("kill")
            .args(["-s", signal, "--", &format!("-{}", self.pid())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// SIGKILL to the whole group (while the leader, reaped only after, still
    /// holds the group id), then waits (at most a few seconds) for the
    /// leader to be reaped.
    pub fn kill(&mut self) {
        if self.exited.is_some() {
            return;
        }
        self.signal("KILL");
        let _ = self.child.kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.has_exited().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// [`Self::kill`] without blocking the runtime; it also waits (at most a
    /// few seconds) until no live process is left in the group: a server
    /// restarted while a killed backend still holds its shared memory
    /// refuses to start ("pre-existing shared memory block is still in
    /// use").
    pub async fn kill_now(&mut self) {
        if self.exited.is_some() {
            return;
        }
        let group = self.pid();
        self.signal("KILL");
        let _ = self.child.kill();
        self.wait_for_exit(Duration::from_secs(5)).await;
        let deadline = Instant::now() + Duration::from_secs(5);
        while group_has_live_members(group) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits for the leader to exit, at most `timeout`, polling without
    /// blocking the runtime; `None` if it is still running.
    pub async fn wait_for_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.has_exited() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The same wait, blocking the thread (for `Drop`).
    pub fn wait_for_exit_blocking(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.has_exited() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Asks the group to stop with `signal`, waits `timeout`, then kills it:
    /// nothing is left running when this returns. Answers whether the
    /// group stopped on the signal.
    pub fn stop_blocking(&mut self, signal: &str, timeout: Duration) -> bool {
        if self.has_exited().is_some() {
            return true;
        }
        self.signal(signal);
        let clean = self.wait_for_exit_blocking(timeout).is_some();
        self.kill();
        clean
    }

    /// [`Self::stop_blocking`] without blocking the runtime.
    pub async fn stop(&mut self, signal: &str, timeout: Duration) -> bool {
        if self.has_exited().is_some() {
            return true;
        }
        self.signal(signal);
        let clean = self.wait_for_exit(timeout).await.is_some();
        self.kill();
        clean
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if self.has_exited().is_none() {
            self.kill();
        }
    }
}

/// Whether any process of group `group` is still alive (not a zombie), read
/// from `/proc/<pid>/stat` (the state is the field after the command's
/// closing parenthesis, the group the third after it).
fn group_has_live_members(group: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        let Some((_, after)) = stat.rsplit_once(')') else {
            return false;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        matches!(fields.as_slice(), [state, _ppid, pgrp, ..]
            if *state != "Z" && pgrp.parse::<u32>() == Ok(group))
    })
}
