//! [`Nodes`]: which node of those a MySQL URL lists each new connection of
//! a store's pool goes to (MariaDB Galera: every node takes writes).
//!
//! - A new connection goes to a node that answers and, on a Galera node
//!   (`wsrep_on`), says `wsrep_ready = ON` and `Synced`: asked once per
//!   new connection, before the statement log or the pool's watch see it,
//!   so no budget counts it; a node whose operator set
//!   `wsrep_reject_queries` (draining it) is not ready either. A server
//!   that is not a Galera node is asked once (`SHOW GLOBAL VARIABLES`,
//!   `wsrep_on`) and then believed.
//! - A connection to a Galera node sets its session's `wsrep_sync_wait`
//!   ([`StoreConfig::galera_sync_wait`](crate::StoreConfig::galera_sync_wait),
//!   7 unless set): Galera is synchronous for commits but not for reads,
//!   and a store's calls go to whichever pooled connection is free, on
//!   whichever node, so without it a read (or a guarded write's read of
//!   its row) may miss what the store itself committed through another
//!   node a moment before. Set with the check, before the statement log.
//! - Spread (the default): the node holding the fewest of the pool's
//!   connections first, ties in the order listed, so a pool is spread
//!   over the nodes and its first connection is on the first node.
//!   In order (`load_balance_hosts=disable`): the first node listed that
//!   answers.
//! - A node that fails (it refuses the connection or does not answer
//!   within the bound, is not ready, or a connection to it was lost) is
//!   skipped for a while: [`FIRST_SKIP`], doubled with each failure in a
//!   row up to [`LONGEST_SKIP`]. A node skipped is still tried when no
//!   other answers. Once its time is up, the next connection that comes
//!   out of the pool sends a probe (a connection of its own, the same
//!   check, then closed; never on a caller's time); when it answers, the
//!   pool's connections move back: a connection on a node it should
//!   leave (in order: one listed before it answers; spread: it holds two
//!   more of the pool's connections than another that answers; or its
//!   own node is skipped while another answers) is dropped as it comes
//!   out of the pool, and the pool opens the next one where it belongs.
//! - When no node answers, the error names every node tried and why.
//! - Each node has a slot where its connections' picks of the oldest
//!   claimable rows start ([`crate::health::pick_slot`], `mysql/spread.rs`):
//!   a Galera node's `wsrep_local_index`, or its place in the list; none
//!   for one server that is not a Galera node, whose picks are as they
//!   always were.
//!
//! The per-connection side is [`Placed`], kept in the connection's watch
//! ([`crate::health::Placement`]): it counts the connection on its node
//! while it lives.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use diesel::ConnectionError;
use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{AsyncConnection, AsyncMysqlConnection};
// `RunQueryDsl` is named, not imported: its blanket `load` would shadow
// the atomics'.

use crate::health::Placement;
use crate::url::node_address;

/// How long a node that failed is skipped after its first failure in a
/// row.
pub(crate) const FIRST_SKIP: Duration = Duration::from_millis(250);

/// The longest a node is skipped: after this a probe asks it again,
/// however often it failed.
pub(crate) const LONGEST_SKIP: Duration = Duration::from_secs(2);

/// The longest a connection to one node may take (with its check) when
/// the URL lists several: past it the next node is tried.
const CONNECT_BOUND: Duration = Duration::from_secs(2);

/// What a node says about itself, one variable or status a row.
#[derive(QueryableByName, Debug)]
struct Setting {
    #[diesel(sql_type = Text, column_name = "Variable_name")]
    name: String,
    #[diesel(sql_type = Text, column_name = "Value")]
    value: String,
}

/// Whether a node is a Galera node, as it last said.
const UNKNOWN: u8 = 0;
/// Not a Galera node (`wsrep_on` is off or missing).
const PLAIN: u8 = 1;
/// A Galera node.
const GALERA: u8 = 2;

/// No slot: picks start at the oldest row.
const NO_SLOT: usize = usize::MAX;

