//! [`EffectJournal`]: an effect's key recorded before it is performed, so
//! it is performed at most once per key; the records are in
//! [`effects`](crate::effects).

use std::future::Future;
use std::time::Duration;

use serde_json::Value;

use crate::effects::{EffectBegin, StrandedEffect};
use crate::error::Result;
use crate::ids::RunId;
use crate::ports::RunStore;
// Named by the docs' links only; imported in every build, not under
// `cfg(doc)`, so the links still resolve where another crate's docs show
// these methods (an implementor's page).
#[allow(unused_imports)]
use crate::error::Error;

/// The effect journal: a step records an effect's key before performing
/// it, so it is performed at most once per key whatever is replayed.
pub trait EffectJournal: RunStore {
    /// Begins effect `key` of `run`, or answers what an earlier begin left:
    /// of any number of concurrent begins of one key exactly one answers
    /// [`EffectBegin::Started`]; later ones answer
    /// [`EffectBegin::InFlight`] or, once settled,
    /// [`EffectBegin::Settled`] with the recorded outcome. An unknown run is
    /// [`Error::RunNotFound`].
    fn begin_effect(
        &self,
        run: RunId,
        key: &str,
    ) -> impl Future<Output = Result<EffectBegin>> + Send;

    /// Records the outcome of a begun effect. Settling it again changes
    /// nothing (the first outcome stays). An effect never begun is
    /// [`Error::EffectNotFound`].
    fn settle_effect(
        &self,
        run: RunId,
        key: &str,
        outcome: &Value,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Effects begun at least `older_than` ago (on the store's clock) and
    /// never settled, oldest first, for an operator or a sweep.
    fn stranded_effects(
        &self,
        older_than: Duration,
    ) -> impl Future<Output = Result<Vec<StrandedEffect>>> + Send;
}
