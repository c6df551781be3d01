//! [`Patroni`]: a PostgreSQL 15 primary and a synchronous standby, each
//! under a Patroni agent, with a one-member etcd as Patroni's store, on
//! loopback in a temp directory.
//!
//! How it runs: etcd 3.4 on two free ports (client, peer); two members
//! (`pg0`, `pg1`), each a Patroni (`patroni <member>.yml`, spoken to over
//! etcd's v3 API) with a REST port and a PostgreSQL port of its own,
//! running the machine's PostgreSQL 15 binaries (as `postgres` when the
//! suite runs as root). `pg0` starts first and bootstraps (`initdb`,
//! trust authentication on 127.0.0.1); `pg1` then starts and clones it with
//! `pg_basebackup`. `synchronous_mode` is on, so Patroni names the standby
//! in `synchronous_standby_names` and only that standby may be promoted:
//! a commit the primary acknowledged is on the standby. It is not
//! `strict`: a primary left alone (its standby dead) still takes writes.
//! The start waits until the primary reports a `sync` standby streaming
//! and Patroni names it its synchronous standby (`GET /cluster`).
//! Tiny settings: 32 MB of shared buffers, 50 connections, no fsync, a
//! leader key TTL of 10 s with a 1 s loop (promotion in about 10 s).
//!
//! [`Patroni::kill_primary`] kills the primary's member outright: its
//! postmaster (with every backend: Patroni starts it in a session of its
//! own) and its Patroni agent, both with SIGKILL. Killing the postmaster
//! alone is no failover: the agent, still holding the leader key, starts
//! PostgreSQL again in place within a second (tried: 1.9 s, no
//! promotion). With the agent gone too, its leader key expires and the
//! standby's agent promotes it.
//!
//! [`Patroni::switchover`] is the planned move instead: Patroni's REST API
//! (`POST /switchover` to the primary's agent, leader and candidate named)
//! demotes the primary and promotes the standby. Patroni 3.0 demotes
//! with a fast shutdown of the old primary (every session on it ended,
//! 57P01), releases the leader key, and starts it again as a standby of
//! the new primary; [`Patroni::wait_for_standby`] waits until it streams
//! from it. From its start as a standby until then, a client that still
//! reaches it (a pooler or a name still pointing at it) is served read
//! only: a write is refused with 25006.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use diesel::QueryableByName;
use diesel::sql_types::Bool;
use diesel_async::SimpleAsyncConnection as _;
use diesel_async::{AsyncConnection as _, AsyncPgConnection, RunQueryDsl as _};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::{
    CLUSTER_START_TIMEOUT, RECOVER_TIMEOUT, as_user, kill_group, poll_until, process_group_of,
    start_on_free_ports, wait_gone_blocking,
};

/// How long a planned switchover may take, from the request to the
/// candidate taking writes, and then the old primary to stream from it as
/// a standby, before either is a failure (each about 2-3 s here).
pub const SWITCHOVER_TIMEOUT: Duration = Duration::from_secs(30);
use crate::process::{
    Group, ScratchDir, append_to, find_binary, log_tail, running_as_root, system_user,
};

/// The PostgreSQL binaries Patroni runs: `FLOWSTATE_PG_BIN`, else Debian's
/// PostgreSQL 15.
fn pg_bin_dir() -> PathBuf {
    std::env::var_os("FLOWSTATE_PG_BIN").map_or_else(
        || PathBuf::from("/usr/lib/postgresql/15/bin"),
        PathBuf::from,
    )
}

/// Where `patroni` and `etcd` are looked for first (then `PATH`).
fn bin_dirs() -> Vec<PathBuf> {
    ["/usr/bin", "/usr/sbin"].map(PathBuf::from).to_vec()
}

/// One member: a Patroni agent and the PostgreSQL it runs.
#[derive(Debug)]
struct Member {
    name: String,
    port: u16,
    api_port: u16,
    config: PathBuf,
    data: PathBuf,
    log: PathBuf,
    agent: Option<Group>,
}

