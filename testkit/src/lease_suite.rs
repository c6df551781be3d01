//! [`lease_suite!`](crate::lease_suite): the cases of
//! [`RunLeaseStore`](flowstate_core::ports::RunLeaseStore), stamped for any
//! [`LeaseHarness`](crate::LeaseHarness), and their one list.
//!
//! A separate suite from [`conformance_suite!`](crate::conformance_suite),
//! because leases are a port of their own: a backend without them still
//! runs the conformance suite unchanged.

/// Stamps every lease case (leases, releases, waits and signals, child
/// runs, the effect journal, fenced writes: the backend implements
/// [`ChildRunStore`](flowstate_core::ports::ChildRunStore),
/// [`EffectJournal`](flowstate_core::ports::EffectJournal) and
/// [`FencedWrites`](flowstate_core::ports::FencedWrites))
/// into a multi-threaded tokio test, as
/// [`conformance_suite!`](crate::conformance_suite) does, for a factory of a
/// [`LeaseHarness`](crate::LeaseHarness):
///
/// ```
/// use flowstate_testkit::MemoryHarness;
///
/// flowstate_testkit::lease_suite!(memory_leases, async { MemoryHarness::new() });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! lease_suite {
    ($suite:ident, $factory:expr $(,)?) => {
        $crate::__lease_cases! { stamp $suite, $factory, bound [
            $crate::LeaseHarness<Store: $crate::__private::core::ports::ChildRunStore + $crate::__private::core::ports::RunWaitStore + $crate::__private::core::ports::EffectJournal + $crate::__private::core::ports::FencedWrites>
        ] }
    };
}

/// The one list of lease cases, by group.
#[doc(hidden)]
#[macro_export]
macro_rules! __lease_cases {
    ($($mode:tt)*) => {
        $crate::__expand_cases! { [$($mode)*]
            leases {
                claim_takes_the_oldest_runnable_run,
                claim_leaves_settled_and_leased_runs,
                claim_with_nothing_runnable_is_none,
                token_rises_with_every_claim,
                expired_lease_is_taken_over,
                renew_keeps_the_lease,
                finish_settles_the_run,
                claim_runs_takes_a_batch,
                lease_calls_on_unknown_runs,
                bad_lease_input_is_refused,
            }
            lease_releases {
                release_yield_frees_and_resets_failures,
                failure_limit_fails_the_run,
                failure_limit_is_overridable,
                cancel_is_settled_at_the_next_claim,
            }
            lease_waits {
                sleeping_run_is_left_alone_until_its_time,
                signal_wakes_a_waiting_run,
                signal_before_wait_is_not_lost,
                wait_deadline_wakes_the_run,
                wake_expired_clears_waits_past_their_time,
                wait_and_signal_refusals,
            }
            lease_children {
                create_children_is_idempotent_per_key,
                create_children_of_unknown_parent,
                create_children_race_16,
                parent_waits_until_children_settle,
            }
            effects {
                begin_starts_once_and_a_replay_reads_the_outcome,
                begin_effect_race_32,
                stranded_effects_are_old_and_unsettled,
                effect_refusals,
            }
            fenced_writes {
                a_stale_holder_writes_nothing,
                fenced_writes_refuse_unknown_and_settled_runs,
                a_settled_run_takes_no_signal,
            }
            lease_races {
                claim_race_2_workers,
                claim_race_16_workers,
                claim_runs_race_16_workers,
                skewed_clocks_never_share_a_run,
            }
        }
    };
}
