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
}

impl DatabaseUrl {
    /// Reads `url`: `postgres://` or `postgresql://` (several hosts,
    /// `postgres://a:5432,b:5432/db?target_session_attrs=read-write`, are
    /// the driver's to try in turn; `pool_mode=transaction` is read here);
    /// `mysql://` or
    /// `mariadb://`; `sqlite://path`, `sqlite:path` or a plain file path.
    pub fn parse(url: &str) -> Result<Self> {
        let mut transaction_pooler = false;
        let (dialect, target) =
            if url.starts_with("postgres://") || url.starts_with("postgresql://") {
                let (target, pooled) =
                    take_pool_mode(url).map_err(|reason| unsupported(url, reason))?;
                transaction_pooler = pooled;
                (Dialect::Postgres, target)
            } else if url.starts_with("mysql://") {
                (Dialect::Mysql, url.to_owned())
            } else if let Some(rest) = url.strip_prefix("mariadb://") {
                (Dialect::Mysql, format!("mysql://{rest}"))
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
        })
    }
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
}