impl Member {
    /// The postmaster's pid, from `postmaster.pid`, if it is alive.
    fn postmaster(&self) -> Option<u32> {
        let pid_file = std::fs::read_to_string(self.data.join("postmaster.pid")).ok()?;
        let pid: u32 = pid_file.lines().next()?.trim().parse().ok()?;
        super::alive(pid).then_some(pid)
    }

    /// SIGKILL of its agent and of its postmaster's process group.
    async fn kill(&mut self) {
        if let Some(mut agent) = self.agent.take() {
            agent.kill_now().await;
        }
        if let Some(postmaster) = self.postmaster() {
            if let Some(group) = process_group_of(postmaster) {
                kill_group(group);
            }
            let _ = tokio::task::spawn_blocking(move || {
                wait_gone_blocking(postmaster, Duration::from_secs(5))
            })
            .await;
        }
    }
}

/// The answer of `pg_is_in_recovery()`.
#[derive(QueryableByName)]
struct InRecovery {
    #[diesel(sql_type = Bool)]
    standby: bool,
}

/// A Patroni-managed PostgreSQL pair (primary and synchronous standby) on
/// a one-member etcd; dropping it kills every process and removes its
/// files.
#[derive(Debug)]
pub struct Patroni {
    members: [Member; 2],
    primary: usize,
    etcd: Option<Group>,
    etcd_log: PathBuf,
    killed_at: Option<Instant>,
    started_in: Duration,
    dir: ScratchDir,
}

impl Patroni {
    /// Starts etcd, the primary, then the standby, and waits until the
    /// standby streams synchronously and Patroni names it its synchronous
    /// standby, within [`CLUSTER_START_TIMEOUT`].
    /// A port taken between its pick and its bind ("Address already in
    /// use" in a member's or etcd's log) starts the pair over on other
    /// ports, twice at most.
    pub async fn start() -> Result<Self> {
        start_on_free_ports("patroni", 6, &mut (), async |(), ports| {
            let started = Instant::now();
            let result = tokio::time::timeout(CLUSTER_START_TIMEOUT, Self::try_start(ports))
                .await
                .with_context(|| {
                    format!("the Patroni pair did not start within {CLUSTER_START_TIMEOUT:?}")
                })?;
            let mut pair = result?;
            pair.started_in = started.elapsed();
            Ok(pair)
        })
        .await
    }

