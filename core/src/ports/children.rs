//! [`ChildRunStore`]: child runs created in bulk, keyed per parent; the
//! records and checks are in [`children`](crate::children).

use std::future::Future;

use crate::children::NewChild;
use crate::error::Result;
use crate::ids::RunId;
use crate::ports::RunWaitStore;
use crate::records::{Inserted, Run};
// Named by the docs' links only; imported in every build, not under
// `cfg(doc)`, so the links still resolve where another crate's docs show
// these methods (an implementor's page).
#[allow(unused_imports)]
use crate::{error::Error, ports::RunStore, wait::Wait};

/// Child runs created in bulk, on top of leases and waits: a parent holding
/// its lease creates its children, then waits on them with
/// [`Wait::Children`]; [`RunStore::count_children`] counts them by status.
pub trait ChildRunStore: RunWaitStore {
    /// Creates the children of `parent` in one call, each at most once per
    /// key whatever number of calls race ([`crate::children::child_key`]):
    /// answers every child in the order given, `inserted: false` for one
    /// that existed. A parent that does not exist is
    /// [`Error::RunNotFound`] and nothing is created.
    fn create_children(
        &self,
        parent: RunId,
        children: Vec<NewChild>,
    ) -> impl Future<Output = Result<Vec<Inserted<Run>>>> + Send;
}
