//! [`Galera`]: three MariaDB 10.11 nodes replicating with Galera 4
//! (`galera-4`'s `libgalera_smm.so`) on loopback, in a temp directory.
//!
//! How it runs: each node has a `my.cnf` of its own (data directory,
//! socket, pid file, and four free ports: client, group communication,
//! IST and the rsync SST daemon) with small memory (128 MB buffer pool, no
//! performance schema, a 64 MB gcache) and the settings Galera needs
//! (`binlog_format=ROW`, `innodb_autoinc_lock_mode=2`, InnoDB). The first
//! node's data directory is made with `mariadb-install-db` and it
//! bootstraps the cluster (`--wsrep-new-cluster`); the others start empty
//! and join one at a time, receiving a full copy by rsync SST. The start
//! waits until every node reports `wsrep_cluster_size = 3` and
//! `wsrep_local_state_comment = Synced`.
//!
//! A node is killed with SIGKILL ([`Galera::kill`]) and brought back by
//! [`Galera::rejoin`]: `mariadbd --wsrep-recover` reads its last committed
//! position from InnoDB (bounded in time: it can hang after printing the
//! position), the node starts from that position and catches up by IST
//! from a donor's gcache. As root the nodes run as `mysql`.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::SimpleAsyncConnection as _;
use diesel_async::{AsyncConnection as _, AsyncMysqlConnection, RunQueryDsl as _};

use super::{CLUSTER_START_TIMEOUT, RECOVER_TIMEOUT, start_on_free_ports};
use crate::process::{
    Group, START_TIMEOUT, ScratchDir, append_to, find_binary, log_tail, run_bounded,
    running_as_root, system_user,
};

/// Where `galera-4` puts its provider on Debian.
const PROVIDER: &str = "/usr/lib/galera/libgalera_smm.so";

/// How long `mariadbd --wsrep-recover` may take before it is killed (the
/// position it printed, if any, is used all the same).
const WSREP_RECOVER_TIMEOUT: Duration = Duration::from_secs(20);

/// What a node says of itself (`SHOW GLOBAL STATUS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GaleraStatus {
    /// `wsrep_cluster_size`: the nodes in its primary component.
    pub cluster_size: u64,
    /// `wsrep_local_state_comment`: `Synced`, `Joining`, `Donor/Desynced`...
    pub state: String,
    /// `wsrep_ready`: whether it accepts queries.
    pub ready: bool,
}

impl GaleraStatus {
    /// Synced and ready in a primary component of `size` nodes.
    pub fn is_synced_in(&self, size: u64) -> bool {
        self.ready && self.cluster_size == size && self.state == "Synced"
    }
}

/// One node: its files, port and process.
#[derive(Debug)]
struct Node {
    port: u16,
    cnf: PathBuf,
    data: PathBuf,
    log: PathBuf,
    dir: PathBuf,
    server: Option<Group>,
}

/// A 3-node MariaDB Galera cluster of the suite's own; dropping it kills
/// every node and removes its files.
#[derive(Debug)]
pub struct Galera {
    nodes: Vec<Node>,
    mariadbd: PathBuf,
    started_in: Duration,
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

/// One row of the status query.
#[derive(QueryableByName)]
struct StatusRow {
    #[diesel(sql_type = BigInt)]
    size: i64,
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = Text)]
    ready: String,
}

const STATUS_SQL: &str = "SELECT \
     CAST(COALESCE((SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
       WHERE VARIABLE_NAME = 'WSREP_CLUSTER_SIZE'), '0') AS SIGNED) AS size, \
     COALESCE((SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
       WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT'), '') AS state, \
     COALESCE((SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
       WHERE VARIABLE_NAME = 'WSREP_READY'), '') AS ready";

impl Galera {
    /// How many nodes it has.
    pub const NODES: usize = 3;

