//! The run and step status machines, the statuses of virtual-user runs and
//! of workflow versions ([`VersionStatus`]).
//!
//! Each machine is one table ([`RunStatus::TRANSITIONS`],
//! [`StepStatus::TRANSITIONS`]) that the code consults and the docs print, so
//! the two cannot drift. Backends encode the same tables as status guards in
//! their `UPDATE`s; the testkit checks every row of them against every backend.
//! [`RetryStart`] is the two statuses a new retry attempt may start in, as a
//! type, so no other start can be asked for and no backend checks for one.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Which status machine a status string was read for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatusKind {
    /// A [`RunStatus`].
    Run,
    /// A [`StepStatus`].
    Step,
}

impl fmt::Display for StatusKind {
    /// `run` or `step`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Run => "run",
            Self::Step => "step",
        })
    }
}

/// A status string read from storage that names no status.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} status {value:?}")]
pub struct UnknownStatus {
    /// Which machine the string was read for.
    pub kind: StatusKind,
    /// The text that was found.
    pub value: String,
}

macro_rules! status_enum {
    (
        $(#[$doc:meta])* $name:ident, $kind:ident,
        { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }
    ) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// Every status, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The stored text of this status.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownStatus;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    _ => Err(UnknownStatus { kind: StatusKind::$kind, value: s.to_owned() }),
                }
            }
        }
    };
}

status_enum!(
    /// Where a workflow run stands.
    RunStatus, Run, {
        /// Steps are being executed.
        Running => "running",
        /// Waiting for something outside (a sleep, an approval, a child run).
        /// Not settled: it will run again.
        Suspended => "suspended",
        /// Finished with a result. Settled.
        Completed => "completed",
        /// Finished with an error. Settled.
        Failed => "failed",
        /// Stopped on request. Settled.
        Cancelled => "cancelled",
    }
);

status_enum!(
    /// Where one step of a run stands, for its current attempt.
    StepStatus, Step, {
        /// Inserted, not yet claimed.
        Pending => "pending",
        /// Waiting for a time or an outside signal; claimable when dispatched.
        Scheduled => "scheduled",
        /// Claimed by a worker and executing.
        Running => "running",
        /// Finished with a result. Final for the step.
        Succeeded => "succeeded",
        /// The current attempt failed; a retry attempt may follow.
        Failed => "failed",
    }
);

impl RunStatus {
    /// The legal run transitions, `(from, to)`.
    pub const TRANSITIONS: &'static [(Self, Self)] = &[
        (Self::Running, Self::Suspended),
        (Self::Running, Self::Completed),
        (Self::Running, Self::Failed),
        (Self::Running, Self::Cancelled),
        (Self::Suspended, Self::Running),
        (Self::Suspended, Self::Failed),
        (Self::Suspended, Self::Cancelled),
    ];

    /// Whether the run is finished for good: completed, failed or cancelled.
    ///
    /// A suspended run is *not* settled: it will be resumed. A message for a
    /// settled run must be answered without replaying it.
    pub const fn is_settled(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }

    /// Whether moving from `self` to `to` is in [`Self::TRANSITIONS`].
    pub fn can_transition_to(self, to: Self) -> bool {
        Self::TRANSITIONS.contains(&(self, to))
    }

    /// The statuses a run may move to `to` from, for status guards in SQL.
    pub fn sources_of(to: Self) -> Vec<Self> {
        sources(Self::TRANSITIONS, to)
    }
}

impl StepStatus {
    /// The legal in-place step transitions, `(from, to)`: the same attempt
    /// changes status. A failed step moves on only through a new attempt
    /// (a claim's retry, or `create_retry_attempt` in a [`RetryStart`]),
    /// never in place, so its history row keeps the failure.
    pub const TRANSITIONS: &'static [(Self, Self)] = &[
        (Self::Pending, Self::Scheduled),
        (Self::Pending, Self::Running),
        (Self::Pending, Self::Failed),
        (Self::Scheduled, Self::Running),
        (Self::Scheduled, Self::Failed),
        (Self::Running, Self::Scheduled),
        (Self::Running, Self::Succeeded),
        (Self::Running, Self::Failed),
    ];

    /// Whether moving from `self` to `to` in place is in [`Self::TRANSITIONS`].
    pub fn can_transition_to(self, to: Self) -> bool {
        Self::TRANSITIONS.contains(&(self, to))
    }

    /// The statuses a step may move to `to` from, for status guards in SQL.
    pub fn sources_of(to: Self) -> Vec<Self> {
        sources(Self::TRANSITIONS, to)
    }

    /// Whether the step will never run again.
    pub const fn is_final(self) -> bool {
        matches!(self, Self::Succeeded)
    }
}

