//! The lease columns of `flowstate_runs`, read apart from [`RunRow`] so the
//! run reads of the other ports select exactly what they did before.

use diesel::prelude::*;

use flowstate_core::{Error, LeaseState, Run, RunLease, Timestamp};

use crate::rows::RunRow;
use crate::schema::flowstate_runs;

/// The lease bookkeeping of one run.
#[derive(Clone, Debug, Queryable, QueryableByName, Selectable)]
#[diesel(table_name = flowstate_runs)]
pub(crate) struct LeaseRow {
    pub lease_owner: Option<String>,
    pub lease_token: i64,
    pub lease_expires_at: Option<i64>,
    pub failures: i64,
    pub failure_reason: Option<String>,
    pub cancel_requested: bool,
    pub wake_at: Option<i64>,
    pub waiting_on: Option<String>,
}

impl From<LeaseRow> for LeaseState {
    fn from(row: LeaseRow) -> Self {
        Self {
            token: u64::try_from(row.lease_token).unwrap_or(0),
            worker: row.lease_owner,
            expires_at: row.lease_expires_at.map(Timestamp::from_micros),
            failures: u32::try_from(row.failures).unwrap_or(u32::MAX),
            failure_reason: row.failure_reason,
            cancel_requested: row.cancel_requested,
            wake_at: row.wake_at.map(Timestamp::from_micros),
            waiting_on: row.waiting_on,
        }
    }
}

/// A run as a claim wrote it: the run and its new lease.
#[derive(Debug, Queryable, QueryableByName, Selectable)]
#[diesel(table_name = flowstate_runs)]
pub(crate) struct LeasedRunRow {
    #[diesel(embed)]
    pub run: RunRow,
    #[diesel(embed)]
    pub lease: LeaseRow,
}

impl TryFrom<LeasedRunRow> for RunLease {
    type Error = Error;

    fn try_from(row: LeasedRunRow) -> Result<Self, Error> {
        let id = row.run.id.clone();
        let state = LeaseState::from(row.lease);
        let corrupt = |detail: &str| Error::Corrupt {
            what: "run lease",
            row: id.clone(),
            detail: detail.to_owned(),
        };
        Ok(Self {
            run: Run::try_from(row.run)?,
            token: state.token,
            worker: state
                .worker
                .ok_or_else(|| corrupt("a claimed run has no holder"))?,
            expires_at: state
                .expires_at
                .ok_or_else(|| corrupt("a claimed run has no expiry"))?,
            failures: state.failures,
        })
    }
}

/// Claimed runs, oldest first (the order a claim takes them in; a
/// `RETURNING` clause promises none).
pub(crate) fn claimed(rows: Vec<LeasedRunRow>) -> Result<Vec<RunLease>, Error> {
    let mut leases = rows
        .into_iter()
        .map(RunLease::try_from)
        .collect::<Result<Vec<_>, _>>()?;
    leases.sort_by_key(|lease| (lease.run.created_at, lease.run.id));
    Ok(leases)
}

/// What a `lease_run` write found
/// ([`Connection::lease_run`](crate::dialect::Connection::lease_run)).
#[derive(Debug)]
pub(crate) enum Leased {
    /// The run is leased: the row as written.
    Won(Box<LeasedRunRow>),
    /// The run had a cancel requested and is settled as cancelled.
    Cancelled,
    /// No run was runnable under that id (it may not exist).
    #[cfg(any(feature = "postgres", feature = "sqlite"))]
    Refused,
    /// The run exists and is not runnable (MySQL, whose locked read tells).
    #[cfg(feature = "mysql")]
    NotRunnable,
    /// No run has that id (MySQL, whose locked read tells).
    #[cfg(feature = "mysql")]
    Missing,
}
