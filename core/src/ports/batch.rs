//! [`BatchStepStore`]: steps many at a time, for worker pools
//! (`flowstate-pool`); the rules of a batch are in [`batch`](crate::batch).

use std::future::Future;

use crate::batch::{BatchClaim, Completion};
use crate::error::Result;
use crate::ports::StepStore;
use crate::records::Step;
use crate::step_claim::StepClaim;
// Named by the docs' links only; imported in every build, not under
// `cfg(doc)`, so the links still resolve where another crate's docs show
// these methods (an implementor's page).
#[allow(unused_imports)]
use crate::{error::Error, ports::Store};

/// Steps many at a time, for worker pools: a claim of the next claimable
/// steps across runs and a write of many completions, each one round trip
/// (or one transaction) however many steps it carries. A separate trait, so
/// a backend without batches still implements [`Store`].
pub trait BatchStepStore: StepStore {
    /// Claims up to [`BatchClaim::effective_limit`] steps across all runs,
    /// the ones [`BatchClaim::takes`] admits (pending, or failed with
    /// attempts left once their retry delay has passed), oldest first by
    /// `(created_at, id)`, and answers them as the claim left them: running,
    /// a retry on its next attempt with result and error cleared, each with
    /// its history row written. Of any number of concurrent batch claims and
    /// [`StepStore::claim_step`] calls, each step goes to exactly one; a
    /// step another claimer holds locked is skipped, not waited for, so a
    /// batch may come back short while claimable steps remain. A function
    /// name over the key limit is [`Error::InvalidInput`].
    fn claim_batch(&self, claim: &BatchClaim) -> impl Future<Output = Result<Vec<Step>>> + Send;

    /// Writes each completion as [`StepStore::transition_claimed`] would
    /// (the step row and its current attempt's history row together, if
    /// the item's claim still holds the step) and answers one result per
    /// item, in order: an item whose claim is lost ([`Error::ClaimLost`]),
    /// that names an unknown step or carries a payload over the limits
    /// fails alone; an item repeating a completion already written answers
    /// `Ok`, so a flush whose outcome was unknown may be sent again. A step named twice is moved by
    /// its first item; the later ones are
    /// [`repeated_items`](crate::batch::repeated_items). Every
    /// item's write commits together, in one statement or one transaction:
    /// when this answers `Ok`, each `Ok` item is durable; an `Err` means
    /// none was written.
    fn complete_batch(
        &self,
        completions: Vec<(StepClaim, Completion)>,
    ) -> impl Future<Output = Result<Vec<Result<()>>>> + Send;
}