/// The status a new attempt of a failed step starts in, when it is started
/// by hand (`StepStore::create_retry_attempt`): pending, to wait for a
/// claim, or running, claimed by the caller at once. No other start exists,
/// so none needs to be refused at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetryStart {
    /// The new attempt waits to be claimed.
    Pending,
    /// The new attempt is executing now.
    Running,
}

impl RetryStart {
    /// Every start, in declaration order.
    pub const ALL: [RetryStart; 2] = [Self::Pending, Self::Running];

    /// The step status the new attempt starts in.
    pub const fn status(self) -> StepStatus {
        match self {
            Self::Pending => StepStatus::Pending,
            Self::Running => StepStatus::Running,
        }
    }

    /// The stored text of [`Self::status`].
    pub const fn as_str(self) -> &'static str {
        self.status().as_str()
    }
}

impl fmt::Display for RetryStart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a virtual-user run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VirtualUserRunStatus {
    /// Started and not finished: its persona is in flight.
    Running,
    /// Finished, with findings.
    Completed,
    /// Finished with a reason: it failed, or was reaped.
    Failed,
}

impl VirtualUserRunStatus {
    /// Every status, in declaration order.
    pub const ALL: &'static [Self] = &[Self::Running, Self::Completed, Self::Failed];

    /// The stored text of this status.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }

    /// The status stored as `text`, if any.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|s| s.as_str() == text)
    }
}

impl fmt::Display for VirtualUserRunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a workflow version stands: proposed (by tooling, or an AI) and
/// waiting for a person, accepted, or turned down. A version stored by
/// [`upsert_version`](crate::ports::VersionStore::upsert_version), and every
/// version stored before versions had a status, is [`Self::Active`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VersionStatus {
    /// Proposed, not yet decided: it may become active or be declined.
    Draft,
    /// In use: stored directly, or a draft accepted. Final.
    Active,
    /// A draft turned down. Final.
    Declined,
}

impl VersionStatus {
    /// Every status, in declaration order.
    pub const ALL: &'static [Self] = &[Self::Draft, Self::Active, Self::Declined];

    /// The moves a version may make: a draft is accepted or declined, once.
    pub const TRANSITIONS: &'static [(Self, Self)] =
        &[(Self::Draft, Self::Active), (Self::Draft, Self::Declined)];

    /// The stored text of this status.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Draft => "draft",
            Self::Active => "active",
            Self::Declined => "declined",
        }
    }

    /// The status stored as `text`, if any.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|s| s.as_str() == text)
    }

    /// Whether [`Self::TRANSITIONS`] allows the move to `to`.
    pub fn can_transition_to(self, to: Self) -> bool {
        Self::TRANSITIONS.contains(&(self, to))
    }
}

impl fmt::Display for VersionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