/// One node: its URL and what the pool knows of it.
#[derive(Debug)]
struct Node {
    /// Its URL, as the driver takes it.
    url: String,
    /// `host:port`, for logs and errors.
    address: String,
    /// The pool's connections on it, and those being opened on it.
    placed: AtomicUsize,
    /// Its failures in a row (0: it answers).
    failures: AtomicU32,
    /// Until when it is skipped ([`Nodes::stamp`]).
    skip_until: AtomicU64,
    /// Whether a probe of it is under way.
    probing: AtomicBool,
    /// [`UNKNOWN`], [`PLAIN`] or [`GALERA`].
    kind: AtomicU8,
    /// Where picks on it start ([`Placement::slot`]), [`NO_SLOT`] for
    /// the oldest: its `wsrep_local_index` on a Galera node, else its
    /// place in the list when there are several.
    slot: AtomicUsize,
    /// Why it last failed.
    why: Mutex<String>,
}

/// The nodes a store's URL lists, shared by its pool's connections.
#[derive(Debug)]
pub(crate) struct Nodes {
    list: Vec<Node>,
    /// `load_balance_hosts=disable`: the first that answers.
    in_order: bool,
    /// When it was made: stamps are nanoseconds since.
    origin: Instant,
    /// How long one node may take to connect and answer its check.
    connect_within: Duration,
    /// The `wsrep_sync_wait` set on each session to a Galera node.
    sync_wait: u8,
}

/// Why a node was not used.
#[derive(Debug)]
enum Refusal {
    /// The connection failed.
    Connect(ConnectionError),
    /// It answered but is not ready to serve.
    NotReady(String),
    /// It did not answer within the bound.
    Silent(Duration),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(err) => write!(f, "{err}"),
            Self::NotReady(why) => write!(f, "not ready: {why}"),
            Self::Silent(within) => write!(f, "no answer within {} ms", within.as_millis()),
        }
    }
}

impl Nodes {
    /// The nodes of `urls` (one URL per node, as
    /// [`DatabaseUrl::nodes`](crate::DatabaseUrl::nodes)), used in order
    /// if `in_order`, each connection bounded by `acquire_timeout` (and by
    /// [`CONNECT_BOUND`] when there are several), each session to a Galera
    /// node with `wsrep_sync_wait = sync_wait`.
    pub(crate) fn new(
        urls: &[String],
        in_order: bool,
        acquire_timeout: Duration,
        sync_wait: u8,
    ) -> Arc<Self> {
        let several = urls.len() > 1;
        Arc::new(Self {
            list: urls
                .iter()
                .enumerate()
                .map(|(i, url)| Node {
                    url: url.clone(),
                    address: node_address(url).to_owned(),
                    placed: AtomicUsize::new(0),
                    failures: AtomicU32::new(0),
                    skip_until: AtomicU64::new(0),
                    probing: AtomicBool::new(false),
                    kind: AtomicU8::new(UNKNOWN),
                    slot: AtomicUsize::new(if several { i } else { NO_SLOT }),
                    why: Mutex::new(String::new()),
                })
                .collect(),
            in_order,
            origin: Instant::now(),
            connect_within: if several {
                acquire_timeout.min(CONNECT_BOUND)
            } else {
                acquire_timeout
            },
            sync_wait,
        })
    }

    /// Every node, each with why it last failed (empty if it did not):
    /// for the error of a store that could not open.
    pub(crate) fn tried(&self) -> Vec<String> {
        self.list
            .iter()
            .map(|node| {
                let why = node.why.lock().map(|why| why.clone()).unwrap_or_default();
                if why.is_empty() {
                    node.address.clone()
                } else {
                    format!("{} ({why})", node.address)
                }
            })
            .collect()
    }

