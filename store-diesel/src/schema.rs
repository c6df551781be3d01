//! The tables, once for every dialect (see `SCHEMA.md`).
//!
//! diesel's own test suite keeps a schema file per backend because its
//! column types differ. Ours agree everywhere but for JSON (`jsonb` on
//! PostgreSQL, `JSON` on MySQL, `TEXT` on SQLite), and that one difference
//! is the [`Json`] SQL type: JSON text on the wire, encoded as each backend
//! wants it. So one `table!` set serves all three, and every typed query in
//! the crate is written once.
//!
//! Ids are 36-character text, timestamps `BIGINT` microseconds since the
//! epoch (UTC), counters `BIGINT`.

use diesel::deserialize::{self, FromSql, FromSqlRow};
use diesel::expression::AsExpression;
use diesel::serialize::{self, Output, ToSql};
use diesel::sql_types::SqlType;
#[cfg(any(feature = "mysql", feature = "sqlite"))]
use diesel::sql_types::Text;

/// JSON stored in the dialect's JSON column, read and written as its text.
///
/// PostgreSQL's binary `jsonb` format is a version byte (1) and the text, so
/// no dialect parses JSON on the way in or out: core's
/// [`InputLimits`](flowstate_core::InputLimits) encodes it once and
/// [`decode_json`](flowstate_core::backend::decode_json) reads it back.
#[derive(Clone, Copy, Debug, SqlType, diesel::query_builder::QueryId)]
#[cfg_attr(
    feature = "postgres",
    diesel(postgres_type(oid = 3802, array_oid = 3807))
)]
#[cfg_attr(feature = "mysql", diesel(mysql_type(name = "String")))]
#[cfg_attr(feature = "sqlite", diesel(sqlite_type(name = "Text")))]
pub struct Json;

/// JSON text bound to or read from a [`Json`] column.
#[derive(Clone, Debug, PartialEq, Eq, AsExpression, FromSqlRow)]
#[diesel(sql_type = Json)]
pub struct JsonText(pub String);

/// The version byte of PostgreSQL's binary `jsonb` format.
#[cfg(feature = "postgres")]
const JSONB_VERSION: u8 = 1;

#[cfg(feature = "postgres")]
impl ToSql<Json, diesel::pg::Pg> for JsonText {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, diesel::pg::Pg>) -> serialize::Result {
        use std::io::Write;
        out.write_all(&[JSONB_VERSION])?;
        out.write_all(self.0.as_bytes())?;
        Ok(serialize::IsNull::No)
    }
}

#[cfg(feature = "postgres")]
impl FromSql<Json, diesel::pg::Pg> for JsonText {
    fn from_sql(value: diesel::pg::PgValue<'_>) -> deserialize::Result<Self> {
        match value.as_bytes().split_first() {
            Some((&JSONB_VERSION, text)) => Ok(Self(std::str::from_utf8(text)?.to_owned())),
            _ => Err("unsupported jsonb encoding version".into()),
        }
    }
}

/// MySQL and SQLite take and give JSON as plain text.
#[cfg(any(feature = "mysql", feature = "sqlite"))]
macro_rules! json_as_text {
    ($backend:ty) => {
        impl ToSql<Json, $backend> for JsonText {
            fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, $backend>) -> serialize::Result {
                <str as ToSql<Text, $backend>>::to_sql(self.0.as_str(), out)
            }
        }

        impl FromSql<Json, $backend> for JsonText {
            fn from_sql(
                value: <$backend as diesel::backend::Backend>::RawValue<'_>,
            ) -> deserialize::Result<Self> {
                <String as FromSql<Text, $backend>>::from_sql(value).map(Self)
            }
        }
    };
}

#[cfg(feature = "mysql")]
json_as_text!(diesel::mysql::Mysql);
#[cfg(feature = "sqlite")]
json_as_text!(diesel::sqlite::Sqlite);

diesel::table! {
    use diesel::sql_types::{BigInt, Bool, Nullable, Text};
    use super::Json;

    /// Runs; the `lease_*`, `failures`, `failure_reason` and
    /// `cancel_requested` columns are the run leases' (`ports/leases.rs`);
    /// `output` is what the run answered (migration 000016).
    flowstate_runs (id) {
        id -> Text,
        workflow -> Text,
        status -> Text,
        input -> Json,
        graph_hash -> Nullable<Text>,
        parent_id -> Nullable<Text>,
        idempotency_key -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
        lease_owner -> Nullable<Text>,
        lease_token -> BigInt,
        lease_expires_at -> Nullable<BigInt>,
        failures -> BigInt,
        failure_reason -> Nullable<Text>,
        cancel_requested -> Bool,
        wake_at -> Nullable<BigInt>,
        waiting_on -> Nullable<Text>,
        output -> Nullable<Json>,
    }
}

