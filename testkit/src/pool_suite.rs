//! [`pool_suite!`](crate::pool_suite): the cases of `flowstate-pool`'s
//! `GroupCommit` and `WorkerPool` driven over a backend's
//! [`BatchStepStore`](flowstate_core::BatchStepStore), stamped for any
//! [`Harness`](crate::Harness), and their one list.

/// Stamps every pool case (group commit: coalescing, per-item answers,
/// nothing acknowledged before the store answered, failed flushes, close;
/// the worker pool: every step exactly once, retries, the function filter,
/// panics, shutdown mid-run, failed flushes and claims, a claim in
/// progress at a stop) into a
/// multi-threaded tokio test, for a factory of a [`Harness`](crate::Harness)
/// whose store implements
/// [`BatchStepStore`](flowstate_core::BatchStepStore). The faults come from
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
            $crate::Harness<Store: $crate::__private::core::BatchStepStore>
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
                failed_commits_are_counted_and_leave_their_steps_running,
                a_flusher_that_panics_in_the_store_answers_every_completion,
                a_failed_claim_backs_off_and_the_pool_goes_on,
                a_claim_in_progress_at_stop_is_still_run,
                a_worker_does_not_wait_for_its_commit_so_flushes_fill_up,
            }
        }
    };
}
