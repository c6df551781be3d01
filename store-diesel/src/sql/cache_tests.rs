//! The typed fragments of the lease paths leave a statement the statement
//! cache may keep, on every dialect: diesel-async prepares a statement
//! marked unsafe to cache on every call (see `bound.rs`), which no
//! statement count shows. Each is asked here what diesel and diesel-async
//! ask; the statements as sent are checked on the servers themselves
//! (`tests/postgres/prepared.rs`, `tests/mysql/prepared.rs`).

use diesel::backend::Backend;
use diesel::prelude::*;
use diesel::query_builder::QueryFragment;

use flowstate_core::RunStatus;

use crate::schema::{JsonText, flowstate_runs as runs, flowstate_steps as steps};
use crate::sql::typed::{
    claim_deadline, db_time, held, move_run, move_run_fenced, runnable, unsettled, unsettled_run,
    yield_release,
};

/// Whether backend `DB` would keep `query`'s prepared statement.
fn kept<DB: Backend + Default, Q: QueryFragment<DB>>(query: &Q) -> bool {
    query
        .is_safe_to_cache_prepared(&DB::default())
        .expect("the query walks")
}

/// Asserts every enabled dialect keeps `query`'s statement.
macro_rules! assert_kept {
    ($what:expr, $query:expr) => {{
        let query = $query;
        #[cfg(feature = "postgres")]
        assert!(kept::<diesel::pg::Pg, _>(&query), "{} on PostgreSQL", $what);
        #[cfg(feature = "mysql")]
        assert!(
            kept::<diesel::mysql::Mysql, _>(&query),
            "{} on MySQL",
            $what
        );
        #[cfg(feature = "sqlite")]
        assert!(
            kept::<diesel::sqlite::Sqlite, _>(&query),
            "{} on SQLite",
            $what
        );
    }};
}

/// Some dialect's lease clock (the text does not change what is asked).
const NOW_US: &str = "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::BIGINT";

#[test]
fn the_lease_guards_leave_a_read_cacheable() {
    // A read holding them (the lease read, `take_signal`'s check, the
    // fenced step insert's `EXISTS`) is kept as diesel keeps any `SELECT`.
    assert_kept!("held", held(NOW_US, "run", 1, 0).select(runs::id));
    assert_kept!("unsettled_run", unsettled_run("run").select(runs::id));
    assert_kept!(
        "runnable",
        runs::table
            .filter(runnable(NOW_US, 0))
            .select((runs::id, runs::cancel_requested))
    );
    assert_kept!(
        "unsettled",
        runs::table.filter(unsettled()).select(runs::id)
    );
    assert_kept!(
        "the lease clock",
        steps::table
            .filter(steps::claimed_until.le(db_time(NOW_US, 5)))
            .filter(steps::claimed_until.le(claim_deadline(NOW_US, 0, 30_000_000)))
            .select(steps::id)
    );
}

#[test]
fn diesel_never_keeps_an_update_by_itself() {
    // Why every typed `UPDATE` on a hot path is wrapped in `Cached`
    // (`cached.rs`): diesel marks each one, whatever it holds.
    let update = diesel::update(held(NOW_US, "run", 1, 0)).set(yield_release());
    #[cfg(feature = "postgres")]
    assert!(!kept::<diesel::pg::Pg, _>(&update));
    #[cfg(feature = "mysql")]
    assert!(!kept::<diesel::mysql::Mysql, _>(&update));
    let output: Option<&JsonText> = None;
    assert_kept!(
        "a wrapped update",
        crate::cached::CacheExt::cached(move_run("run", RunStatus::Completed, 1, output))
    );
    assert_kept!(
        "a wrapped fenced update",
        crate::cached::CacheExt::cached(move_run_fenced(
            NOW_US,
            "run",
            RunStatus::Failed,
            1,
            output,
            1,
            0
        ))
    );
}

#[test]
fn the_fragments_leave_their_values_bound() {
    // What makes them safe to keep: no value in the text, so two calls
    // with other values are one statement.
    #[cfg(feature = "postgres")]
    {
        let sql = |token: i64, offset: i64| {
            diesel::debug_query::<diesel::pg::Pg, _>(
                &held(NOW_US, "run", token, offset).select(runs::id),
            )
            .to_string()
        };
        let (one, other) = (sql(1, 0), sql(2, 5));
        let text = |s: &str| s.split(" -- binds").next().unwrap_or_default().to_owned();
        assert_eq!(text(&one), text(&other));
        assert!(one.contains("IN ('"), "{one}");
    }
}