    /// Starts etcd and the pair on `ports` (etcd's client and peer ports,
    /// then each member's PostgreSQL and REST API ports).
    async fn try_start(ports: Vec<u16>) -> Result<Self> {
        let etcd_bin = find_binary("etcd", &bin_dirs())?;
        let patroni_bin = find_binary("patroni", &bin_dirs())?;
        let pg_bin = pg_bin_dir();
        if !pg_bin.join("postgres").is_file() {
            bail!("no postgres binary in {}", pg_bin.display());
        }
        let user = if running_as_root() {
            Some(system_user("postgres")?)
        } else {
            None
        };
        let dir = ScratchDir::new("patroni", user)?;
        let (etcd_client, etcd_peer) = (ports[0], ports[1]);
        let members = [0, 1].map(|i| Member {
            name: format!("pg{i}"),
            port: ports[2 + 2 * i],
            api_port: ports[3 + 2 * i],
            config: dir.path().join(format!("pg{i}.yml")),
            data: dir.path().join(format!("pg{i}")),
            log: dir.path().join(format!("pg{i}.log")),
            agent: None,
        });
        for member in &members {
            let yaml = patroni_yml(member, etcd_client, dir.path(), &pg_bin);
            std::fs::write(&member.config, yaml)
                .with_context(|| format!("write {}", member.config.display()))?;
        }
        let etcd_log = dir.path().join("etcd.log");
        let mut pair = Self {
            members,
            primary: 0,
            etcd: None,
            etcd_log,
            killed_at: None,
            started_in: Duration::ZERO,
            dir,
        };
        // etcd runs as whoever runs the suite: it needs no other user.
        let peer = format!("http://127.0.0.1:{etcd_peer}");
        let client = format!("http://127.0.0.1:{etcd_client}");
        let mut command = Command::new(etcd_bin);
        command
            .args(["--name", "etcd0", "--log-level", "warn"])
            .arg("--data-dir")
            .arg(pair.dir.path().join("etcd"))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("etcd0={peer}")])
            .stdout(append_to(&pair.etcd_log)?)
            .stderr(append_to(&pair.etcd_log)?);
        pair.etcd = Some(Group::spawn(&mut command).context("spawn etcd")?);
        poll_until("etcd", Duration::from_secs(20), &pair.etcd_log, || {
            etcd_healthy(etcd_client)
        })
        .await?;
        for i in 0..2 {
            let member = &mut pair.members[i];
            let mut command = Command::new(&patroni_bin);
            command
                .arg(&member.config)
                .env("HOME", pair.dir.path())
                .stdout(append_to(&member.log)?)
                .stderr(append_to(&member.log)?);
            as_user(&mut command, user);
            member.agent = Some(Group::spawn(&mut command).context("spawn patroni")?);
            if i == 0 {
                let url = pair.url_of(0, "postgres");
                poll_until(
                    "the Patroni primary",
                    RECOVER_TIMEOUT,
                    &pair.members[0].log,
                    || is_primary(&url),
                )
                .await?;
            }
        }
        let url = pair.url_of(0, "postgres");
        poll_until(
            "a synchronous Patroni standby",
            RECOVER_TIMEOUT,
            &pair.members[1].log,
            || has_sync_standby(&url),
        )
        .await?;
        // Patroni names its synchronous standby in etcd a loop after the
        // primary reports it `sync`; until then it refuses a switchover to
        // it (412) and would not promote it on a failover.
        let (api, name) = (pair.members[0].api_port, pair.members[1].name.clone());
        poll_until(
            "Patroni naming its synchronous standby",
            RECOVER_TIMEOUT,
            &pair.members[0].log,
            || is_sync_standby(api, &name),
        )
        .await?;
        Ok(pair)
    }

    /// How long [`Self::start`] took, from nothing to a synchronous
    /// standby streaming.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The URL of database `name` on member `member` (0 or 1).
    fn url_of(&self, member: usize, name: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/{name}",
            self.members[member].port
        )
    }

    /// The URL of database `name` on the primary (the promoted standby
    /// after a failover).
    pub fn primary_url(&self, name: &str) -> String {
        self.url_of(self.primary, name)
    }

    /// The port of the primary (the promoted standby after a failover), on
    /// 127.0.0.1.
    pub fn primary_port(&self) -> u16 {
        self.members[self.primary].port
    }

    /// The URL of database `name` on the standby (before a failover: the
    /// member that will be promoted; after it: the dead old primary).
    pub fn standby_url(&self, name: &str) -> String {
        self.url_of(1 - self.primary, name)
    }

    /// One URL naming both members, `target_session_attrs=read-write`: a
    /// client (tokio-postgres, libpq) tries them in turn and keeps the one
    /// that takes writes.
    pub fn multi_host_url(&self, name: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{name}?target_session_attrs=read-write",
            self.members[0].port, self.members[1].port
        )
    }

    /// Creates database `name` on the primary (replicated to the standby)
    /// and answers its URL there.
    pub async fn create_database(&self, name: &str) -> Result<String> {
        crate::sql::check_identifier(name)?;
        let mut admin = AsyncPgConnection::establish(&self.primary_url("postgres"))
            .await
            .context("connect to the Patroni primary")?;
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await?;
        Ok(self.primary_url(name))
    }

    /// A crash of the primary's member: SIGKILL of its postmaster (every
    /// backend with it) and of its Patroni agent, which would otherwise
    /// restart PostgreSQL in place. The standby is promoted once the dead
    /// agent's leader key expires: [`Self::wait_for_promotion`].
    pub async fn kill_primary(&mut self) {
        self.killed_at = Some(Instant::now());
        self.members[self.primary].kill().await;
    }

    /// Waits, at most [`RECOVER_TIMEOUT`], until the standby takes writes
    /// (`pg_is_in_recovery()` false) after [`Self::kill_primary`]; it is
    /// the primary from then on. Answers the time from the kill to the
    /// promotion.
    pub async fn wait_for_promotion(&mut self) -> Result<Duration> {
        let killed_at = self.killed_at.context("no primary was killed")?;
        let standby = 1 - self.primary;
        let url = self.url_of(standby, "postgres");
        poll_until(
            "the standby's promotion",
            RECOVER_TIMEOUT,
            &self.members[standby].log,
            || is_primary(&url),
        )
        .await?;
        self.primary = standby;
        self.killed_at = None;
        Ok(killed_at.elapsed())
    }

    /// A planned switchover under Patroni, as an operator makes one
    /// (`patronictl switchover --force` sends the same request): `POST
    /// /switchover` to the primary's agent naming it the leader and the
    /// standby the candidate. Patroni demotes the primary (a fast
    /// shutdown: every session on it ends) and promotes the standby, the
    /// primary from then on. Answers the time from the request to the
    /// candidate taking writes (`pg_is_in_recovery()` false), within
    /// [`SWITCHOVER_TIMEOUT`]; fails if Patroni refuses or does not say it
    /// switched over. The old primary comes back as a standby after it:
    /// [`Self::wait_for_standby`].
    pub async fn switchover(&mut self) -> Result<Duration> {
        let (leader, candidate) = (self.primary, 1 - self.primary);
        let body = format!(
            r#"{{"leader":"{}","candidate":"{}"}}"#,
            self.members[leader].name, self.members[candidate].name
        );
        let url = self.url_of(candidate, "postgres");
        let api = self.members[leader].api_port;
        // Patroni refuses a switchover to a candidate it has not named its
        // synchronous standby yet (412): a pair just started, or a second
        // switchover soon after the first.
        let name = self.members[candidate].name.clone();
        poll_until(
            "Patroni naming the candidate its synchronous standby",
            SWITCHOVER_TIMEOUT,
            &self.members[leader].log,
            || is_sync_standby(api, &name),
        )
        .await?;
        let request = http(api, "POST", "/switchover", &body, SWITCHOVER_TIMEOUT);
        let promoted = poll_until(
            "the candidate's promotion in a switchover",
            SWITCHOVER_TIMEOUT,
            &self.members[candidate].log,
            || is_primary(&url),
        );
        tokio::pin!(request, promoted);
        let (mut answered, mut took) = (false, None);
        // The promotion's own time, not the answer's: Patroni polls its
        // result once a second before it answers.
        while !answered || took.is_none() {
            tokio::select! {
                answer = &mut request, if !answered => {
                    let (status, text) = answer.context("Patroni's POST /switchover")?;
                    if status != 200 || !text.contains("witched over") {
                        bail!(
                            "Patroni's POST /switchover answered {status}: {text}; {}:\n{}",
                            self.members[leader].log.display(),
                            log_tail(&self.members[leader].log, 30)
                        );
                    }
                    answered = true;
                }
                promoted = &mut promoted, if took.is_none() => took = Some(promoted?),
            }
        }
        let took = took.unwrap_or_default();
        self.primary = candidate;
        Ok(took)
    }

    /// Waits, at most [`SWITCHOVER_TIMEOUT`], until the member that is not
    /// the primary (after [`Self::switchover`]: the demoted old primary)
    /// accepts connections as a standby (`pg_is_in_recovery()`) and the
    /// primary reports it streaming; answers how long that took.
    pub async fn wait_for_standby(&self) -> Result<Duration> {
        let standby = 1 - self.primary;
        let standby_url = self.url_of(standby, "postgres");
        let primary_url = self.url_of(self.primary, "postgres");
        poll_until(
            "the old primary streaming as a standby",
            SWITCHOVER_TIMEOUT,
            &self.members[standby].log,
            || async {
                is_standby(&standby_url).await && has_standby_streaming(&primary_url).await
            },
        )
        .await
    }

    /// The pid of member `member`'s (0 or 1) postmaster, if it runs: a
    /// new one after a restart (a demotion restarts it).
    pub fn postmaster_pid(&self, member: usize) -> Option<u32> {
        self.members[member].postmaster()
    }

    /// Which member (0 or 1) is the primary.
    pub fn primary_member(&self) -> usize {
        self.primary
    }

    /// The URL of database `name` on member `member` (0 or 1), whatever
    /// its role.
    pub fn member_url(&self, member: usize, name: &str) -> String {
        self.url_of(member, name)
    }

    /// The port of member `member` (0 or 1), on 127.0.0.1.
    pub fn member_port(&self, member: usize) -> u16 {
        self.members[member].port
    }

    /// The temp directory holding every file (removed when it drops).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Every live process it started: the agents, the postmasters, etcd.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self.etcd.iter().map(Group::pid).collect();
        for member in &self.members {
            pids.extend(member.agent.as_ref().map(Group::pid));
            pids.extend(member.postmaster());
        }
        pids
    }

    /// How many lines of member `member`'s log (Patroni's and
    /// PostgreSQL's: every error a server sends is logged there) contain
    /// `text`.
    pub fn log_lines(&self, member: usize, text: &str) -> usize {
        std::fs::read_to_string(&self.members[member].log).map_or(0, |log| {
            log.lines().filter(|line| line.contains(text)).count()
        })
    }

    /// The last lines of member `member`'s log (Patroni's and PostgreSQL's).
    pub fn log_tail(&self, member: usize, lines: usize) -> String {
        log_tail(&self.members[member].log, lines)
    }
}

