//! [`Sql`]: raw SQL text with bound parameters, like `diesel::sql_query`,
//! that each connection prepares ONCE and keeps in its statement cache.
//!
//! `sql_query` marks itself unsafe to cache (its text may be anything), so
//! SQLite would parse and plan every statement on every call. Ours are a
//! small fixed set (the texts in `sql.rs`, plus the few filter combinations
//! of `list_runs`), so caching them by text is safe, and it takes the parse
//! out of every claim and transition. Binds stay binds: the text never holds
//! a user value.

use std::borrow::Cow;
use std::marker::PhantomData;

use diesel::QueryResult;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::serialize::ToSql;
use diesel::sql_types::{HasSqlType, Untyped};
use diesel::sqlite::{Sqlite, SqliteConnection};

/// A statement: SQL text with `?N` placeholders and the values bound to
/// them, in order. Load it into a `QueryableByName` row or execute it with
/// diesel's `RunQueryDsl`.
pub struct Sql<'a> {
    text: Cow<'static, str>,
    binds: Vec<Box<dyn QueryFragment<Sqlite> + Send + 'a>>,
}

impl<'a> Sql<'a> {
    /// A statement with no binds yet.
    pub fn new(text: impl Into<Cow<'static, str>>) -> Self {
        Self {
            text: text.into(),
            binds: Vec::new(),
        }
    }

    /// Binds `value` as SQL type `ST` to the next placeholder.
    #[must_use]
    pub fn bind<ST, T>(mut self, value: T) -> Self
    where
        ST: 'static,
        T: ToSql<ST, Sqlite> + Send + 'a,
        Sqlite: HasSqlType<ST>,
    {
        self.binds.push(Box::new(Value::<ST, T> {
            value,
            sql_type: PhantomData,
        }));
        self
    }

    /// Appends `text` to the statement (for `list_runs`' optional filters).
    #[must_use]
    pub fn push(mut self, text: &str) -> Self {
        self.text.to_mut().push_str(text);
        self
    }
}

impl QueryFragment<Sqlite> for Sql<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        // No `unsafe_to_cache_prepared`: the connection caches by text.
        out.push_sql(&self.text);
        for bind in &self.binds {
            bind.walk_ast(out.reborrow())?;
        }
        Ok(())
    }
}

impl QueryId for Sql<'_> {
    type QueryId = ();
    // No static id: the cache keys on the SQL text and the bind types.
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl Query for Sql<'_> {
    type SqlType = Untyped;
}

impl diesel::RunQueryDsl<SqliteConnection> for Sql<'_> {}

/// One bound value; its placeholder is already in the text.
struct Value<ST, T> {
    value: T,
    sql_type: PhantomData<fn() -> ST>,
}

impl<ST, T> QueryFragment<Sqlite> for Value<ST, T>
where
    T: ToSql<ST, Sqlite>,
    Sqlite: HasSqlType<ST>,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        out.push_bind_param_value_only::<ST, T>(&self.value)
    }
}
