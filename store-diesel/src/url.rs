//! Reading a database URL: which dialect it names and the form its driver
//! wants.

use crate::database::Dialect;
use crate::open_error::{Error, Result};

/// A database URL read: its dialect and what to hand the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseUrl {
    /// The dialect it names.
    pub dialect: Dialect,
    /// The URL (or, for SQLite, the file path) as the driver wants it.
    pub target: String,
    /// Whether a PostgreSQL URL said `?pool_mode=transaction`: the server
    /// is reached through a transaction-mode pooler (see
    /// [`StoreConfig::transaction_pooler`](crate::StoreConfig::transaction_pooler));
    /// the parameter is not in [`DatabaseUrl::target`].
    pub transaction_pooler: bool,
    /// MySQL and MariaDB: the URL of each node the URL lists, in its order
    /// (one for a URL of one host); empty for the other dialects. A URL
    /// may list several nodes of one cluster (MariaDB Galera) as
    /// PostgreSQL's multi-host URLs do:
    /// `mysql://user@db1:3306,db2:3306,db3:3306/app`, each node with the
    /// same user, database and parameters. A store spreads its connections
    /// over them and moves off a node that fails (see
    /// [`DatabaseUrl::nodes_in_order`]); [`DatabaseUrl::target`] is then
    /// the first node's URL.
    pub nodes: Vec<String>,
    /// Whether a MySQL URL with several nodes said
    /// `?load_balance_hosts=disable` (libpq's word): every connection goes
    /// to the first node listed that answers, the others only while it is
    /// down (a failover list). Otherwise (`load_balance_hosts=balance`, the
    /// default) connections are spread over the nodes that answer, the
    /// fewest on each first. The parameter is not in the node URLs.
    pub nodes_in_order: bool,
}

impl DatabaseUrl {
    /// Reads `url`: `postgres://` or `postgresql://` (several hosts,
    /// `postgres://a:5432,b:5432/db?target_session_attrs=read-write`, are
    /// the driver's to try in turn; `pool_mode=transaction` is read here);
    /// `mysql://` or
    /// `mariadb://`; `sqlite://path`, `sqlite:path` or a plain file path.
    pub fn parse(url: &str) -> Result<Self> {
        let mut transaction_pooler = false;
        let mut nodes = Vec::new();
        let mut nodes_in_order = false;
        let (dialect, target) =
            if url.starts_with("postgres://") || url.starts_with("postgresql://") {
                let (target, pooled) =
                    take_pool_mode(url).map_err(|reason| unsupported(url, reason))?;
                transaction_pooler = pooled;
                (Dialect::Postgres, target)
            } else if let Some(rest) = url
                .strip_prefix("mysql://")
                .or_else(|| url.strip_prefix("mariadb://"))
            {
                let listed = mysql_nodes(rest).map_err(|reason| unsupported(url, reason))?;
                nodes = listed.urls;
                nodes_in_order = listed.in_order;
                (Dialect::Mysql, nodes[0].clone())
            } else if let Some(path) = url
                .strip_prefix("sqlite://")
                .or_else(|| url.strip_prefix("sqlite:"))
            {
                (Dialect::Sqlite, path.to_owned())
            } else if url.contains("://") {
                return Err(unsupported(
                    url,
                    "unknown scheme: use postgres://, mysql://, mariadb:// or sqlite://",
                ));
            } else {
                (Dialect::Sqlite, url.to_owned())
            };
        if target.is_empty() || (dialect == Dialect::Sqlite && target.trim().is_empty()) {
            return Err(unsupported(url, "empty database path"));
        }
        Ok(Self {
            dialect,
            target,
            transaction_pooler,
            nodes,
            nodes_in_order,
        })
    }
}

/// The URL parameter that says how a MySQL store uses the nodes its URL
/// lists (libpq's name): `disable` keeps to the first that answers.
const LOAD_BALANCE: &str = "load_balance_hosts";

/// The nodes a MySQL URL lists, read by [`mysql_nodes`].
#[derive(Debug, PartialEq, Eq)]
struct MysqlNodes {
    /// One `mysql://` URL per node, in the order listed.
    urls: Vec<String>,
    /// `load_balance_hosts=disable`.
    in_order: bool,
}

