//! The row of `flowstate_effects`: one effect of a run, begun by one
//! caller and settled once.

use diesel::prelude::*;

use crate::schema::{JsonText, flowstate_effects};

/// A row of `flowstate_effects`.
#[derive(Debug, Queryable, Selectable, Insertable)]
#[diesel(table_name = flowstate_effects)]
pub(crate) struct EffectRow {
    pub run_id: String,
    pub effect_key: String,
    pub began_by: String,
    pub outcome: Option<JsonText>,
    pub began_at: i64,
    pub settled_at: Option<i64>,
}
