//! The backends xtask drives, as store-diesel's `Dialect` (its `const ALL`
//! is what `bench` and `test` loop over) with what only xtask needs of each
//! added by [`DialectExt`], and what every command needs of a database URL:
//! its dialect, where its server is, and a database that exists.

use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use flowstate_store_diesel::{DatabaseUrl, Dialect, DieselStore, StoreConfig};

/// The per-dialect facts xtask needs and the store does not have: whether
/// this build has the driver, where the server is, how many workers the
/// bench runs.
pub trait DialectExt: Copy {
    /// Whether this xtask build has the dialect's driver (its feature).
    fn compiled(self) -> bool;

    /// The environment variable holding the server's base URL, and its
    /// default; `None` for SQLite, which has no server.
    fn server_env(self) -> Option<(&'static str, &'static str)>;

    /// The server's base URL: its environment variable, else the default;
    /// `None` for SQLite.
    fn server_url(self) -> Option<String>;

    /// The URL of database `name` on this dialect: a file `target/<name>.db`
    /// for SQLite, database `name` on the server otherwise.
    fn database_url(self, name: &str) -> String;

    /// How many workers the bench runs by default: one writer at a time is
    /// all SQLite takes, so a few; a server takes many.
    fn default_workers(self) -> usize;
}

impl DialectExt for Dialect {
    fn compiled(self) -> bool {
        match self {
            Self::Sqlite => cfg!(feature = "sqlite"),
            Self::Postgres => cfg!(feature = "postgres"),
            Self::Mysql => cfg!(feature = "mysql"),
        }
    }

    fn server_env(self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::Sqlite => None,
            Self::Postgres => Some(("FLOWSTATE_PG_URL", "postgres://postgres@127.0.0.1:5432")),
            Self::Mysql => Some(("FLOWSTATE_MYSQL_URL", "mysql://root@127.0.0.1:3306")),
        }
    }

    fn server_url(self) -> Option<String> {
        let (var, default) = self.server_env()?;
        Some(
            std::env::var(var)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| default.to_owned()),
        )
    }

    fn database_url(self, name: &str) -> String {
        match self.server_url() {
            Some(base) => with_database(&base, name),
            None => format!(
                "sqlite://{}",
                target_dir().join(format!("{name}.db")).display()
            ),
        }
    }

    fn default_workers(self) -> usize {
        match self {
            Self::Sqlite => 4,
            Self::Postgres | Self::Mysql => 32,
        }
    }
}

/// `Dialect::ALL` in the order xtask prints it (the bench's columns):
/// SQLite first, then PostgreSQL, then MySQL.
pub fn in_print_order() -> [Dialect; Dialect::ALL.len()] {
    let mut all = Dialect::ALL;
    all.sort_by_key(|dialect| match dialect {
        Dialect::Sqlite => 0,
        Dialect::Postgres => 1,
        Dialect::Mysql => 2,
    });
    all
}

/// Reads a database URL (its dialect, its driver's form), the error naming
/// the URL.
pub fn parse_url(url: &str) -> Result<DatabaseUrl> {
    DatabaseUrl::parse(url).with_context(|| format!("cannot read database url {url:?}"))
}

/// The workspace's root folder (xtask's parent).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}

/// The workspace's `target/` folder, where xtask's SQLite files live.
pub fn target_dir() -> PathBuf {
    workspace_root().join("target")
}

/// The database URL to use when none was given: `$DATABASE_URL`, else an
/// SQLite file `target/<file>`.
pub fn default_url(file: &str) -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| format!("sqlite://{}", target_dir().join(file).display()))
}