impl Drop for Patroni {
    fn drop(&mut self) {
        // Agents first, so none restarts its postmaster; then the
        // postmasters (sessions of their own) and etcd.
        let postmasters: Vec<u32> = self.members.iter().filter_map(Member::postmaster).collect();
        for member in &mut self.members {
            if let Some(mut agent) = member.agent.take() {
                agent.kill();
            }
        }
        for &postmaster in &postmasters {
            if let Some(group) = process_group_of(postmaster) {
                kill_group(group);
            }
        }
        for postmaster in postmasters {
            wait_gone_blocking(postmaster, Duration::from_secs(5));
        }
        if let Some(mut etcd) = self.etcd.take() {
            etcd.kill();
        }
    }
}

/// Member `member`'s `patroni.yml`.
fn patroni_yml(member: &Member, etcd_port: u16, dir: &Path, pg_bin: &Path) -> String {
    let mut yaml = String::new();
    let _ = write!(
        yaml,
        "scope: flowstate_faults
name: {name}
log:
  level: INFO
restapi:
  listen: 127.0.0.1:{api_port}
  connect_address: 127.0.0.1:{api_port}
etcd3:
  hosts: 127.0.0.1:{etcd_port}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 3
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: false
      use_slots: true
      parameters:
        shared_buffers: 32MB
        max_connections: 50
        max_wal_senders: 5
        max_replication_slots: 5
        wal_level: replica
        hot_standby: 'on'
        fsync: 'off'
        full_page_writes: 'off'
  initdb:
  - encoding: UTF8
  - locale: C
  - auth: trust
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{port}
  connect_address: 127.0.0.1:{port}
  data_dir: {data}
  bin_dir: {bin}
  pgpass: {dir}/{name}.pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: {dir}
",
        name = member.name,
        port = member.port,
        api_port = member.api_port,
        data = member.data.display(),
        bin = pg_bin.display(),
        dir = dir.display(),
    );
    yaml
}