fn sources<S: Copy + PartialEq>(table: &[(S, S)], to: S) -> Vec<S> {
    table
        .iter()
        .filter(|(_, t)| *t == to)
        .map(|(f, _)| *f)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_through_their_text() {
        for status in VirtualUserRunStatus::ALL {
            assert_eq!(VirtualUserRunStatus::parse(status.as_str()), Some(*status));
        }
        assert_eq!(VirtualUserRunStatus::parse("paused"), None);
    }

    fn check_run(from: RunStatus, to: RunStatus, legal: bool) {
        assert_eq!(from.can_transition_to(to), legal, "{from} -> {to}");
    }

    fn check_step(from: StepStatus, to: StepStatus, legal: bool) {
        assert_eq!(from.can_transition_to(to), legal, "{from} -> {to}");
    }

    #[test]
    fn run_transition_table() {
        use RunStatus::{Cancelled, Completed, Failed, Running, Suspended};
        let rows = [
            (Running, Running, false),
            (Running, Suspended, true),
            (Running, Completed, true),
            (Running, Failed, true),
            (Running, Cancelled, true),
            (Suspended, Running, true),
            (Suspended, Suspended, false),
            (Suspended, Completed, false),
            (Suspended, Failed, true),
            (Suspended, Cancelled, true),
            (Completed, Running, false),
            (Completed, Failed, false),
            (Failed, Running, false),
            (Failed, Completed, false),
            (Cancelled, Running, false),
            (Cancelled, Suspended, false),
        ];
        for (from, to, legal) in rows {
            check_run(from, to, legal);
        }
    }

    #[test]
    fn no_transition_leaves_a_settled_run() {
        for &(from, _) in RunStatus::TRANSITIONS {
            assert!(!from.is_settled(), "{from} is settled but has an exit");
        }
    }

    #[test]
    fn settled_statuses() {
        let rows = [
            (RunStatus::Running, false),
            (RunStatus::Suspended, false),
            (RunStatus::Completed, true),
            (RunStatus::Failed, true),
            (RunStatus::Cancelled, true),
        ];
        for (status, settled) in rows {
            assert_eq!(status.is_settled(), settled, "{status}");
        }
    }

    #[test]
    fn step_transition_table() {
        use StepStatus::{Failed, Pending, Running, Scheduled, Succeeded};
        let rows = [
            (Pending, Pending, false),
            (Pending, Scheduled, true),
            (Pending, Running, true),
            (Pending, Succeeded, false),
            (Pending, Failed, true),
            (Scheduled, Pending, false),
            (Scheduled, Running, true),
            (Scheduled, Succeeded, false),
            (Scheduled, Failed, true),
            (Running, Running, false),
            (Running, Scheduled, true),
            (Running, Succeeded, true),
            (Running, Failed, true),
            (Running, Pending, false),
            (Succeeded, Running, false),
            (Succeeded, Failed, false),
            (Failed, Running, false),
            (Failed, Pending, false),
            (Failed, Succeeded, false),
        ];
        for (from, to, legal) in rows {
            check_step(from, to, legal);
        }
    }

    #[test]
    fn sources_match_the_table() {
        assert_eq!(
            StepStatus::sources_of(StepStatus::Succeeded),
            vec![StepStatus::Running]
        );
        assert_eq!(
            RunStatus::sources_of(RunStatus::Running),
            vec![RunStatus::Suspended]
        );
        assert!(StepStatus::sources_of(StepStatus::Pending).is_empty());
    }

    #[test]
    fn statuses_round_trip_through_text() {
        for s in RunStatus::ALL {
            assert_eq!(s.as_str().parse::<RunStatus>().unwrap(), *s);
        }
        for s in StepStatus::ALL {
            assert_eq!(s.as_str().parse::<StepStatus>().unwrap(), *s);
        }
    }

    #[test]
    fn an_unknown_status_string_is_a_typed_error() {
        let err = "exploded".parse::<StepStatus>().unwrap_err();
        assert_eq!(err.kind, StatusKind::Step);
        assert_eq!(err.value, "exploded");
        assert!("RUNNING".parse::<RunStatus>().is_err());
    }

    #[test]
    fn unknown_status_messages_name_the_machine() {
        let rows = [
            (
                "exploded".parse::<StepStatus>().unwrap_err(),
                r#"unknown step status "exploded""#,
            ),
            (
                "RUNNING".parse::<RunStatus>().unwrap_err(),
                r#"unknown run status "RUNNING""#,
            ),
        ];
        for (err, message) in rows {
            assert_eq!(err.to_string(), message);
        }
    }

    #[test]
    fn retry_starts_are_pending_and_running() {
        let rows = [
            (RetryStart::Pending, StepStatus::Pending),
            (RetryStart::Running, StepStatus::Running),
        ];
        assert_eq!(RetryStart::ALL, rows.map(|(start, _)| start));
        for (start, status) in rows {
            assert_eq!(start.status(), status);
            assert_eq!(start.as_str(), status.as_str());
            assert_eq!(start.to_string(), status.to_string());
        }
    }

    #[test]
    fn a_retry_start_is_an_attempt_in_progress() {
        for start in RetryStart::ALL {
            let status = start.status();
            assert!(!status.is_final(), "{start}");
            assert_ne!(status, StepStatus::Failed, "{start}");
            assert!(status.can_transition_to(StepStatus::Failed), "{start}");
        }
    }
}
