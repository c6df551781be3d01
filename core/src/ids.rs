//! Identifiers: uuid v7 newtypes, so ids sort by creation time and one kind of
//! id can never be passed where another is expected.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A fresh uuid v7 id: time-ordered, random in its low bits.
            pub fn generate() -> Self {
                Self(Uuid::now_v7())
            }

            /// Wraps an existing uuid (for rows read back from a store).
            pub const fn from_uuid(uuid: Uuid) -> Self {
                Self(uuid)
            }

            /// The uuid inside.
            pub const fn as_uuid(&self) -> &Uuid {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::parse_str(s).map(Self)
            }
        }
    };
}

id_type!(
    /// The id of a workflow run.
    RunId
);
id_type!(
    /// The id of a step within a run.
    StepId
);
id_type!(
    /// The id of one attempt's history row.
    HistoryId
);
id_type!(
    /// The id of a stored workflow version.
    VersionId
);
id_type!(
    /// The id of a virtual-user run.
    VirtualUserRunId
);
id_type!(
    /// The id of a recorded event.
    EventId
);
id_type!(
    /// The id of a workflow definition (app, scope, name).
    WorkflowId
);
id_type!(
    /// The id of a published version of a workflow definition.
    PublishedVersionId
);
id_type!(
    /// The id of an activation: a workflow version listening for an event type.
    ActivationId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_their_text_form() {
        let id = RunId::generate();
        let parsed: RunId = id.to_string().parse().unwrap();
        assert_eq!(id, parsed);
        assert_eq!(id.to_string().len(), 36);
    }

    #[test]
    fn ids_are_version_7_and_sort_by_creation() {
        let a = StepId::generate();
        let b = StepId::generate();
        assert_eq!(a.as_uuid().get_version_num(), 7);
        assert!(a < b);
    }

    #[test]
    fn a_malformed_id_is_an_error() {
        assert!("not-a-uuid".parse::<RunId>().is_err());
    }
}
