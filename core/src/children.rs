//! Child runs created in bulk: the records of
//! [`ChildRunStore`](crate::ports::ChildRunStore), the idempotency key each
//! child is stored under, and the check of a batch.
//!
//! A child is a run with its parent set, stored under the idempotency key
//! [`child_key`]`(parent, key)`, so creating the same children again (or
//! racing to) creates each once: the key is per parent, so two parents may
//! use the same child keys.

use serde_json::Value;

use crate::error::{Error, InvalidInput};
use crate::field;
use crate::ids::RunId;
use crate::limits::{Dismantle, InputLimits, checked, dismantle_json};
use crate::records::NewRun;

/// The most children one call may create.
pub const MAX_CHILDREN_BATCH: usize = 1_000;

/// The idempotency key child `key` of `parent` is stored under.
pub fn child_key(parent: RunId, key: &str) -> String {
    format!("child:{parent}:{key}")
}

/// A child run to create.
#[derive(Clone, Debug, PartialEq)]
pub struct NewChild {
    /// Its key, unique among the parent's children.
    pub key: String,
    /// The workflow's name.
    pub workflow: String,
    /// The child's input.
    pub input: Value,
}

impl NewChild {
    /// Child `key` running `workflow` on `input`.
    pub fn new(key: impl Into<String>, workflow: impl Into<String>, input: Value) -> Self {
        Self {
            key: key.into(),
            workflow: workflow.into(),
            input,
        }
    }

    /// The run a store creates for this child of `parent`.
    pub fn into_run(self, parent: RunId) -> NewRun {
        NewRun::new(self.workflow, self.input)
            .with_parent(parent)
            .with_idempotency_key(child_key(parent, &self.key))
    }
}

impl InputLimits {
    /// Checks a batch of children of `parent` (1 to [`MAX_CHILDREN_BATCH`],
    /// each a valid run) and answers each as the run to create with its
    /// input as JSON text, in order. A refused batch is dropped without
    /// recursion ([`Dismantle`]).
    pub fn encode_children(
        &self,
        parent: RunId,
        children: Vec<NewChild>,
    ) -> Result<Vec<(NewRun, String)>, Error> {
        let (children, ()) = checked(children, |children| {
            if children.is_empty() || children.len() > MAX_CHILDREN_BATCH {
                return Err(Error::InvalidInput(InvalidInput::OutOfRange {
                    field: field::CHILDREN,
                    detail: format!(
                        "{} is not between 1 and {MAX_CHILDREN_BATCH}",
                        children.len()
                    ),
                }));
            }
            for child in children {
                self.check_key(field::CHILD_KEY, &child.key)?;
                self.check_depth(field::CHILD_INPUT, &child.input)?;
            }
            Ok(())
        })?;
        let runs: Vec<NewRun> = children
            .into_iter()
            .map(|child| child.into_run(parent))
            .collect();
        let (runs, inputs) = checked(runs, |runs| {
            runs.iter()
                .map(|run| self.encode_run(run))
                .collect::<Result<Vec<_>, _>>()
        })?;
        Ok(runs.into_iter().zip(inputs).collect())
    }
}

impl Dismantle for NewChild {
    fn dismantle(self) {
        dismantle_json(self.input);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn children_are_keyed_per_parent() {
        let (a, b) = (RunId::generate(), RunId::generate());
        assert_ne!(child_key(a, "x"), child_key(b, "x"));
        let run = NewChild::new("x", "wf", json!(1)).into_run(a);
        assert_eq!(run.parent, Some(a));
        assert_eq!(run.idempotency_key, Some(child_key(a, "x")));
    }

    #[test]
    fn batches_are_checked() {
        let limits = InputLimits::default();
        let parent = RunId::generate();
        assert!(limits.encode_children(parent, vec![]).is_err());
        assert!(
            limits
                .encode_children(parent, vec![NewChild::new("", "wf", json!(1))])
                .is_err()
        );
        let ok = limits.encode_children(parent, vec![NewChild::new("k", "wf", json!({"a": 1}))]);
        assert_eq!(ok.unwrap()[0].1, r#"{"a":1}"#);
    }
}
