//! Fragments of fixed SQL text that a connection may prepare once:
//! [`BoundSql`] (text around bound `BIGINT`s: the lease clock plus an
//! offset, a condition around it) and [`LiteralIn`] (a column against a
//! fixed list of status literals).
//!
//! diesel's own forms for these mark every statement that holds them
//! unsafe to cache: its `sql()` literal always (its text could be
//! anything), and `eq_any` of a list wherever it renders `IN (?, ...)`
//! (MySQL, SQLite: the text follows the list's length). diesel-async then
//! prepares such a statement on every call: PostgreSQL parses and plans it
//! each time, MySQL prepares, executes and closes it. These fragments are
//! built only from the lease clock's SQL, column names and status literals
//! from core's enums, with every value bound, so the text depends on the
//! statement's shape alone: each declares no static query id, so the cache
//! keys it by that text, and the cache stays bounded.

use std::borrow::Cow;
use std::marker::PhantomData;

use diesel::QueryResult;
use diesel::backend::Backend;
use diesel::expression::{
    AppearsOnTable, Expression, SelectableExpression, TypedExpressionType, ValidGrouping,
    is_aggregate,
};
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::serialize::ToSql;
use diesel::sql_types::{BigInt, Bool, HasSqlType};

/// One piece of a [`BoundSql`].
#[derive(Debug, Clone)]
enum Piece {
    /// SQL text, spliced as is.
    Text(Cow<'static, str>),
    /// A `BIGINT` value, bound.
    Bind(i64),
}

/// SQL text with bound `BIGINT`s in it, as an expression of type `ST`:
/// diesel's `sql()` literal, without its mark against caching. Build it
/// only from fixed text (no value spliced), so the statements holding it
/// are a bounded set.
#[derive(Debug, Clone)]
pub(crate) struct BoundSql<ST> {
    /// The text and the binds, in order.
    pieces: Vec<Piece>,
    /// The expression's SQL type.
    sql_type: PhantomData<ST>,
}

impl<ST> BoundSql<ST> {
    /// `text`, with no bind yet.
    pub(crate) fn text(text: impl Into<Cow<'static, str>>) -> Self {
        Self {
            pieces: vec![Piece::Text(text.into())],
            sql_type: PhantomData,
        }
    }

    /// This, then `text`.
    pub(crate) fn sql(mut self, text: impl Into<Cow<'static, str>>) -> Self {
        self.pieces.push(Piece::Text(text.into()));
        self
    }

    /// This, then `value` bound as a `BIGINT`.
    pub(crate) fn bind(mut self, value: i64) -> Self {
        self.pieces.push(Piece::Bind(value));
        self
    }
}

impl<ST: TypedExpressionType> Expression for BoundSql<ST> {
    type SqlType = ST;
}

impl<ST, DB> QueryFragment<DB> for BoundSql<ST>
where
    DB: Backend + HasSqlType<BigInt>,
    i64: ToSql<BigInt, DB>,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_sql(text),
                Piece::Bind(value) => out.push_bind_param::<BigInt, i64>(value)?,
            }
        }
        Ok(())
    }
}

impl<ST> QueryId for BoundSql<ST> {
    // No static id: the statement cache keys it by its SQL text.
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<QS, ST> SelectableExpression<QS> for BoundSql<ST> where Self: Expression {}

impl<QS, ST> AppearsOnTable<QS> for BoundSql<ST> where Self: Expression {}

impl<ST, GB> ValidGrouping<GB> for BoundSql<ST> {
    type IsAggregate = is_aggregate::Never;
}

/// `column IN ('a', 'b', ...)` over fixed literals (status names from
/// core's enums), or `1 = 0` for none: `eq_any` for a list that is the same
/// on every call, as text every dialect may cache.
#[derive(Debug, Clone)]
pub(crate) struct LiteralIn<C> {
    /// The column compared.
    column: C,
    /// `IN ('a', 'b')`, or `None` when the list is empty.
    list: Option<String>,
}

/// `column` is one of `values`, each spliced as a quoted literal
/// ([`crate::sql::literal_list`]): only fixed names (core's status
/// strings) may be passed, never input.
pub(crate) fn literal_in<C>(column: C, values: &[&'static str]) -> LiteralIn<C> {
    let list = crate::sql::literal_list(values).map(|list| format!(" IN {list}"));
    LiteralIn { column, list }
}

impl<C> Expression for LiteralIn<C> {
    type SqlType = Bool;
}

impl<C, DB> QueryFragment<DB> for LiteralIn<C>
where
    DB: Backend,
    C: QueryFragment<DB>,
{
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        match &self.list {
            Some(list) => {
                self.column.walk_ast(out.reborrow())?;
                out.push_sql(list);
            }
            None => out.push_sql("1 = 0"),
        }
        Ok(())
    }
}

impl<C> QueryId for LiteralIn<C> {
    // No static id: the list is in the text, which keys the cache.
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<QS, C: SelectableExpression<QS>> SelectableExpression<QS> for LiteralIn<C> where
    Self: AppearsOnTable<QS>
{
}

impl<QS, C: AppearsOnTable<QS>> AppearsOnTable<QS> for LiteralIn<C> {}

impl<C: ValidGrouping<GB>, GB> ValidGrouping<GB> for LiteralIn<C> {
    type IsAggregate = C::IsAggregate;
}