/// Makes sure the database `url` names exists: the SQLite file's folder, or
/// the server database (created if missing). With `fresh`, it starts empty:
/// the SQLite file is removed, the server database dropped and recreated.
pub async fn prepare(url: &str, fresh: bool) -> Result<()> {
    let parsed = parse_url(url)?;
    match parsed.dialect {
        Dialect::Sqlite => {
            let path = Path::new(&parsed.target);
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            if fresh {
                for suffix in ["", "-wal", "-shm", "-journal"] {
                    let file = PathBuf::from(format!("{}{suffix}", path.display()));
                    match std::fs::remove_file(&file) {
                        Ok(()) => {}
                        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                        Err(err) => {
                            return Err(err)
                                .with_context(|| format!("cannot remove {}", file.display()));
                        }
                    }
                }
            }
            Ok(())
        }
        Dialect::Postgres | Dialect::Mysql => {
            let server = ServerUrl::split(url)?;
            let name = server.database.context(
                "a server URL needs a database name, e.g. postgres://postgres@127.0.0.1:5432/flowstate_demo",
            )?;
            create_database(
                parsed.dialect,
                &server.with_database(admin_database(parsed.dialect)),
                name,
                fresh,
            )
            .await
        }
    }
}

/// The database every server has, to connect to while creating another.
const fn admin_database(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Postgres => "postgres",
        _ => "mysql",
    }
}

async fn create_database(dialect: Dialect, admin_url: &str, name: &str, fresh: bool) -> Result<()> {
    if name.is_empty()
        || name.len() > 63
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        bail!("database name {name:?}: use letters, digits and underscores (at most 63)");
    }
    let config = StoreConfig::default().pool_size(1).without_schema_check();
    let admin = DieselStore::open(admin_url, config)
        .await
        .with_context(|| {
            format!("cannot connect to the {dialect} server to create database {name}")
        })?;
    // The name was checked above: letters, digits, underscores only.
    let (drop, create) = match dialect {
        Dialect::Postgres => (
            format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
            format!("CREATE DATABASE \"{name}\""),
        ),
        _ => (
            format!("DROP DATABASE IF EXISTS `{name}`"),
            format!("CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4"),
        ),
    };
    if fresh {
        admin
            .batch_execute(&drop)
            .await
            .with_context(|| format!("cannot drop database {name}"))?;
    }
    match admin.batch_execute(&create).await {
        Ok(()) => Ok(()),
        // PostgreSQL has no CREATE DATABASE IF NOT EXISTS.
        Err(err) if err.to_string().contains("already exists") => Ok(()),
        Err(err) => Err(err).with_context(|| format!("cannot create database {name}")),
    }
}

/// A server URL in parts: `scheme://authority`, the database, the query.
#[derive(Debug, PartialEq, Eq)]
pub struct ServerUrl<'a> {
    /// `scheme://user@host:port`.
    pub prefix: &'a str,
    /// The database named in the path, if any.
    pub database: Option<&'a str>,
    /// The query string, `?` included, or empty.
    pub query: &'a str,
}

impl<'a> ServerUrl<'a> {
    /// Splits `url`.
    pub fn split(url: &'a str) -> Result<Self> {
        let (scheme, rest) = url
            .split_once("://")
            .with_context(|| format!("{url:?} is not a server URL"))?;
        let (before_query, query) = rest.find('?').map_or((rest, ""), |i| rest.split_at(i));
        let (authority, database) = match before_query.split_once('/') {
            Some((authority, db)) => (authority, Some(db).filter(|d| !d.is_empty())),
            None => (before_query, None),
        };
        Ok(Self {
            prefix: &url[..scheme.len() + 3 + authority.len()],
            database,
            query,
        })
    }

    /// The same server and query with database `name`.
    pub fn with_database(&self, name: &str) -> String {
        format!("{}/{name}{}", self.prefix, self.query)
    }

