//! [`Dialect`]: which database a store talks to, the one fact every other
//! module may name (the open errors carry it, the URL reader answers it).

/// The SQL dialects this crate speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// PostgreSQL, through `AsyncPgConnection`.
    Postgres,
    /// MySQL 8 or MariaDB 10.6+, through `AsyncMysqlConnection`.
    Mysql,
    /// An embedded SQLite file, through `SyncConnectionWrapper<SqliteConnection>`.
    Sqlite,
}

impl Dialect {
    /// Every dialect, for loops over backends (tests, bench).
    pub const ALL: [Self; 3] = [Self::Postgres, Self::Mysql, Self::Sqlite];

    /// The dialect's name as printed.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Postgres => "postgres",
            Self::Mysql => "mysql",
            Self::Sqlite => "sqlite",
        }
    }
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