/// Whether etcd at 127.0.0.1:`port` answers `/health` with health true,
/// within two seconds (plain HTTP/1.0 over a socket).
async fn etcd_healthy(port: u16) -> bool {
    let ask = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream
            .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        std::io::Result::Ok(answer.contains("\"health\":\"true\""))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), ask).await,
        Ok(Ok(true))
    )
}

/// Whether the server at `url` accepts connections and is a primary,
/// within two seconds.
async fn is_primary(url: &str) -> bool {
    let ask = async {
        let mut conn = AsyncPgConnection::establish(url).await.ok()?;
        let row: InRecovery = diesel::sql_query("SELECT pg_is_in_recovery() AS standby")
            .get_result(&mut conn)
            .await
            .ok()?;
        Some(!row.standby)
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), ask).await,
        Ok(Some(true))
    )
}

/// Whether the primary at `url` has a standby streaming in `sync` state,
/// within two seconds.
async fn has_sync_standby(url: &str) -> bool {
    let ask = async {
        let mut conn = crate::sql::RawConn::connect(url).await.ok()?;
        conn.count(
            "SELECT COUNT(*) AS n FROM pg_stat_replication \
             WHERE state = 'streaming' AND sync_state = 'sync'",
        )
        .await
        .ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), ask).await,
        Ok(Some(1))
    )
}

