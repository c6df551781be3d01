//! [`RetentionStore`] for [`Metered`]: each prune's deletions counted
//! under the kind pruned ([`PRUNES`](crate::names::PRUNES)); the dry run's
//! counts pass through.

use std::time::Duration;

use flowstate_core::ports::RetentionStore;
use flowstate_core::{PruneKind, Result};

use super::Metered;
use crate::names;
use crate::record::count_as;

impl<S: RetentionStore> RetentionStore for Metered<S> {
    async fn prune(&self, kind: PruneKind, older_than: Duration, limit: u32) -> Result<u64> {
        let answer = self.inner.prune(kind, older_than, limit).await;
        if let Ok(deleted) = &answer {
            count_as(names::PRUNES, names::KIND, kind.as_str(), *deleted);
        }
        answer
    }

    async fn count_prunable(&self, kind: PruneKind, older_than: Duration) -> Result<u64> {
        self.inner.count_prunable(kind, older_than).await
    }
}
