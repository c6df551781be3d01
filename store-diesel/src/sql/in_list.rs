//! Batch statements over a listed set of steps (`id IN (?, ...)`), for the
//! dialects that bind no arrays (MySQL and SQLite): the guarded move of
//! listed steps to one status, each with its own payload, and the history
//! upsert of listed steps, with the binding of each written once for both
//! backends.
//!
//! The lists vary with the batch, so these statements are built per call
//! and bound one value at a time ([`BoxedSqlQuery`]). A batch is cut into
//! chunks of at most [`MAX_LISTED`] steps, inside the caller's one
//! transaction, so no statement comes near a placeholder limit (SQLite's
//! 32,766, MySQL's 65,535), however many completions a caller hands in.

use diesel::backend::Backend;
use diesel::query_builder::{BoxedSqlQuery, SqlQuery};
use diesel::serialize::ToSql;
use diesel::sql_types::{BigInt, HasSqlType, Text};

use flowstate_core::HistoryId;

use crate::rows::BatchItem;
use crate::schema::{Json, JsonText};
#[cfg(feature = "mysql")]
use crate::sql::claim_set;
use crate::sql::{Deadline, HistorySource, MoveBinds, StepMove, Upsert, stamp_column};

/// The most steps one listed statement names.
pub(crate) const MAX_LISTED: usize = 500;

/// A boxed raw query on backend `DB`.
pub(crate) type Listed<'f, DB> = BoxedSqlQuery<'f, DB, SqlQuery>;

/// `?, ?, ...`, `n` of them.
fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// `CASE {column} WHEN ? THEN ? ... END`, `n` arms: a value per listed step.
fn per_step(column: &str, n: usize) -> String {
    format!("CASE {column} {}END", "WHEN ? THEN ? ".repeat(n))
}

/// The guarded move of `n` listed steps to `step_move`'s status (a
/// completion: never to running), each with its own payload and, when the
/// move is fenced, its own attempt. Binds ([`bind_move`]): now,
/// `(id, payload)` for each, the `n` ids, then `(id, attempt)` for each
/// when fenced.
fn move_sql(step_move: &StepMove, n: usize) -> String {
    let per_item = per_step("id", n);
    let unused = Deadline {
        now_us: "",
        offset: "",
        default_us: "",
    };
    step_move.update_where(
        MoveBinds {
            now: "?",
            payload: &per_item,
            deadline: unused,
            attempt: &per_item,
        },
        "",
        &format!("id IN ({})", placeholders(n)),
    )
}

/// Binds [`move_sql`] for `items`.
fn bind_move<'f, DB>(
    mut query: Listed<'f, DB>,
    step_move: &StepMove,
    now: i64,
    items: &[&BatchItem],
) -> Listed<'f, DB>
where
    DB: Backend + HasSqlType<Text> + HasSqlType<BigInt> + HasSqlType<Json>,
    String: ToSql<Text, DB>,
    i64: ToSql<BigInt, DB>,
    JsonText: ToSql<Json, DB>,
{
    query = query.bind::<BigInt, _>(now);
    for item in items {
        query = query
            .bind::<Text, _>(item.id.to_string())
            .bind::<Json, _>(JsonText(item.payload.clone()));
    }
    for item in items {
        query = query.bind::<Text, _>(item.id.to_string());
    }
    if step_move.fenced {
        for item in items {
            query = query
                .bind::<Text, _>(item.id.to_string())
                .bind::<BigInt, _>(i64::from(item.attempt));
        }
    }
    query
}

/// The history upsert of a move of `n` listed steps to `step_move`'s
/// status, read from the rows just written. Binds ([`bind_history`]):
/// `(id, fresh history id)` for each, now (twice when the move stamps a
/// column), then the `n` ids.
fn history_sql(step_move: &StepMove, n: usize, upsert: Upsert) -> String {
    step_move.history_upsert(
        HistorySource {
            from: &format!(
                "FROM flowstate_steps AS m WHERE m.id IN ({})",
                placeholders(n)
            ),
            prefix: "m.",
            id: &per_step("m.id", n),
            now: "?",
        },
        upsert,
    )
}