/// Whether the server at `url` accepts connections and is a standby (in
/// recovery), within two seconds.
async fn is_standby(url: &str) -> bool {
    let ask = async {
        let mut conn = AsyncPgConnection::establish(url).await.ok()?;
        let row: InRecovery = diesel::sql_query("SELECT pg_is_in_recovery() AS standby")
            .get_result(&mut conn)
            .await
            .ok()?;
        Some(row.standby)
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), ask).await,
        Ok(Some(true))
    )
}

/// Whether the primary at `url` has a standby streaming (in any sync
/// state), within two seconds.
async fn has_standby_streaming(url: &str) -> bool {
    let ask = async {
        let mut conn = crate::sql::RawConn::connect(url).await.ok()?;
        conn.count("SELECT COUNT(*) AS n FROM pg_stat_replication WHERE state = 'streaming'")
            .await
            .ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(2), ask).await,
        Ok(Some(1))
    )
}

/// Sends `method path` with the JSON `body` to the HTTP server at
/// 127.0.0.1:`port` (HTTP/1.0 over a socket: the answer ends when the
/// server closes) and answers its status and body, within `bound`.
async fn http(
    port: u16,
    method: &str,
    path: &str,
    body: &str,
    bound: Duration,
) -> Result<(u16, String)> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let request = format!(
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        std::io::Result::Ok(answer)
    };
    let answer = tokio::time::timeout(bound, exchange)
        .await
        .with_context(|| format!("{method} {path}: no answer within {bound:?}"))?
        .with_context(|| format!("{method} {path} on 127.0.0.1:{port}"))?;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("{method} {path}: not an HTTP answer: {answer:?}"))?;
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_owned();
    Ok((status, body))
}

/// Whether the Patroni agent whose REST API listens on 127.0.0.1:`port`
/// names member `name` the synchronous standby (`GET /cluster`: its role
/// `sync_standby`), within two seconds.
async fn is_sync_standby(port: u16, name: &str) -> bool {
    let Ok((200, body)) = http(port, "GET", "/cluster", "", Duration::from_secs(2)).await else {
        return false;
    };
    let Ok(cluster) = serde_json::from_str::<serde_json::Value>(&body) else {
        return false;
    };
    cluster["members"].as_array().is_some_and(|members| {
        members
            .iter()
            .any(|member| member["name"] == name && member["role"] == "sync_standby")
    })
}
