//! [`virtual_users_suite!`](crate::virtual_users_suite): the virtual-user
//! cases, stamped for a backend whose store implements
//! [`ScheduleStore`](flowstate_core::ports::ScheduleStore) and
//! [`VirtualUserRunStore`](flowstate_core::ports::VirtualUserRunStore), and their
//! one list, which [`VIRTUAL_USER_CASES`](crate::VIRTUAL_USER_CASES) is
//! expanded from too.

/// Stamps every virtual-user case into a multi-threaded tokio test for one
/// backend, exactly as [`conformance_suite!`](crate::conformance_suite)
/// does for the core ports (same arguments, same test names:
/// `<module name>::<group>::<case>`):
///
/// ```
/// use flowstate_testkit::MemoryHarness;
///
/// flowstate_testkit::virtual_users_suite!(memory_virtual_users, async { MemoryHarness::new() });
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! virtual_users_suite {
    ($suite:ident, $factory:expr $(,)?) => {
        $crate::__virtual_user_cases! { stamp $suite, $factory, bound [
            $crate::Harness<Store: $crate::__private::core::ports::ScheduleStore + $crate::__private::core::ports::VirtualUserRunStore>
        ] }
    };
}

/// The one list of virtual-user cases, by group.
#[doc(hidden)]
#[macro_export]
macro_rules! __virtual_user_cases {
    ($($mode:tt)*) => {
        $crate::__expand_cases! { [$($mode)*]
            virtual_user_schedules {
                upsert_schedule_then_get,
                upsert_schedule_replaces_and_keeps_last_run,
                new_schedule_defaults_next_run_at_from_now,
                due_schedules_are_enabled_and_due_earliest_first,
                claim_schedule_is_compare_and_set,
                claim_schedule_race_8,
            }
            virtual_user_runs {
                start_and_get_virtual_user_run,
                list_virtual_user_runs_newest_first,
                complete_and_fail_are_status_guarded,
                settle_race_8,
                bad_virtual_user_input_is_refused,
            }
            virtual_user_transcripts {
                transcript_appends_in_order_and_pages,
                transcript_keeps_json_types,
                transcript_of_unknown_or_settled_run,
                transcripts_are_per_run,
                transcript_append_race_8,
            }
            virtual_user_ticks {
                tick_dispatches_due_personas_and_records_the_run,
                tick_skips_a_persona_in_flight,
                tick_reaps_a_stale_run_and_dispatches_in_the_same_tick,
                tick_reports_a_failed_dispatch_and_keeps_the_claim,
                tick_never_dispatches_a_disabled_schedule,
                tick_skips_a_persona_claimed_elsewhere,
                tick_acts_on_at_most_its_limit,
            }
            virtual_user_races {
                ticks_race_2,
                ticks_race_8,
                claimed_draws_stay_within_bounds_and_swapped_bounds_are_a_range,
                runner_ticks_until_shut_down_and_finishes_its_tick,
            }
        }
    };
}