/// Reads what follows `mysql://` (or `mariadb://`):
/// `[user[:password]@]host[:port][,host[:port]...][/database][?params]`,
/// into one `mysql://` URL per host with the same user, database and
/// parameters (`load_balance_hosts` taken out). A URL of one host is
/// answered as given.
fn mysql_nodes(rest: &str) -> Result<MysqlNodes, &'static str> {
    let (before_query, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let (authority, path) = match before_query.find('/') {
        Some(at) => before_query.split_at(at),
        None => (before_query, ""),
    };
    let (user, hosts) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    let mut in_order = false;
    let mut took = false;
    let mut kept = Vec::new();
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        match pair.split_once('=') {
            Some((LOAD_BALANCE, "disable")) => (in_order, took) = (true, true),
            Some((LOAD_BALANCE, "balance")) => took = true,
            Some((LOAD_BALANCE, _)) => {
                return Err("load_balance_hosts takes `balance` or `disable`");
            }
            _ => kept.push(pair),
        }
    }
    let query = if kept.is_empty() {
        String::new()
    } else {
        format!("?{}", kept.join("&"))
    };
    let hosts: Vec<&str> = hosts.split(',').collect();
    if hosts.iter().any(|host| host.trim().is_empty()) {
        return Err("an empty host in the list of nodes");
    }
    if hosts.len() == 1 && !took {
        // One host and nothing taken out: the URL as given.
        return Ok(MysqlNodes {
            urls: vec![format!("mysql://{rest}")],
            in_order,
        });
    }
    Ok(MysqlNodes {
        urls: hosts
            .iter()
            .map(|host| format!("mysql://{user}{host}{path}{query}"))
            .collect(),
        in_order,
    })
}

/// Where a node URL (one of [`DatabaseUrl::nodes`]) points, as logs and
/// errors print it: `host:port` (the port as written, if any), never the
/// user or password.
pub(crate) fn node_address(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..end];
    authority
        .rfind('@')
        .map_or(authority, |at| &authority[at + 1..])
}

/// The URL parameter that turns the switch on (`?pool_mode=transaction`,
/// PgBouncer's own words); taken out of the URL before the driver sees it.
const URL_PARAMETER: &str = "pool_mode";

/// Reads the switch out of `url`: the URL without a `pool_mode` parameter,
/// and whether it said `transaction`. Any other value is an error.
fn take_pool_mode(url: &str) -> Result<(String, bool), &'static str> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), false));
    };
    let mut pooled = false;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some((URL_PARAMETER, "transaction")) => pooled = true,
            Some((URL_PARAMETER, "session")) => {}
            Some((URL_PARAMETER, _)) => {
                return Err("pool_mode takes `transaction` or `session`");
            }
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((url, pooled))
}

fn unsupported(url: &str, reason: &'static str) -> Error {
    let shown = url
        .split_once("://")
        .map_or_else(|| url.to_owned(), |(scheme, _)| format!("{scheme}://..."));
    Error::UnsupportedUrl { url: shown, reason }
}

/// Whether an SQLite target (a [`DatabaseUrl::target`]) names an in-memory
/// database rather than a file.
pub(crate) fn is_sqlite_memory(target: &str) -> bool {
    target == ":memory:" || target.starts_with("file::memory:") || target.contains("mode=memory")
}

