//! [`WorkerChild`]: a `fault-worker` process the test spawns, reads and
//! kills with SIGKILL, as a worker machine dies mid-step.
//!
//! The child speaks one line per event on stdout (`ready`, `claimed <step>
//! <attempt>`, `holding <step> <attempt>`, `completed <step> <attempt>`,
//! `refused <step> <attempt> <error>`, `exit <completed>`); its stderr is
//! kept for the failure message. It leads a process group of its own and
//! is killed when dropped (on a panic too; SIGKILL ends a paused process as
//! well).

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use tokio::sync::mpsc;

use crate::process::Group;

/// The environment variable telling a worker how long to hold a step
/// between its ledger row and its completion, in milliseconds.
pub const HOLD_MS: &str = "FAULT_WORKER_HOLD_MS";
/// The environment variable naming the one step (1-based, in the order the
/// worker claims them) to hold; unset, every step is held.
pub const HOLD_AT: &str = "FAULT_WORKER_HOLD_AT";

/// How a worker child holds its steps.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hold {
    /// How long.
    pub for_: Duration,
    /// Only the n-th step claimed (1-based); `None`: every step.
    pub at: Option<u32>,
}

/// A running `fault-worker` child.
#[derive(Debug)]
pub struct WorkerChild {
    /// The worker's name.
    pub name: String,
    group: Group,
    lines: mpsc::UnboundedReceiver<String>,
    seen: Vec<String>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl WorkerChild {
    /// Spawns `binary` (the `fault-worker` executable) as worker `name` on
    /// the store at `url`.
    pub fn spawn(binary: &Path, url: &str, name: &str, hold: Hold) -> Result<Self> {
        let mut command = Command::new(binary);
        command
            .args(["--url", url, "--worker", name])
            .env(HOLD_MS, hold.for_.as_millis().to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(at) = hold.at {
            command.env(HOLD_AT, at.to_string());
        } else {
            command.env_remove(HOLD_AT);
        }
        let mut group =
            Group::spawn(&mut command).with_context(|| format!("spawn {}", binary.display()))?;
        let stdout = group.take_stdout().context("the child's stdout")?;
        let stderr = group.take_stderr().context("the child's stderr")?;
        let (send, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let kept = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&kept);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                keep.lock().expect("not poisoned").push(line);
            }
        });
        Ok(Self {
            name: name.to_owned(),
            group,
            lines,
            seen: Vec::new(),
            stderr: kept,
        })
    }

    /// Waits for the next stdout line starting with `prefix`, at most
    /// `timeout`; answers it.
    pub async fn wait_line(&mut self, prefix: &str, timeout: Duration) -> Result<String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.recv()).await;
            match line {
                Ok(Some(line)) => {
                    self.seen.push(line.clone());
                    if line.starts_with(prefix) {
                        return Ok(line);
                    }
                }
                Ok(None) => bail!(
                    "worker {} ended before {prefix:?}; stderr:\n{}",
                    self.name,
                    self.stderr_text()
                ),
                Err(_) => bail!(
                    "worker {} said no {prefix:?} within {timeout:?}; stderr:\n{}",
                    self.name,
                    self.stderr_text()
                ),
            }
        }
    }

    /// SIGKILL, now: the worker dies wherever it is.
    pub async fn kill(&mut self) {
        self.group.kill_now().await;
    }

    /// SIGSTOP: the worker freezes wherever it is (as a process paused by
    /// its machine, a debugger or a long GC would), holding what it
    /// holds. Answers once the kernel says it is stopped (at most a
    /// second).
    pub async fn pause(&mut self) -> Result<()> {
        self.group.signal("STOP");
        for _ in 0..100 {
            if self.state() == Some('T') {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        bail!("worker {} did not stop on SIGSTOP", self.name)
    }

    /// SIGCONT: a paused worker goes on from where it froze.
    pub fn resume(&mut self) {
        self.group.signal("CONT");
    }

    /// The process's state letter from `/proc/<pid>/stat` (`R`, `S`, `T`
    /// for stopped, `Z`...), if it can be read.
    pub fn state(&self) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.group.pid())).ok()?;
        // The command name is in parentheses and may hold spaces.
        stat.rsplit_once(") ")?.1.chars().next()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.group.pid()
    }

    /// Waits for the worker to exit on its own, at most `timeout`.
    pub async fn wait(&mut self, timeout: Duration) -> Result<ExitStatus> {
        match self.group.wait_for_exit(timeout).await {
            Some(status) => Ok(status),
            None => bail!(
                "worker {} still running after {timeout:?}; stderr:\n{}",
                self.name,
                self.stderr_text()
            ),
        }
    }

    /// Every stdout line read so far, then whatever is left unread.
    pub fn lines(&mut self) -> Vec<String> {
        while let Ok(line) = self.lines.try_recv() {
            self.seen.push(line);
        }
        self.seen.clone()
    }

    /// The last lines of its stderr.
    pub fn stderr_text(&self) -> String {
        let lines = self.stderr.lock().expect("not poisoned");
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}
