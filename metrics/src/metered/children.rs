//! [`ChildRunStore`] for [`Metered`]: passed through, nothing counted.

use flowstate_core::ports::ChildRunStore;
use flowstate_core::{Inserted, NewChild, Result, Run, RunId};

use super::Metered;

impl<S: ChildRunStore> ChildRunStore for Metered<S> {
    async fn create_children(
        &self,
        parent: RunId,
        children: Vec<NewChild>,
    ) -> Result<Vec<Inserted<Run>>> {
        self.inner.create_children(parent, children).await
    }
}