    /// How many nodes.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// `at` as nanoseconds since `origin`, plus one.
    fn stamp(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.origin).as_nanos();
        u64::try_from(since).unwrap_or(u64::MAX - 1) + 1
    }

    /// Whether node `i` answers (it has not failed since it last did).
    fn answers(&self, i: usize) -> bool {
        self.list[i].failures.load(Ordering::Acquire) == 0
    }

    /// Whether node `i` may be tried now: it answers, or its skip is over.
    fn may_try(&self, i: usize, now: u64) -> bool {
        self.answers(i) || self.list[i].skip_until.load(Ordering::Acquire) <= now
    }

    /// The order in which a new connection tries the nodes: those that may
    /// be tried (spread: fewest connections first; ties, and in order, as
    /// listed), then the skipped ones as listed.
    fn candidates(&self) -> Vec<usize> {
        let now = self.stamp(Instant::now());
        let (mut first, skipped): (Vec<usize>, Vec<usize>) =
            (0..self.list.len()).partition(|&i| self.may_try(i, now));
        if !self.in_order {
            first.sort_by_key(|&i| self.list[i].placed.load(Ordering::Acquire));
        }
        first.extend(skipped);
        first
    }

    /// Opens a connection on the node that should take it
    /// ([`Nodes::candidates`]), trying the next on a failure; answers it
    /// with its [`Placed`], or the failure: with one node, the driver's
    /// own error; with several, one naming every node tried and why.
    pub(crate) async fn establish(
        self: &Arc<Self>,
    ) -> diesel::ConnectionResult<(AsyncMysqlConnection, Placed)> {
        let mut tried = Vec::new();
        for i in self.candidates() {
            let placed = Placed::on(self, i);
            match self.open(i).await {
                Ok(conn) => {
                    self.answered(i);
                    return Ok((conn, placed));
                }
                Err(refusal) => {
                    self.failed(i, &refusal.to_string());
                    if let (Refusal::Connect(err), 1) = (&refusal, self.list.len()) {
                        // One node: the driver's error, as it always was.
                        return Err(clone_connection_error(err));
                    }
                    tried.push(format!("{} ({refusal})", self.list[i].address));
                }
            }
        }
        Err(ConnectionError::BadConnection(format!(
            "no MySQL node answered: {}",
            tried.join("; ")
        )))
    }

    /// A connection to node `i` that passed its check, within the bound.
    async fn open(&self, i: usize) -> Result<AsyncMysqlConnection, Refusal> {
        let node = &self.list[i];
        let within = self.connect_within;
        let open = async {
            let mut conn = AsyncMysqlConnection::establish(&node.url)
                .await
                .map_err(Refusal::Connect)?;
            self.check(i, &mut conn).await?;
            Ok(conn)
        };
        tokio::time::timeout(within, open)
            .await
            .unwrap_or(Err(Refusal::Silent(within)))
    }

    /// Whether node `i`, reached by `conn`, may serve: unless it is known
    /// not to be a Galera node, `wsrep_on`, and on a Galera node
    /// `wsrep_reject_queries = NONE`, `wsrep_ready = ON` and
    /// `wsrep_local_state_comment = Synced`; then its session's
    /// `wsrep_sync_wait` is set.
    async fn check(&self, i: usize, conn: &mut AsyncMysqlConnection) -> Result<(), Refusal> {
        let node = &self.list[i];
        if node.kind.load(Ordering::Acquire) == PLAIN {
            return Ok(());
        }
        let asked =
            |err: diesel::result::Error| Refusal::NotReady(format!("asked its state: {err}"));
        let settings: Vec<Setting> = diesel_async::RunQueryDsl::load(
            diesel::sql_query(
                "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('wsrep_on', 'wsrep_reject_queries')",
            ),
            conn,
        )
        .await
        .map_err(asked)?;
        let setting = |name: &str| {
            settings
                .iter()
                .find(|row| row.name.eq_ignore_ascii_case(name))
                .map_or("", |row| row.value.as_str())
        };
        if !setting("wsrep_on").eq_ignore_ascii_case("ON") {
            node.kind.store(PLAIN, Ordering::Release);
            return Ok(());
        }
        node.kind.store(GALERA, Ordering::Release);
        // An operator draining the node for maintenance: it answers `SHOW`
        // and `SET` but refuses every other statement with 1047.
        let rejects = setting("wsrep_reject_queries");
        if !rejects.is_empty() && !rejects.eq_ignore_ascii_case("NONE") {
            return Err(Refusal::NotReady(format!("wsrep_reject_queries {rejects}")));
        }
        let status: Vec<Setting> = diesel_async::RunQueryDsl::load(
            diesel::sql_query(
                "SHOW GLOBAL STATUS WHERE Variable_name IN \
                 ('wsrep_ready', 'wsrep_local_state_comment', 'wsrep_local_index')",
            ),
            conn,
        )
        .await
        .map_err(asked)?;
        let value = |name: &str| {
            status
                .iter()
                .find(|row| row.name.eq_ignore_ascii_case(name))
                .map_or("", |row| row.value.as_str())
        };
        let (ready, state) = (value("wsrep_ready"), value("wsrep_local_state_comment"));
        if let Ok(index) = value("wsrep_local_index").parse::<usize>() {
            node.slot.store(index, Ordering::Release);
        }
        if ready.eq_ignore_ascii_case("ON") && state == "Synced" {
            diesel_async::SimpleAsyncConnection::batch_execute(
                conn,
                &format!("SET SESSION wsrep_sync_wait = {}", self.sync_wait),
            )
            .await
            .map_err(|err| Refusal::NotReady(format!("set wsrep_sync_wait: {err}")))
        } else {
            Err(Refusal::NotReady(format!(
                "wsrep_ready {ready}, wsrep_local_state_comment {state}"
            )))
        }
    }

    /// Notes that node `i` answered: it is no longer skipped.
    fn answered(&self, i: usize) {
        let node = &self.list[i];
        if node.failures.swap(0, Ordering::AcqRel) > 0 {
            tracing::info!(node = %node.address, "MySQL node answers again: connections move back");
        }
    }

    /// Notes that node `i` failed (`why`): it is skipped for a while,
    /// longer with each failure in a row.
    fn failed(&self, i: usize, why: &str) {
        let node = &self.list[i];
        let failures = node.failures.fetch_add(1, Ordering::AcqRel) + 1;
        let skip = FIRST_SKIP
            .saturating_mul(1 << (failures - 1).min(8))
            .min(LONGEST_SKIP);
        node.skip_until
            .store(self.stamp(Instant::now() + skip), Ordering::Release);
        node.kind.store(UNKNOWN, Ordering::Release);
        if let Ok(mut last) = node.why.lock() {
            why.clone_into(&mut last);
        }
        if failures == 1 && self.list.len() > 1 {
            tracing::warn!(node = %node.address, %why, "MySQL node skipped: new connections go to the others");
        }
    }

    /// Sends a probe to every node whose skip is over and that no probe is
    /// asking yet (each on a task of its own, if a runtime runs).
    fn tend(self: &Arc<Self>) {
        let now = self.stamp(Instant::now());
        for i in 0..self.list.len() {
            if self.answers(i) || !self.may_try(i, now) {
                continue;
            }
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                return;
            };
            if self.list[i]
                .probing
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            let nodes = Arc::clone(self);
            runtime.spawn(async move {
                match nodes.open(i).await {
                    Ok(conn) => {
                        drop(conn);
                        nodes.answered(i);
                    }
                    Err(refusal) => nodes.failed(i, &refusal.to_string()),
                }
                nodes.list[i].probing.store(false, Ordering::Release);
            });
        }
    }

    /// Whether a connection on node `i` should give way to one on another
    /// node (see the module doc). Sends nothing (probes go on tasks of
    /// their own).
    fn should_leave(self: &Arc<Self>, i: usize) -> bool {
        if self.list.len() < 2 {
            return false;
        }
        self.tend();
        let others = (0..self.list.len()).filter(|&j| j != i && self.answers(j));
        if !self.answers(i) {
            return others.count() > 0;
        }
        if self.in_order {
            return (0..i).any(|j| self.answers(j));
        }
        let here = self.list[i].placed.load(Ordering::Acquire);
        others
            .into_iter()
            .any(|j| self.list[j].placed.load(Ordering::Acquire) + 1 < here)
    }

    /// How many of the pool's connections are on each node, in the order
    /// listed (with those being opened).
    #[cfg(test)]
    fn spread_now(&self) -> Vec<usize> {
        self.list
            .iter()
            .map(|node| node.placed.load(Ordering::Acquire))
            .collect()
    }
}

