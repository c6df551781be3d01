//! The baseline: the bench's claim + succeed work as hand-written SQL on
//! PostgreSQL, through plain diesel-async `sql_query`, one connection per
//! worker and no store in between. Each claim and each success is one
//! statement that moves the step and its history row together, on the same
//! tables and indexes, prepared once per connection (as anyone writing it
//! by hand would), so the gap to flowstate's figure is what the store itself
//! costs.
//!
//! Two forms, each a column of its own ([`Form`]): the plain one above,
//! and the same two statements keeping a claim deadline as flowstate's do
//! (`claimed_until` set by the claim, cleared by the success: migration
//! 000014, what brings back a step whose worker died). The column is
//! indexed, so clearing it makes the success a full update where the plain
//! form's is heap-only: the second column prices that guarantee alone, and
//! flowstate's ratio to it is the store's own cost.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use flowstate_store_diesel::{DieselStore, StoreConfig};
use tokio::task::JoinSet;

use super::prepared::Prepared;
use super::statements::Counted;
use super::throughput::{self, Throughput};

/// The hand-written forms, each its own column beside flowstate's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Status, stamps and result only.
    Plain,
    /// Also a claim deadline, as flowstate keeps one: the claim sets
    /// `claimed_until` on the database's clock, the success clears it.
    ClaimDeadline,
}

impl Form {
    /// Both forms, in column order.
    pub const ALL: [Self; 2] = [Self::Plain, Self::ClaimDeadline];

    /// The column's label.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Plain => "pg hand SQL",
            Self::ClaimDeadline => "pg hand+deadline",
        }
    }

    const fn claim(self) -> &'static str {
        match self {
            Self::Plain => CLAIM,
            Self::ClaimDeadline => CLAIM_WITH_DEADLINE,
        }
    }

    const fn succeed(self) -> &'static str {
        match self {
            Self::Plain => SUCCEED,
            Self::ClaimDeadline => SUCCEED_WITH_DEADLINE,
        }
    }
}

/// The claim of a pending step, the step and its current attempt's
/// history row, with `$set` (a literal) added to the step's assignments.
macro_rules! claim {
    ($set:literal) => {
        concat!(
            "WITH s AS (\n",
            "    UPDATE flowstate_steps SET status = 'running', updated_at = $3",
            $set,
            "\n    WHERE run_id = $1 AND name = $2 AND status IN ('pending', 'scheduled')\n",
            "    RETURNING id, current_attempt\n",
            "), h AS (\n",
            "    UPDATE flowstate_step_history AS h SET status = 'running', running_at = $3\n",
            "    FROM s WHERE h.step_id = s.id AND h.attempt = s.current_attempt\n",
            ")\n",
            "SELECT id FROM s"
        )
    };
}

/// The success of a running step, the step and its current attempt's
/// history row, with `$set` (a literal) added to the step's assignments.
macro_rules! succeed {
    ($set:literal) => {
        concat!(
            "WITH s AS (\n",
            "    UPDATE flowstate_steps SET status = 'succeeded', result = $2::jsonb, updated_at = $3",
            $set,
            "\n    WHERE id = $1 AND status = 'running'\n",
            "    RETURNING id, current_attempt\n",
            "), h AS (\n",
            "    UPDATE flowstate_step_history AS h SET status = 'succeeded', result = $2::jsonb, \
             succeeded_at = $3\n",
            "    FROM s WHERE h.step_id = s.id AND h.attempt = s.current_attempt\n",
            ")\n",
            "SELECT id FROM s"
        )
    };
}

/// Claims a pending step: the step and its current attempt's history row.
const CLAIM: &str = claim!("");

/// Succeeds a running step: the step and its current attempt's history row.
const SUCCEED: &str = succeed!("");

/// [`CLAIM`], also setting the claim deadline ten minutes from the
/// database's clock (flowstate's default claim timeout).
const CLAIM_WITH_DEADLINE: &str = claim!(
    ",\n        claimed_until = (EXTRACT(EPOCH FROM statement_timestamp()) * 1000000)::BIGINT + 600000000"
);

/// [`SUCCEED`], also clearing the claim deadline.
const SUCCEED_WITH_DEADLINE: &str = succeed!(",\n        claimed_until = NULL");

/// What the baseline in `form` sends per operation (the rest it does not
/// do).
pub fn statements(form: Form) -> Vec<Counted> {
    let one = |operation, sql: &str| Counted {
        operation,
        statements: vec![sql.to_owned()],
    };
    vec![
        one("claim (win)", form.claim()),
        one("claim (lose)", form.claim()),
        one("transition", form.succeed()),
    ]
}

#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = Text)]
    id: String,
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// Claims and succeeds `steps` fresh steps on `url` with `workers`
/// connections, in hand-written SQL of `form`.
pub async fn measure(url: &str, workers: usize, steps: usize, form: Form) -> Result<Throughput> {
    let config = StoreConfig::default().pool_size(workers.min(8));
    let store = Arc::new(
        DieselStore::open(url, config)
            .await
            .context("cannot open the store")?,
    );
    let items = Arc::new(throughput::create_steps(&store, steps, workers).await?);
    let mut connections = Vec::with_capacity(workers);
    for _ in 0..workers {
        connections.push(
            AsyncPgConnection::establish(url)
                .await
                .context("cannot connect")?,
        );
    }

    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut set = JoinSet::new();
    for mut conn in connections {
        let (items, next) = (Arc::clone(&items), Arc::clone(&next));
        set.spawn(async move {
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some((run, name)) = items.get(index) else {
                    return Ok::<_, anyhow::Error>(());
                };
                let claimed: Vec<Id> = Prepared(
                    diesel::sql_query(form.claim())
                        .bind::<Text, _>(run.to_string())
                        .bind::<Text, _>(name)
                        .bind::<BigInt, _>(now_micros()),
                )
                .load(&mut conn)
                .await?;
                let step = claimed
                    .into_iter()
                    .next()
                    .context("a fresh step's claim matched nothing")?;
                let done: Vec<Id> = Prepared(
                    diesel::sql_query(form.succeed())
                        .bind::<Text, _>(step.id)
                        .bind::<Text, _>(serde_json::json!({ "i": index }).to_string())
                        .bind::<BigInt, _>(now_micros()),
                )
                .load(&mut conn)
                .await?;
                ensure!(done.len() == 1, "a claimed step's success matched nothing");
            }
        });
    }
    while let Some(done) = set.join_next().await {
        done.context("a baseline worker panicked")??;
    }
    Ok(Throughput {
        steps: items.len(),
        elapsed: started.elapsed().max(Duration::from_nanos(1)),
    })
}