diesel::table! {
    use diesel::sql_types::{BigInt, Nullable, Text};
    use super::Json;

    /// One row per key of a run's state.
    flowstate_run_state (run_id, state_key) {
        run_id -> Text,
        state_key -> Text,
        value -> Json,
    }
}

diesel::table! {
    use diesel::sql_types::{BigInt, Nullable, Text};
    use super::Json;

    /// Steps; `current_attempt` names the live history row.
    flowstate_steps (id) {
        id -> Text,
        run_id -> Text,
        name -> Text,
        function_name -> Nullable<Text>,
        status -> Text,
        input -> Json,
        result -> Nullable<Json>,
        error -> Nullable<Json>,
        current_attempt -> BigInt,
        retries -> BigInt,
        retry_delay_ms -> Nullable<BigInt>,
        branch_taken -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
        claim_timeout_ms -> Nullable<BigInt>,
        claimed_until -> Nullable<BigInt>,
    }
}

diesel::table! {
    use diesel::sql_types::{BigInt, Nullable, Text};
    use super::Json;

    /// One row per attempt of a step.
    flowstate_step_history (id) {
        id -> Text,
        step_id -> Text,
        attempt -> BigInt,
        status -> Text,
        result -> Nullable<Json>,
        error -> Nullable<Json>,
        created_at -> BigInt,
        scheduled_at -> Nullable<BigInt>,
        running_at -> Nullable<BigInt>,
        succeeded_at -> Nullable<BigInt>,
        failed_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    use diesel::sql_types::{BigInt, Nullable, Text};
    use super::Json;

    /// Workflow graphs, one per (workflow, hash). `source` and `status`
    /// (a `VersionStatus`, `active` for rows stored before) are migration
    /// 000016's.
    flowstate_workflow_versions (id) {
        id -> Text,
        workflow -> Text,
        graph_hash -> Text,
        graph -> Json,
        created_at -> BigInt,
        source -> Nullable<Text>,
        status -> Text,
    }
}

diesel::table! {
    use diesel::sql_types::{BigInt, Text};
    use super::Json;

    /// Signals sent to runs, one per (run, name) until taken.
    flowstate_run_signals (run_id, name) {
        run_id -> Text,
        name -> Text,
        payload -> Json,
        sent_at -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::{BigInt, Nullable, Text};
    use super::Json;

    /// The effect journal, one row per (run, effect key).
    flowstate_effects (run_id, effect_key) {
        run_id -> Text,
        effect_key -> Text,
        began_by -> Text,
        outcome -> Nullable<Json>,
        began_at -> BigInt,
        settled_at -> Nullable<BigInt>,
    }
}

diesel::joinable!(flowstate_run_state -> flowstate_runs (run_id));
diesel::joinable!(flowstate_run_signals -> flowstate_runs (run_id));
diesel::joinable!(flowstate_steps -> flowstate_runs (run_id));
diesel::joinable!(flowstate_step_history -> flowstate_steps (step_id));
diesel::allow_tables_to_appear_in_same_query!(
    flowstate_runs,
    flowstate_run_state,
    flowstate_steps,
    flowstate_step_history,
    flowstate_workflow_versions,
    flowstate_workflows,
    flowstate_published_versions,
    flowstate_activations,
    flowstate_events,
    flowstate_event_deliveries,
    flowstate_run_signals,
    flowstate_effects,
);

diesel::table! {
    use diesel::sql_types::{BigInt, Bool, Nullable, Text};
    use super::Json;

    /// Personas' schedules, one per persona. `last_run_at`, `goals` (a JSON
    /// array of strings, NULL for none) and the `budget_` limits (NULL for
    /// none) are migration 000016's.
    flowstate_virtual_user_schedules (persona) {
        persona -> Text,
        enabled -> Bool,
        min_interval_ms -> BigInt,
        max_interval_ms -> BigInt,
        next_run_at -> BigInt,
        last_run_id -> Nullable<Text>,
        updated_at -> BigInt,
        last_run_at -> Nullable<BigInt>,
        goals -> Nullable<Json>,
        budget_max_duration_ms -> Nullable<BigInt>,
        budget_max_turns -> Nullable<BigInt>,
        budget_max_spend -> Nullable<BigInt>,
    }
}

diesel::table! {
    use diesel::sql_types::{BigInt, Nullable, Text};
    use super::Json;

    /// Virtual-user runs. `goals` and `intents` (JSON arrays of strings,
    /// NULL for none), `seed` (a `u64`'s 64 bits), `started_by`, the
    /// `tally_` counters (default 0), `memory` and `stop_reason` (a
    /// `StopReason`'s text) are migration 000017's.
    flowstate_virtual_user_runs (id) {
        id -> Text,
        persona -> Text,
        status -> Text,
        findings -> Nullable<Json>,
        failure -> Nullable<Text>,
        transcript_len -> BigInt,
        created_at -> BigInt,
        updated_at -> BigInt,
        goals -> Nullable<Json>,
        seed -> Nullable<BigInt>,
        started_by -> Nullable<Text>,
        tally_turns -> BigInt,
        tally_tokens -> BigInt,
        tally_cost -> BigInt,
        memory -> Nullable<Json>,
        intents -> Nullable<Json>,
        stop_reason -> Nullable<Text>,
    }
}

diesel::table! {
    use diesel::sql_types::{BigInt, Text};
    use super::Json;

    /// One row per transcript entry of a virtual-user run.
    flowstate_virtual_user_transcript (run_id, seq) {
        run_id -> Text,
        seq -> BigInt,
        entry -> Json,
        at -> BigInt,
    }
}

diesel::joinable!(flowstate_virtual_user_transcript -> flowstate_virtual_user_runs (run_id));
diesel::allow_tables_to_appear_in_same_query!(
    flowstate_virtual_user_runs,
    flowstate_virtual_user_transcript,
);

diesel::table! {
    use diesel::sql_types::{BigInt, Bool, Nullable, Text};

    /// Workflow definitions, one per (app, scope, name).
    flowstate_workflows (id) {
        id -> Text,
        app_id -> Text,
        scope_id -> Text,
        name -> Text,
        enabled -> Bool,
        active_version_id -> Nullable<Text>,
        created_at -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::{BigInt, Text};
    use super::Json;

    /// Published versions of workflow definitions, one per (workflow, hash).
    flowstate_published_versions (id) {
        id -> Text,
        workflow_id -> Text,
        hash -> Text,
        definition -> Json,
        created_at -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::{BigInt, Bool, Text};
    use super::Json;

    /// A version of a workflow listening for an event type.
    flowstate_activations (id) {
        id -> Text,
        workflow_id -> Text,
        version_id -> Text,
        event_type -> Text,
        enabled -> Bool,
        authorization_snapshot -> Json,
        created_at -> BigInt,
    }
}

diesel::table! {
    use diesel::sql_types::{BigInt, Nullable, Text};
    use super::Json;

    /// Events, one per (app, scope, type, dedupe key), and their dispatch.
    flowstate_events (id) {
        id -> Text,
        app_id -> Text,
        scope_id -> Text,
        event_type -> Text,
        data -> Json,
        context -> Json,
        authorization_snapshot -> Json,
        target_workflow_id -> Nullable<Text>,
        dedupe_key -> Nullable<Text>,
        occurred_at -> BigInt,
        matched -> BigInt,
        dispatched_at -> Nullable<BigInt>,
        attempts -> BigInt,
        last_error -> Nullable<Text>,
        dispatch_after -> BigInt,
        dead_lettered_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    use diesel::sql_types::Text;
    use super::Json;

    /// The activations an event matched, pinned, with the run each starts.
    flowstate_event_deliveries (event_id, activation_id) {
        event_id -> Text,
        activation_id -> Text,
        workflow_id -> Text,
        workflow_name -> Text,
        version_id -> Text,
        version_hash -> Text,
        authorization_snapshot -> Json,
        run_id -> Text,
    }
}

diesel::joinable!(flowstate_published_versions -> flowstate_workflows (workflow_id));
diesel::joinable!(flowstate_activations -> flowstate_workflows (workflow_id));
diesel::joinable!(flowstate_activations -> flowstate_published_versions (version_id));
diesel::joinable!(flowstate_event_deliveries -> flowstate_events (event_id));