/// Where one connection runs: its node, counted there while it lives.
#[derive(Debug)]
pub(crate) struct Placed {
    nodes: Arc<Nodes>,
    node: usize,
}

impl Placed {
    /// A connection placed on node `i` (counted from now).
    fn on(nodes: &Arc<Nodes>, i: usize) -> Self {
        nodes.list[i].placed.fetch_add(1, Ordering::AcqRel);
        Self {
            nodes: Arc::clone(nodes),
            node: i,
        }
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        self.nodes.list[self.node]
            .placed
            .fetch_sub(1, Ordering::AcqRel);
    }
}

impl Placement for Placed {
    fn lost(&self) {
        self.nodes.failed(self.node, "a connection to it was lost");
    }

    fn should_move(&self) -> bool {
        self.nodes.should_leave(self.node)
    }

    fn slot(&self) -> Option<usize> {
        let slot = self.nodes.list[self.node].slot.load(Ordering::Acquire);
        (slot != NO_SLOT).then_some(slot)
    }
}

/// A copy of `err` (diesel's `ConnectionError` is not `Clone`).
fn clone_connection_error(err: &ConnectionError) -> ConnectionError {
    match err {
        ConnectionError::InvalidCString(_) | ConnectionError::BadConnection(_) => {
            ConnectionError::BadConnection(err.to_string())
        }
        ConnectionError::InvalidConnectionUrl(url) => {
            ConnectionError::InvalidConnectionUrl(url.clone())
        }
        other => ConnectionError::BadConnection(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize, in_order: bool) -> Arc<Nodes> {
        let urls: Vec<String> = (0..n).map(|i| format!("mysql://root@h{i}:1/db")).collect();
        Nodes::new(&urls, in_order, Duration::from_secs(5), 7)
    }

    #[test]
    fn spread_connections_fill_the_emptiest_node_first_in_the_order_listed() {
        let nodes = nodes(3, false);
        let mut held = Vec::new();
        let mut order = Vec::new();
        for _ in 0..7 {
            let i = nodes.candidates()[0];
            order.push(i);
            held.push(Placed::on(&nodes, i));
        }
        assert_eq!(order, [0, 1, 2, 0, 1, 2, 0]);
        assert_eq!(nodes.spread_now(), [3, 2, 2]);
        drop(held.remove(1)); // one on node 1 closes
        assert_eq!(nodes.candidates(), [1, 2, 0]);
        drop(held);
        assert_eq!(nodes.spread_now(), [0, 0, 0], "counted while they live");
    }

    #[test]
    fn in_order_keeps_to_the_first_node_that_answers() {
        let nodes = nodes(3, true);
        let _a = Placed::on(&nodes, 0);
        let _b = Placed::on(&nodes, 0);
        assert_eq!(nodes.candidates(), [0, 1, 2]);
        nodes.failed(0, "refused");
        assert_eq!(nodes.candidates(), [1, 2, 0], "a failed node is tried last");
        let on_one = Placed::on(&nodes, 1);
        assert!(!on_one.should_move(), "nothing before it answers");
        nodes.answered(0);
        assert!(on_one.should_move(), "the first node is back");
        assert!(!Placed::on(&nodes, 0).should_move());
    }

    #[test]
    fn a_failed_node_is_skipped_longer_each_time_then_tried_again() {
        let nodes = nodes(2, false);
        nodes.failed(0, "refused");
        assert_eq!(nodes.candidates(), [1, 0]);
        let first = nodes.list[0].skip_until.load(Ordering::Acquire);
        nodes.failed(0, "refused again");
        let second = nodes.list[0].skip_until.load(Ordering::Acquire);
        assert!(second > first, "a longer skip");
        assert!(second <= nodes.stamp(Instant::now() + LONGEST_SKIP));
        // Its time up, it is a candidate again (and the emptiest).
        nodes.list[0].skip_until.store(1, Ordering::Release);
        assert_eq!(nodes.candidates(), [0, 1]);
        assert_eq!(nodes.tried(), ["h0:1 (refused again)", "h1:1"]);
        nodes.answered(0);
        assert_eq!(nodes.list[0].failures.load(Ordering::Acquire), 0);
    }

    #[test]
    fn spread_connections_move_to_a_node_with_two_fewer() {
        let nodes = nodes(3, false);
        let on_zero: Vec<Placed> = (0..3).map(|_| Placed::on(&nodes, 0)).collect();
        let on_one = Placed::on(&nodes, 1);
        let _on_two = Placed::on(&nodes, 2);
        // 3, 1, 1: node 0 holds two more than node 1.
        assert!(on_zero[0].should_move());
        assert!(!on_one.should_move());
        drop(on_zero);
        // 0, 1, 1: a connection on node 1 does not move for one.
        assert!(!on_one.should_move());
        // A lost connection makes its node skipped: its others move.
        let other = Placed::on(&nodes, 1);
        on_one.lost();
        assert!(other.should_move());
        let alone = self::nodes(1, false);
        let only = Placed::on(&alone, 0);
        only.lost();
        assert!(!only.should_move(), "one node: nowhere to move");
    }
}
