//! [`EffectJournal`] for [`Metered`]: passed through, nothing counted.

use std::time::Duration;

use flowstate_core::ports::EffectJournal;
use flowstate_core::{EffectBegin, Result, RunId, StrandedEffect};
use serde_json::Value;

use super::Metered;

impl<S: EffectJournal> EffectJournal for Metered<S> {
    async fn begin_effect(&self, run: RunId, key: &str) -> Result<EffectBegin> {
        self.inner.begin_effect(run, key).await
    }

    async fn settle_effect(&self, run: RunId, key: &str, outcome: &Value) -> Result<()> {
        self.inner.settle_effect(run, key, outcome).await
    }

    async fn stranded_effects(&self, older_than: Duration) -> Result<Vec<StrandedEffect>> {
        self.inner.stranded_effects(older_than).await
    }
}