    /// The host and port to reach, with `default_port` if none is given.
    pub fn endpoint(&self, default_port: u16) -> (String, u16) {
        let authority = self
            .prefix
            .split_once("://")
            .map_or(self.prefix, |(_, a)| a);
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
        let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
            // An IPv6 literal: `[::1]:5432`.
            let (host, rest) = bracketed.split_once(']').unwrap_or((bracketed, ""));
            (host, rest.strip_prefix(':'))
        } else {
            match host_port.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (host_port, None),
            }
        };
        let port = port.and_then(|p| p.parse().ok()).unwrap_or(default_port);
        (
            if host.is_empty() { "localhost" } else { host }.to_owned(),
            port,
        )
    }
}

/// `base` (a server URL, with or without a database) with database `name`.
pub fn with_database(base: &str, name: &str) -> String {
    ServerUrl::split(base).map_or_else(|_| format!("{base}/{name}"), |s| s.with_database(name))
}

/// Connects to the server behind `url` over TCP, to tell "not running" from
/// every other failure before anything slow starts.
pub fn reachable(url: &str, default_port: u16) -> Result<()> {
    let (host, port) = ServerUrl::split(url)?.endpoint(default_port);
    let addrs: Vec<_> = (host.as_str(), port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host}"))?
        .collect();
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(3)) {
            Ok(_) => return Ok(()),
            Err(err) => last = Some(err),
        }
    }
    match last {
        Some(err) => Err(err).with_context(|| format!("nothing answers at {host}:{port}")),
        None => bail!("{host} resolves to no address"),
    }
}

/// A URL fit to print: the password, if any, hidden.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((user_info, host)) if user_info.contains(':') => {
            let user = user_info.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}{}", &rest[authority_end..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_urls_split_and_rebuild() {
        let s =
            ServerUrl::split("postgres://postgres@127.0.0.1:5432/flowstate_bench?sslmode=disable")
                .unwrap();
        assert_eq!(s.prefix, "postgres://postgres@127.0.0.1:5432");
        assert_eq!(s.database, Some("flowstate_bench"));
        assert_eq!(
            s.with_database("postgres"),
            "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
        );
        assert_eq!(s.endpoint(1), ("127.0.0.1".to_owned(), 5432));

        let s = ServerUrl::split("mysql://root:pw@db.local").unwrap();
        assert_eq!((s.database, s.query), (None, ""));
        assert_eq!(s.endpoint(3306), ("db.local".to_owned(), 3306));
        assert_eq!(
            ServerUrl::split("mysql://root@[::1]:3307/")
                .unwrap()
                .endpoint(1),
            ("::1".to_owned(), 3307)
        );

        assert_eq!(
            with_database("mysql://root@127.0.0.1:3306", "x"),
            "mysql://root@127.0.0.1:3306/x"
        );
        assert_eq!(
            with_database("mysql://root@127.0.0.1:3306/old", "x"),
            "mysql://root@127.0.0.1:3306/x"
        );
    }

    #[test]
    fn passwords_are_never_printed() {
        assert_eq!(
            redact("postgres://u:secret@h:1/db"),
            "postgres://u:***@h:1/db"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("sqlite://target/x.db"), "sqlite://target/x.db");
    }

    #[test]
    fn every_dialect_has_a_url_and_servers_a_base() {
        for dialect in Dialect::ALL {
            let url = dialect.database_url("flowstate_bench");
            assert_eq!(parse_url(&url).unwrap().dialect, dialect, "{url}");
            assert_eq!(dialect.server_env().is_some(), dialect != Dialect::Sqlite);
        }
        assert_eq!(
            Dialect::Sqlite.database_url("x"),
            format!("sqlite://{}", target_dir().join("x.db").display())
        );
        assert_eq!(
            (
                Dialect::Sqlite.default_workers(),
                Dialect::Postgres.default_workers(),
                Dialect::Mysql.default_workers()
            ),
            (4, 32, 32)
        );
        assert!(parse_url("oracle://h/db").is_err());
    }

    #[test]
    fn dialects_print_sqlite_first_as_they_always_have() {
        assert_eq!(
            in_print_order(),
            [Dialect::Sqlite, Dialect::Postgres, Dialect::Mysql]
        );
    }
}
