//! [`recovery_suite!`](crate::recovery_suite): the cases of
//! [`RecoveryStore`](flowstate_core::ports::RecoveryStore) and
//! [`RunRecoveryStore`](flowstate_core::ports::RunRecoveryStore), and of
//! `flowstate-recovery` driven through them, stamped for any
//! [`LeaseHarness`](crate::LeaseHarness), and their one list.

/// Stamps every recovery case (the recovery queries, lease reaping and
/// leasing one named run, the relay and the stalled sweep, the sweeper,
/// the settled-run guard: the store implements
/// [`RecoveryStore`](flowstate_core::ports::RecoveryStore),
/// [`RunRecoveryStore`](flowstate_core::ports::RunRecoveryStore) and
/// [`RunWaitStore`](flowstate_core::ports::RunWaitStore)) into a multi-threaded
/// tokio test, for a factory of a [`LeaseHarness`](crate::LeaseHarness):
///
/// ```
/// use flowstate_testkit::MemoryHarness;
///
/// flowstate_testkit::recovery_suite!(memory_recovery, async { MemoryHarness::new() });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! recovery_suite {
    ($suite:ident, $factory:expr $(,)?) => {
        $crate::__recovery_cases! { stamp $suite, $factory, bound [
            $crate::LeaseHarness<Store: $crate::__private::core::ports::RecoveryStore + $crate::__private::core::ports::RunRecoveryStore + $crate::__private::core::ports::RunWaitStore>
        ] }
    };
}

/// The one list of recovery cases, by group.
#[doc(hidden)]
#[macro_export]
macro_rules! __recovery_cases {
    ($($mode:tt)*) => {
        $crate::__expand_cases! { [$($mode)*]
            recovery_queries {
                undispatched_steps_are_idle_claimable_steps,
                undispatched_steps_wait_for_the_retry_delay,
                recovery_queries_honour_their_limit,
                stalled_runs_are_running_and_quiet,
                leased_and_waiting_runs_are_not_stalled,
                settled_runs_hold_nothing_to_recover,
            }
            recovery_leases {
                lease_run_takes_the_named_run,
                lease_run_carries_out_a_cancel,
                lease_run_refusals,
                lease_run_race_16,
                reap_frees_expired_leases_only,
                reap_honours_its_limit,
                reap_race_8,
                reap_leaves_deleted_runs_out,
            }
            recovery_sweeps {
                relay_then_sweep_dispatches_once,
                two_sweeps_dispatch_once,
                a_failing_dispatch_still_backs_off,
                moving_and_settled_runs_are_not_redriven,
                a_pass_wakes_reaps_relays_and_sweeps,
                a_spawned_sweeper_stops_on_shutdown,
            }
            dense_expiry {
                expiry_races_completions_dense,
            }
            expiry_atomicity {
                expiry_is_atomic_across_its_steps,
            }
            claim_expiry {
                an_expired_claim_is_taken_back_and_retried,
                an_expired_claim_with_no_attempt_left_fails_for_good,
                renewed_and_finished_claims_are_left_alone,
                expiry_honours_its_limit_first_deadline_first,
                expire_step_claims_race_8,
                a_sweeper_pass_takes_back_claims_and_redrives_their_runs,
                a_skewed_sweeper_finds_what_any_other_finds,
            }
            recovery_guard {
                settled_runs_are_answered_without_their_lease,
                suspended_and_running_runs_are_handled,
                held_runs_are_not_run_twice,
                a_cancel_requested_run_is_cancelled_not_run,
                a_message_delivered_16_times_runs_once,
            }
        }
    };
}