/// Binds [`history_sql`] for the steps `ids`, each given a fresh history id.
fn bind_history<'f, DB>(
    mut query: Listed<'f, DB>,
    step_move: &StepMove,
    ids: &[String],
    now: i64,
) -> Listed<'f, DB>
where
    DB: Backend + HasSqlType<Text> + HasSqlType<BigInt>,
    String: ToSql<Text, DB>,
    i64: ToSql<BigInt, DB>,
{
    for id in ids {
        query = query
            .bind::<Text, _>(id.clone())
            .bind::<Text, _>(HistoryId::generate().to_string());
    }
    query = query.bind::<BigInt, _>(now);
    if stamp_column(step_move.to).is_some() {
        query = query.bind::<BigInt, _>(now);
    }
    for id in ids {
        query = query.bind::<Text, _>(id.clone());
    }
    query
}

/// The guarded move of `items` (at most [`MAX_LISTED`]) to `step_move`'s
/// status, bound; `suffix` follows it (SQLite's ` RETURNING id`, or empty).
pub(crate) fn move_query<'f, DB>(
    step_move: &StepMove,
    now: i64,
    items: &[&BatchItem],
    suffix: &str,
) -> Listed<'f, DB>
where
    DB: Backend + HasSqlType<Text> + HasSqlType<BigInt> + HasSqlType<Json>,
    String: ToSql<Text, DB>,
    i64: ToSql<BigInt, DB>,
    JsonText: ToSql<Json, DB>,
{
    let sql = format!("{}{suffix}", move_sql(step_move, items.len()));
    bind_move(diesel::sql_query(sql).into_boxed(), step_move, now, items)
}

/// The history upsert of the move of `ids` (at most [`MAX_LISTED`]) to
/// `step_move`'s status just written, bound.
pub(crate) fn history_query<'f, DB>(
    step_move: &StepMove,
    ids: &[String],
    now: i64,
    upsert: Upsert,
) -> Listed<'f, DB>
where
    DB: Backend + HasSqlType<Text> + HasSqlType<BigInt>,
    String: ToSql<Text, DB>,
    i64: ToSql<BigInt, DB>,
{
    let sql = history_sql(step_move, ids.len(), upsert);
    bind_history(diesel::sql_query(sql).into_boxed(), step_move, ids, now)
}

/// The claim's assignments ([`claim_set`]) on the picked steps `ids` (at
/// most [`MAX_LISTED`]), bound: MySQL's batch claim, which picks first and
/// reads the lease clock's now with its pick (`lease_now`, offset added),
/// so the deadlines it sets are the ones it answers.
#[cfg(feature = "mysql")]
pub(crate) fn claim_query<'f, DB>(
    ids: &[String],
    now: i64,
    lease_now: i64,
    default_us: i64,
) -> Listed<'f, DB>
where
    DB: Backend + HasSqlType<Text> + HasSqlType<BigInt>,
    String: ToSql<Text, DB>,
    i64: ToSql<BigInt, DB>,
{
    let deadline = Deadline {
        now_us: "?",
        offset: "0",
        default_us: "?",
    };
    let sql = format!(
        "UPDATE flowstate_steps SET {} WHERE id IN ({})",
        claim_set("?", deadline),
        placeholders(ids.len())
    );
    let mut query = diesel::sql_query(sql)
        .into_boxed()
        .bind::<BigInt, _>(now)
        .bind::<BigInt, _>(lease_now)
        .bind::<BigInt, _>(default_us);
    for id in ids {
        query = query.bind::<Text, _>(id.clone());
    }
    query
}

#[cfg(test)]
mod tests {
    use flowstate_core::StepStatus;

    use super::*;
    use crate::sql::{Move, claim_move};

    #[test]
    fn listed_statements_name_each_step_once_per_list() {
        let moved = move_sql(&StepMove::transition(StepStatus::Succeeded), 2);
        assert!(moved.contains("result = CASE id WHEN ? THEN ? WHEN ? THEN ? END"));
        assert!(moved.ends_with("WHERE id IN (?, ?) AND status IN ('running')"));
        let fenced = move_sql(&StepMove::of(Move::Claimed(StepStatus::Failed)), 2);
        assert!(fenced.ends_with(
            "WHERE id IN (?, ?) AND status IN ('running') \
             AND current_attempt = CASE id WHEN ? THEN ? WHEN ? THEN ? END"
        ));
        let history = history_sql(&claim_move(), 2, Upsert::OnDuplicateKey);
        assert!(history.contains("SELECT CASE m.id WHEN ? THEN ? WHEN ? THEN ? END, m.id"));
        assert!(history.contains("WHERE m.id IN (?, ?) ON DUPLICATE KEY UPDATE"));
    }
}