#[cfg(feature = "sqlite")]
/// Creates the directory an SQLite target (a [`DatabaseUrl::target`])
/// puts its file in, if it is missing.
pub(crate) fn create_parent_dir(url: &str) -> crate::Result<()> {
    if url.starts_with("file:") {
        return Ok(()); // a URI filename: SQLite reads it, not us
    }
    match std::path::Path::new(url).parent() {
        Some(dir) if !dir.as_os_str().is_empty() => {
            std::fs::create_dir_all(dir).map_err(|err| crate::Error::Connect {
                dialect: Dialect::Sqlite,
                source: Box::new(err),
            })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, dialect: Dialect, target: &str) {
        let parsed = DatabaseUrl::parse(url).unwrap();
        assert_eq!(
            (parsed.dialect, parsed.target.as_str()),
            (dialect, target),
            "{url}"
        );
    }

    #[test]
    fn url_table() {
        check("postgres://u@h/db", Dialect::Postgres, "postgres://u@h/db");
        check(
            "postgresql://u@h/db",
            Dialect::Postgres,
            "postgresql://u@h/db",
        );
        check("mysql://root@h/db", Dialect::Mysql, "mysql://root@h/db");
        check("mariadb://root@h/db", Dialect::Mysql, "mysql://root@h/db");
        check("sqlite://target/demo.db", Dialect::Sqlite, "target/demo.db");
        check("sqlite:demo.db", Dialect::Sqlite, "demo.db");
        check("/tmp/x.sqlite", Dialect::Sqlite, "/tmp/x.sqlite");
    }

    #[test]
    fn the_switch_is_read_out_of_the_url() {
        assert_eq!(
            take_pool_mode("postgres://u@h/db?pool_mode=transaction"),
            Ok((String::from("postgres://u@h/db"), true))
        );
        assert_eq!(
            take_pool_mode(
                "postgres://a:1,b:2/db?pool_mode=transaction&target_session_attrs=read-write"
            ),
            Ok((
                String::from("postgres://a:1,b:2/db?target_session_attrs=read-write"),
                true
            ))
        );
        assert_eq!(
            take_pool_mode("postgres://u@h/db?connect_timeout=2"),
            Ok((String::from("postgres://u@h/db?connect_timeout=2"), false))
        );
        assert!(take_pool_mode("postgres://u@h/db?pool_mode=statement").is_err());
    }

    #[test]
    fn bad_urls_are_typed_errors_without_secrets() {
        let err = DatabaseUrl::parse("oracle://scott:tiger@h/db").unwrap_err();
        assert!(matches!(err, Error::UnsupportedUrl { .. }));
        assert!(!err.to_string().contains("tiger"));
        assert!(DatabaseUrl::parse("sqlite://").is_err());
        assert!(DatabaseUrl::parse("").is_err());
    }

    #[test]
    fn mysql_urls_list_nodes_as_postgres_lists_hosts() {
        // (url, nodes, in order)
        let table: &[(&str, &[&str], bool)] = &[
            ("mysql://root@h/db", &["mysql://root@h/db"], false),
            (
                "mariadb://root@h:3307/db",
                &["mysql://root@h:3307/db"],
                false,
            ),
            (
                "mysql://root@127.0.0.1:3307,127.0.0.1:3308,127.0.0.1:3309/fs",
                &[
                    "mysql://root@127.0.0.1:3307/fs",
                    "mysql://root@127.0.0.1:3308/fs",
                    "mysql://root@127.0.0.1:3309/fs",
                ],
                false,
            ),
            (
                "mariadb://u:p%40ss@a,b:3310/fs?prefer_socket=false&load_balance_hosts=disable",
                &[
                    "mysql://u:p%40ss@a/fs?prefer_socket=false",
                    "mysql://u:p%40ss@b:3310/fs?prefer_socket=false",
                ],
                true,
            ),
            (
                "mysql://a:1,b:2?load_balance_hosts=balance",
                &["mysql://a:1", "mysql://b:2"],
                false,
            ),
            (
                "mysql://root@h/db?load_balance_hosts=disable",
                &["mysql://root@h/db"],
                true,
            ),
        ];
        for (url, nodes, in_order) in table {
            let parsed = DatabaseUrl::parse(url).unwrap();
            assert_eq!(parsed.dialect, Dialect::Mysql, "{url}");
            assert_eq!(parsed.nodes, *nodes, "{url}");
            assert_eq!(
                parsed.target, nodes[0],
                "{url}: the target is the first node"
            );
            assert_eq!(parsed.nodes_in_order, *in_order, "{url}");
        }
        for bad in [
            "mysql://root@a,,b/db",
            "mysql://root@a,/db",
            "mysql://a,b/db?load_balance_hosts=random",
        ] {
            let err = DatabaseUrl::parse(bad).unwrap_err();
            assert!(matches!(err, Error::UnsupportedUrl { .. }), "{bad}");
        }
        let postgres = DatabaseUrl::parse("postgres://u@a:1,b:2/db").unwrap();
        assert!(postgres.nodes.is_empty() && !postgres.nodes_in_order);
    }

    #[test]
    fn a_node_is_shown_by_its_address_only() {
        assert_eq!(
            node_address("mysql://u:secret@127.0.0.1:3307/fs?x=1"),
            "127.0.0.1:3307"
        );
        assert_eq!(node_address("mysql://h"), "h");
        assert_eq!(node_address("mysql://u@[::1]:3306/db"), "[::1]:3306");
    }
}
