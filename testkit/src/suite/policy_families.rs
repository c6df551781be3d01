//! The case list of the policy families: pool, sweeps, guard, ticks and dispatch, each
//! driving a policy crate over the ports: one arm per family, each
//! handing its folder of [`cases`](crate::cases), its bound and its cases
//! (those that need [`Hooks`](crate::Hooks) apart) to
//! [`__expand_family!`](crate::__expand_family). A family name no arm
//! knows falls through to the next list.

/// The case lists of the policy families, by family.
#[doc(hidden)]
#[macro_export]
macro_rules! __policy_family {
    (pool $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] pool policies [$crate::family::Pool]
            cases {
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
            hooked {
            }
        }
    };
    (sweeps $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] sweeps policies [$crate::family::Sweeps]
            cases {
                recovery_sweeps {
                    relay_then_sweep_dispatches_once,
                    two_sweeps_dispatch_once,
                    a_failing_dispatch_still_backs_off,
                    moving_and_settled_runs_are_not_redriven,
                    a_pass_wakes_reaps_relays_and_sweeps,
                    a_spawned_sweeper_stops_on_shutdown,
                }
            }
            hooked {
            }
        }
    };
    (guard $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] guard policies [$crate::family::Guard]
            cases {
                recovery_guard {
                    settled_runs_are_answered_without_their_lease,
                    suspended_and_running_runs_are_handled,
                    held_runs_are_not_run_twice,
                    a_cancel_requested_run_is_cancelled_not_run,
                    a_message_delivered_16_times_runs_once,
                }
            }
            hooked {
            }
        }
    };
    (ticks $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] ticks policies [$crate::family::Ticks]
            cases {
                virtual_user_ticks {
                    tick_dispatches_due_personas_and_records_the_run,
                    tick_skips_a_persona_in_flight,
                    tick_reaps_a_stale_run_and_dispatches_in_the_same_tick,
                    tick_reports_a_failed_dispatch_and_keeps_the_claim,
                    tick_never_dispatches_a_disabled_schedule,
                    tick_skips_a_persona_claimed_elsewhere,
                    tick_acts_on_at_most_its_limit,
                }
            }
            hooked {
                virtual_user_ticks {
                    a_tick_whose_schedule_claim_is_aborted_dispatches_once,
                }
            }
        }
    };
    (dispatch $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] dispatch policies [$crate::family::Dispatch]
            cases {
                event_dispatch {
                    dispatch_pending_materialises_due_events,
                    failing_dispatch_backs_off_and_dead_letters,
                    stale_failure_report_writes_nothing,
                    long_dispatch_error_is_cut_on_a_char_boundary,
                    dispatcher_runs_until_shut_down,
                }
            }
            hooked {
            }
        }
    };
    ($family:ident $($mode:tt)*) => {
        ::core::compile_error!(::core::concat!(
            "flowstate_testkit::suite!: no family `",
            ::core::stringify!($family),
            "`; the families are runs, steps, versions, batch, leases, waits, children, \
             effects, definitions, events, recovery, virtual_users, retention, pool, sweeps, guard, \
             ticks, dispatch, and hooks"
        ));
    };
}