    /// Starts the three nodes (bootstrap, then two joins) and waits until
    /// all are `Synced` in a cluster of 3, within
    /// [`CLUSTER_START_TIMEOUT`]. A port taken between its pick and its
    /// bind makes it start over on new ports (twice at most).
    pub async fn start() -> Result<Self> {
        start_on_free_ports("galera", 4 * Self::NODES, &mut (), async |(), ports| {
            let started = Instant::now();
            match tokio::time::timeout(CLUSTER_START_TIMEOUT, Self::try_start(ports)).await {
                Ok(Ok(mut cluster)) => {
                    cluster.started_in = started.elapsed();
                    Ok(cluster)
                }
                Ok(Err(err)) => Err(err),
                Err(_) => {
                    bail!("the Galera cluster did not start within {CLUSTER_START_TIMEOUT:?}")
                }
            }
        })
        .await
    }

    /// Starts the three nodes on `ports` (four a node: client, group
    /// communication, IST, SST).
    async fn try_start(ports: Vec<u16>) -> Result<Self> {
        let install = find_binary("mariadb-install-db", &bin_dirs())?;
        let mariadbd = find_binary("mariadbd", &bin_dirs())?;
        if !std::path::Path::new(PROVIDER).is_file() {
            bail!("no Galera provider at {PROVIDER} (install galera-4)");
        }
        let (user, owner) = if running_as_root() {
            (Some("mysql"), Some(system_user("mysql")?))
        } else {
            (None, None)
        };
        let dir = ScratchDir::new("galera", owner)?;
        let gcomm: Vec<String> = (0..Self::NODES)
            .map(|i| format!("127.0.0.1:{}", ports[4 * i + 1]))
            .collect();
        let mut nodes = Vec::with_capacity(Self::NODES);
        for i in 0..Self::NODES {
            let node_dir = dir.path().join(format!("node{i}"));
            std::fs::create_dir(&node_dir)
                .with_context(|| format!("create {}", node_dir.display()))?;
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::chown(&node_dir, Some(uid), Some(gid))?;
            }
            let node = Node {
                port: ports[4 * i],
                cnf: node_dir.join("my.cnf"),
                data: node_dir.join("data"),
                log: node_dir.join("server.log"),
                dir: node_dir,
                server: None,
            };
            let cnf = my_cnf(&node, i, &gcomm, ports[4 * i + 2], ports[4 * i + 3], user);
            std::fs::write(&node.cnf, cnf)
                .with_context(|| format!("write {}", node.cnf.display()))?;
            nodes.push(node);
        }
        // Only the bootstrap node needs system tables: the joiners receive
        // the whole data directory by SST.
        let first = &nodes[0];
        let install_log = first.dir.join("install.log");
        let mut command = Command::new(install);
        command
            .arg(format!("--defaults-file={}", first.cnf.display()))
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
            .stdout(append_to(&install_log)?)
            .stderr(append_to(&install_log)?);
        run_bounded(
            &mut command,
            "mariadb-install-db (galera)",
            START_TIMEOUT,
            &install_log,
        )
        .await?;
        for node in &nodes[1..] {
            std::fs::create_dir(&node.data)?;
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::chown(&node.data, Some(uid), Some(gid))?;
            }
        }
        let mut cluster = Self {
            nodes,
            mariadbd,
            started_in: Duration::ZERO,
            dir,
        };
        cluster.launch(0, &["--wsrep-new-cluster"], 1).await?;
        for i in 1..Self::NODES {
            cluster.launch(i, &[], i as u64 + 1).await?;
        }
        cluster.wait_synced(RECOVER_TIMEOUT).await?;
        Ok(cluster)
    }

    /// How long [`Self::start`] took, from nothing to three nodes synced.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// Node `node`'s client port.
    pub fn port(&self, node: usize) -> u16 {
        self.nodes[node].port
    }

    /// The URL of database `name` on node `node` (an empty name: the
    /// server), over TCP (`prefer_socket=false`, as the throw-away
    /// MariaDB's).
    pub fn url(&self, node: usize, name: &str) -> String {
        format!(
            "mysql://root@127.0.0.1:{}/{name}?prefer_socket=false",
            self.nodes[node].port
        )
    }

    /// The URL of database `name` listing every node, `first` first and
    /// the others after it in node order (`mysql://root@127.0.0.1:p1,
    /// 127.0.0.1:p2,127.0.0.1:p3/name?prefer_socket=false`), with `params`
    /// (`&`-joined, may be empty) added: a store on it spreads its
    /// connections over the nodes, or with `load_balance_hosts=disable`
    /// keeps to the first that answers, and moves off a node that dies.
    pub fn nodes_url(&self, first: usize, name: &str, params: &str) -> String {
        let hosts: Vec<String> = (0..Self::NODES)
            .map(|i| format!("127.0.0.1:{}", self.nodes[(first + i) % Self::NODES].port))
            .collect();
        let extra = if params.is_empty() {
            String::new()
        } else {
            format!("&{params}")
        };
        format!(
            "mysql://root@{}/{name}?prefer_socket=false{extra}",
            hosts.join(",")
        )
    }

    /// The URLs of database `name` on every node, in node order.
    pub fn urls(&self, name: &str) -> Vec<String> {
        (0..Self::NODES).map(|node| self.url(node, name)).collect()
    }

    /// Creates database `name` on the cluster (through the first running
    /// node; DDL replicates to all) and answers its URL on every node.
    pub async fn create_database(&self, name: &str) -> Result<Vec<String>> {
        crate::sql::check_identifier(name)?;
        let node = (0..Self::NODES)
            .find(|&node| self.nodes[node].server.is_some())
            .context("no Galera node runs")?;
        let mut admin = AsyncMysqlConnection::establish(&self.url(node, ""))
            .await
            .with_context(|| format!("connect to Galera node {node}"))?;
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await?;
        Ok(self.urls(name))
    }

    /// What node `node` says of itself, asked within two seconds.
    pub async fn status(&self, node: usize) -> Result<GaleraStatus> {
        let url = self.url(node, "");
        let ask = async {
            let mut conn = AsyncMysqlConnection::establish(&url).await?;
            let row: StatusRow = diesel::sql_query(STATUS_SQL).get_result(&mut conn).await?;
            anyhow::Ok(GaleraStatus {
                cluster_size: u64::try_from(row.size)?,
                state: row.state,
                ready: row.ready == "ON",
            })
        };
        tokio::time::timeout(Duration::from_secs(2), ask)
            .await
            .with_context(|| format!("Galera node {node} did not answer within 2 s"))?
    }

    /// Waits, at most `bound`, until every running node is `Synced` and
    /// ready in a cluster of as many nodes as run; answers how long it
    /// took.
    pub async fn wait_synced(&self, bound: Duration) -> Result<Duration> {
        let running: Vec<usize> = (0..Self::NODES)
            .filter(|&node| self.nodes[node].server.is_some())
            .collect();
        let size = running.len() as u64;
        let started = Instant::now();
        loop {
            let mut last = Vec::new();
            for &node in &running {
                match self.status(node).await {
                    Ok(status) if status.is_synced_in(size) => {}
                    Ok(status) => last.push(format!("node {node}: {status:?}")),
                    Err(err) => last.push(format!("node {node}: {err:#}")),
                }
            }
            if last.is_empty() {
                return Ok(started.elapsed());
            }
            if started.elapsed() >= bound {
                bail!(
                    "Galera: not {size} nodes Synced within {bound:?}: {}",
                    last.join("; ")
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A crash of node `node`: SIGKILL of its `mariadbd`. The others see
    /// it leave only after Galera's suspect timeout (about 5 s):
    /// [`Self::wait_synced`] waits for that.
    pub async fn kill(&mut self, node: usize) {
        if let Some(mut group) = self.nodes[node].server.take() {
            group.kill_now().await;
        }
    }

    /// Brings node `node` back after [`Self::kill`]: its last committed
    /// position recovered by `mariadbd --wsrep-recover` (bounded), then
    /// the node started from it, catching up by IST; waits until all
    /// three nodes are `Synced` in a cluster of 3. Answers how long it
    /// took, recovery included.
    pub async fn rejoin(&mut self, node: usize) -> Result<Duration> {
        if self.nodes[node].server.is_some() {
            bail!("Galera node {node} still runs");
        }
        let started = Instant::now();
        let position = self.recover_position(node).await?;
        let start_at = position.map(|position| format!("--wsrep-start-position={position}"));
        let extra: Vec<&str> = start_at.iter().map(String::as_str).collect();
        self.launch(node, &extra, Self::NODES as u64).await?;
        self.wait_synced(RECOVER_TIMEOUT).await?;
        Ok(started.elapsed())
    }

    /// The temp directory holding every node's files (removed when it
    /// drops).
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Node `node`'s `mariadbd` pid, while it runs.
    pub fn pid(&self, node: usize) -> Option<u32> {
        self.nodes[node].server.as_ref().map(Group::pid)
    }

    /// The last lines of node `node`'s log.
    pub fn log_tail(&self, node: usize, lines: usize) -> String {
        log_tail(&self.nodes[node].log, lines)
    }

    /// `mariadbd --wsrep-recover` on node `node`'s data, killed past
    /// [`WSREP_RECOVER_TIMEOUT`] or once it printed the position:
    /// answers `uuid:seqno`, or `None` if it printed none (the server then
    /// recovers the position itself at start).
    async fn recover_position(&self, node: usize) -> Result<Option<String>> {
        let this = &self.nodes[node];
        let log = this.dir.join("wsrep-recover.log");
        let _ = std::fs::remove_file(&log);
        let mut command = Command::new(&self.mariadbd);
        command
            .arg(format!("--defaults-file={}", this.cnf.display()))
            .arg("--wsrep-recover")
            .arg(format!("--log-error={}", log.display()))
            .stdout(append_to(&this.log)?)
            .stderr(append_to(&this.log)?);
        let mut group = Group::spawn(&mut command).context("spawn mariadbd --wsrep-recover")?;
        let deadline = Instant::now() + WSREP_RECOVER_TIMEOUT;
        let position = loop {
            let position = std::fs::read_to_string(&log)
                .ok()
                .and_then(|text| recovered_position(&text));
            if position.is_some() || group.has_exited().is_some() {
                break position;
            }
            if Instant::now() >= deadline {
                tracing::warn!(node, "mariadbd --wsrep-recover printed no position in time");
                break None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // Exits by itself once the position is printed, or hangs: either
        // way it must be gone before the server starts on the same files.
        if group.wait_for_exit(Duration::from_secs(5)).await.is_none() {
            tracing::warn!(
                node,
                "mariadbd --wsrep-recover hung after recovering: killed"
            );
        }
        group.kill_now().await;
        Ok(position)
    }

    /// Starts node `node`'s `mariadbd` with `extra` arguments and waits
    /// (at most [`RECOVER_TIMEOUT`]) until it is `Synced` in a cluster of
    /// `size`.
    async fn launch(&mut self, node: usize, extra: &[&str], size: u64) -> Result<()> {
        let this = &self.nodes[node];
        let mut command = Command::new(&self.mariadbd);
        command
            .arg(format!("--defaults-file={}", this.cnf.display()))
            .args(extra)
            .stdout(append_to(&this.log)?)
            .stderr(append_to(&this.log)?);
        let mut group = Group::spawn(&mut command).context("spawn mariadbd (galera)")?;
        let started = Instant::now();
        loop {
            if let Some(status) = group.has_exited() {
                bail!(
                    "Galera node {node} exited while starting ({status}):\n{}",
                    log_tail(&this.log, 30)
                );
            }
            if matches!(self.status(node).await, Ok(status) if status.is_synced_in(size)) {
                break;
            }
            if started.elapsed() >= RECOVER_TIMEOUT {
                group.kill_now().await;
                bail!(
                    "Galera node {node} not Synced within {RECOVER_TIMEOUT:?}:\n{}",
                    log_tail(&this.log, 30)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tracing::debug!(node, took = ?started.elapsed(), "galera node synced");
        self.nodes[node].server = Some(group);
        Ok(())
    }
}

/// The `uuid:seqno` in `--wsrep-recover`'s "Recovered position" line.
fn recovered_position(log: &str) -> Option<String> {
    let (_, after) = log.split_once("WSREP: Recovered position: ")?;
    let position: String = after
        .chars()
        .take_while(|c| c.is_ascii_hexdigit() || *c == '-' || *c == ':')
        .collect();
    // uuid (36) ':' seqno: a position cut short by a log still being
    // written is no position.
    let (uuid, seqno) = position.split_once(':')?;
    (uuid.len() == 36 && !seqno.is_empty() && seqno.chars().all(|c| c.is_ascii_digit() || c == '-'))
        .then_some(position)
}

/// Node `index`'s `my.cnf`.
fn my_cnf(
    node: &Node,
    index: usize,
    gcomm: &[String],
    ist_port: u16,
    sst_port: u16,
    user: Option<&str>,
) -> String {
    let dir = node.dir.display();
    let mut cnf = String::from("[mysqld]\n");
    let _ = writeln!(cnf, "datadir={}", node.data.display());
    let _ = writeln!(cnf, "port={}", node.port);
    let _ = writeln!(cnf, "socket={dir}/mariadb.sock");
    let _ = writeln!(cnf, "pid-file={dir}/mariadbd.pid");
    let _ = writeln!(cnf, "log-error={}", node.log.display());
    if let Some(user) = user {
        let _ = writeln!(cnf, "user={user}");
    }
    cnf.push_str(
        "bind-address=127.0.0.1\n\
         skip-name-resolve\n\
         innodb_buffer_pool_size=128M\n\
         innodb_log_file_size=16M\n\
         innodb_flush_log_at_trx_commit=2\n\
         performance_schema=OFF\n\
         max_connections=60\n\
         default_storage_engine=InnoDB\n\
         binlog_format=ROW\n\
         innodb_autoinc_lock_mode=2\n\
         wsrep_on=ON\n",
    );
    let gcomm_port = &gcomm[index];
    let _ = writeln!(cnf, "wsrep_provider={PROVIDER}");
    let _ = writeln!(cnf, "wsrep_cluster_name=flowstate_faults");
    let _ = writeln!(cnf, "wsrep_cluster_address=gcomm://{}", gcomm.join(","));
    let _ = writeln!(cnf, "wsrep_node_name=node{index}");
    let _ = writeln!(cnf, "wsrep_node_address={gcomm_port}");
    let _ = writeln!(
        cnf,
        "wsrep_provider_options=\"gmcast.listen_addr=tcp://{gcomm_port};\
         ist.recv_addr=127.0.0.1:{ist_port};gcache.size=64M\""
    );
    let _ = writeln!(cnf, "wsrep_sst_method=rsync");
    let _ = writeln!(cnf, "wsrep_sst_receive_address=127.0.0.1:{sst_port}");
    cnf
}

impl Drop for Galera {
    fn drop(&mut self) {
        // The data is thrown away: no clean shutdown to wait for.
        for node in &mut self.nodes {
            if let Some(mut group) = node.server.take() {
                group.kill();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::recovered_position;

    #[test]
    fn the_recovered_position_is_read_from_the_log() {
        let log = "2026-12-04 23:40:37 0 [Note] WSREP: Recovered position: \
                   090bf3f4-f03c-11f1-925f-1b70036f1747:9\n2026-12-04 ...";
        assert_eq!(
            recovered_position(log).as_deref(),
            Some("090bf3f4-f03c-11f1-925f-1b70036f1747:9")
        );
        assert_eq!(
            recovered_position("WSREP: Recovered position: 090bf3f4-f0"),
            None
        );
        assert_eq!(recovered_position("nothing recovered"), None);
    }
}
