//! [`pool_suite!`](crate::pool_suite): the cases of `flowstate-pool`'s
//! `GroupCommit` and `WorkerPool` driven over a backend's
//! [`BatchStepStore`](flowstate_core::ports::BatchStepStore), stamped for any
//! [`Harness`](crate::Harness), and their one list.

/// Stamps every pool case (group commit: coalescing, per-item answers,
/// nothing acknowledged before the store answered, failed flushes, close;
/// flushes retried after a retryable error, a lost answer, giving up, close
/// during a retry; the worker pool: every step exactly once, retries, the
/// function filter, panics, shutdown mid-run, failed flushes and claims, a
/// claim in progress at a stop, an outage survived, an outage given up on
/// and recovered by `expire_step_claims`, a lost claim) into a
/// multi-threaded tokio test, for a factory of a [`Harness`](crate::Harness)
/// whose store implements
/// [`BatchStepStore`](flowstate_core::ports::BatchStepStore) and
/// [`RecoveryStore`](flowstate_core::ports::RecoveryStore). The faults come from
/// a wrapper around the harness's store, so they need no hook:
///
/// ```
/// use flowstate_testkit::MemoryHarness;
///
/// flowstate_testkit::pool_suite!(memory_pool, async { MemoryHarness::new() });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! pool_suite {
    ($suite:ident, $factory:expr $(,)?) => {
        $crate::__pool_cases! { stamp $suite, $factory, bound [
            $crate::Harness<Store: $crate::__private::core::ports::BatchStepStore + $crate::__private::core::ports::RecoveryStore>
        ] }
    };
}

/// The one list of pool cases, by group.
#[doc(hidden)]
#[macro_export]
macro_rules! __pool_cases {
    ($($mode:tt)*) => {
        $crate::__expand_cases! { [$($mode)*]
            pool_commit {
                commits_queued_behind_a_flush_go_in_one_flush,
                a_flush_takes_at_most_max_batch,
                each_caller_gets_its_own_items_result,
                a_failed_flush_fails_every_caller_in_it,
                close_flushes_the_queue_then_refuses_commits,
                an_idle_queue_flushes_each_commit_at_once,
            }
            pool_workers {
                the_pool_runs_300_steps_exactly_once,
                a_failed_attempt_comes_back_through_the_pool_as_the_next,
                a_pool_for_one_function_leaves_the_others,
                a_panicking_handler_fails_its_step_and_the_worker_goes_on,
                shutdown_mid_run_finishes_what_it_claimed_and_loses_nothing,
            }
            pool_faults {
                a_flush_error_that_is_not_retryable_is_not_retried,
                a_flusher_that_panics_in_the_store_answers_every_completion,
                a_failed_claim_backs_off_and_the_pool_goes_on,
                a_claim_in_progress_at_stop_is_still_run,
                a_worker_does_not_wait_for_its_commit_so_flushes_fill_up,
            }
            pool_retries {
                a_failing_flush_is_sent_again_and_answered_once_written,
                a_flush_whose_answer_was_lost_is_sent_again_and_answers_ok,
                a_flush_that_gives_up_answers_its_callers_with_the_error,
                close_waits_for_a_flush_being_retried,
            }
            pool_outages {
                a_pool_whose_flushes_fail_three_times_writes_every_completion,
                a_pool_gives_up_on_a_store_that_stays_down_and_recovery_takes_the_steps_back,
                a_completion_whose_claim_ran_out_is_claim_lost_and_writes_nothing,
            }
        }
    };
}
