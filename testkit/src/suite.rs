//! The macro that stamps every case into a test, and the one list of cases
//! it stamps.
//!
//! The list lives in [`__cases!`](crate::__cases) only; both
//! [`conformance_suite!`](crate::conformance_suite) and
//! [`CASES`](crate::CASES) are expanded from it, and a tidy test checks that
//! every `pub async fn` under `cases/` is on it.

/// Stamps every conformance case into a
/// `#[tokio::test(flavor = "multi_thread", worker_threads = 4)]` for one
/// backend.
///
/// ```text
/// flowstate_testkit::conformance_suite!(<module name>, <harness factory>);
/// ```
///
/// `<module name>` names the module the tests go in (one per backend, so
/// one test binary can hold several); `<harness factory>` is an expression
/// evaluating to a future of a fresh [`Harness`](crate::Harness), evaluated
/// once per test, for example `async { MemoryHarness::new() }` or
/// `PgHarness::create()`. The test for case `cases::claim_races::claim_pending_race_32`
/// is `<module name>::claim_races::claim_pending_race_32`, so
/// `cargo test claim_races` runs one group. Names in the factory resolve
/// where the macro is called. The expansion refers to this crate as
/// `::flowstate_testkit` (the tokio test macro needs a literal path), so
/// depend on it under that name; no direct tokio dependency is needed.
///
/// Each test builds a harness, runs the case on it, then calls
/// [`Harness::teardown`](crate::Harness::teardown).
#[macro_export]
macro_rules! conformance_suite {
    ($suite:ident, $factory:expr $(,)?) => {
        $crate::__cases! { stamp $suite, $factory, bound [$crate::Harness] }
    };
}

/// The one list of cases, by group (a module of [`cases`](crate::cases)),
/// handed to [`__expand_cases!`](crate::__expand_cases) with a mode.
#[doc(hidden)]
#[macro_export]
macro_rules! __cases {
    ($($mode:tt)*) => {
        $crate::__expand_cases! { [$($mode)*]
            atomicity {
                claim_is_atomic_with_its_history,
                retry_claim_is_atomic_with_its_history,
                transitions_are_atomic_with_their_history,
                retry_attempt_is_atomic_with_its_history,
                insert_step_is_atomic_with_its_history,
                transition_claimed_is_atomic_with_its_history,
            }
            bad_input {
                oversized_json_is_refused,
                json_at_the_limit_is_stored,
                nul_in_json_string_is_refused,
                nul_in_json_key_is_refused,
                escaped_nul_text_is_stored,
                json_at_the_depth_limit_is_stored,
                json_one_level_too_deep_is_refused,
                json_100000_levels_deep_is_refused_without_overflow,
            }
            bad_names {
                empty_names_are_refused,
                nul_in_names_is_refused,
                oversized_names_are_refused,
                names_at_the_limit_are_stored,
            }
            claim {
                claim_pending_step,
                claim_scheduled_step,
                claim_running_step_gives_none,
                claim_succeeded_step_gives_none,
                claim_failed_step_starts_retry,
                claim_with_retries_exhausted_gives_none,
                claim_for_other_function_is_refused,
                claim_unknown_step_name,
                claim_recreates_missing_history_row,
            }
            claim_outcomes {
                outcome_of_a_pending_step_is_claimed,
                outcome_of_a_retryable_step_is_claimed,
                outcome_of_a_running_step_is_held,
                outcome_of_a_succeeded_step_is_settled,
                outcome_of_an_exhausted_step_is_no_attempts_left,
                outcome_errors_are_the_claims,
                outcome_race_16,
            }
            claim_races {
                claim_pending_race_2,
                claim_pending_race_8,
                claim_pending_race_32,
                claim_failed_race_2,
                claim_failed_race_8,
                claim_failed_race_32,
                claim_scheduled_race_2,
                claim_scheduled_race_8,
                claim_scheduled_race_32,
            }
            deletion {
                delete_run_leaves_no_rows,
                delete_run_frees_its_idempotency_key,
            }
            dense_claims {
                transition_claimed_dense_race,
                stale_claims_lose_dense_race,
                repeated_completions_dense_race,
            }
            dense_moves {
                transition_to_running_dense_race,
                transition_to_scheduled_dense_race,
                transition_to_succeeded_dense_race,
                transition_to_failed_dense_race,
                transition_out_of_running_dense_race,
            }
            dense_races {
                claim_dense_race,
                retry_attempt_dense_race,
                set_run_status_dense_race,
            }
            exactness {
                state_keys_are_exact,
                step_names_are_exact,
                idempotency_keys_are_exact,
                function_names_are_exact,
                workflow_filter_is_exact,
            }
            graph {
                graph_state_of_new_run_is_empty,
                graph_state_names_and_branches,
                graph_state_follows_retries,
                set_branch_taken_replaces,
                step_results_of_named_steps,
            }
            history {
                history_of_run_without_steps_is_empty,
                history_orders_by_creation,
                history_keeps_every_attempt,
                history_is_per_run,
                rerun_stamps_are_the_latest,
            }
            retries {
                retry_attempt_running,
                retry_attempt_pending,
                retry_attempt_ignores_policy,
                retry_attempt_of_unfailed_step_is_illegal,
                same_microsecond_retry_resolves_the_retry,
                retry_delay_is_kept_to_the_millisecond,
                retry_delay_over_the_limit_is_refused,
                retry_step_answers_the_step_after,
                retry_step_refusals_are_the_retrys,
                a_step_without_a_policy_gets_the_default,
            }
            run_list {
                list_runs_empty,
                list_runs_newest_first,
                list_runs_breaks_ties_by_id,
                list_runs_pages_through_cursor,
                list_runs_exact_multiple_ends_with_empty_page,
                list_runs_pages_through_ties,
                list_runs_default_limit,
                list_runs_filters,
                list_runs_caps_the_page,
                list_runs_parent_filter_two_parents,
                list_runs_pages_through_mixed_ties,
            }
            run_races {
                create_run_race_32_same_key,
                set_run_status_race_32,
            }
            run_state {
                read_state_of_new_run_is_empty,
                write_state_keeps_json_types,
                write_state_keeps_lookalike_strings,
                write_state_replaces_existing_key,
                write_state_dotted_key_is_one_key,
                write_state_keys_with_quotes_and_sql,
                write_state_is_per_run,
                write_state_race_32_keys,
                write_state_race_32_same_key,
            }
            runs {
                create_run_starts_running,
                create_run_is_idempotent_by_key,
                create_run_without_a_shared_key_inserts,
                create_run_with_parent,
                create_run_with_unknown_parent_is_refused,
                set_run_status_stamps_updated_at,
                run_transitions_legal_rows,
                run_transitions_illegal_rows,
                delete_run_cascades,
                delete_run_keeps_children_without_parent,
                count_children_by_status,
            }
            settled_runs {
                settled_runs_refuse_new_work,
                unsettled_runs_and_work_in_flight_go_on,
            }
            step_claims {
                a_claim_sets_a_deadline_and_every_other_move_clears_it,
                claim_timeouts_are_checked_and_kept_in_millis,
                a_claimer_writes_under_its_claim,
                a_claimer_may_put_its_step_to_sleep,
                renew_extends_a_held_claim,
            }
            steps {
                insert_step_starts_pending_attempt_1,
                insert_step_is_idempotent_by_name,
                insert_step_same_name_in_other_run,
                insert_step_without_function,
                find_step_by_name,
                list_steps_orders_by_creation_then_name,
                list_steps_of_run_without_steps_is_empty,
                attempt_tracks_retries,
                insert_step_race_32,
            }
            summary {
                run_summary_durations,
                run_summary_collapses_retries,
                run_summary_of_run_without_steps_is_empty,
            }
            transitions {
                step_transitions_legal_rows,
                step_transitions_illegal_rows,
                succeeded_writes_step_and_history,
                failed_writes_step_and_history,
                transitions_keep_earlier_stamps,
                transition_touches_only_its_step,
                transition_recreates_missing_history_row,
                recreated_history_row_is_updated_in_place,
            }
            unknown_ids {
                unknown_run_id_is_run_not_found,
                unknown_step_id_is_step_not_found,
                deleted_ids_are_not_found,
            }
            versions {
                upsert_version_stores_it,
                upsert_version_twice_changes_nothing,
                get_version_missing_is_none,
                versions_are_keyed_by_workflow_and_hash,
                upsert_version_race_32,
            }
            wide_races {
                claim_pending_wide_race,
                claim_failed_wide_race,
                retry_attempt_wide_race,
                set_run_status_wide_race,
                insert_step_wide_race,
                create_run_wide_race,
            }
        }
    };
}

/// Stamps every case of the batch ports
/// ([`BatchStepStore`](flowstate_core::ports::BatchStepStore)) into tests for one
/// backend, as [`conformance_suite!`](crate::conformance_suite) does for
/// the core ports: `batch_suite!(<module name>, <harness factory>)`, where
/// the harness's store implements `BatchStepStore`. A separate suite, so a
/// backend without batches still runs the core one.
#[macro_export]
macro_rules! batch_suite {
    ($suite:ident, $factory:expr $(,)?) => {
        $crate::__batch_cases! { stamp $suite, $factory, bound [
            $crate::Harness<Store: $crate::__private::core::ports::BatchStepStore>
        ] }
    };
}

/// The list of batch cases, as [`__cases!`](crate::__cases) is for the core
/// ports.
#[doc(hidden)]
#[macro_export]
macro_rules! __batch_cases {
    ($($mode:tt)*) => {
        $crate::__expand_cases! { [$($mode)*]
            batch {
                claim_batch_takes_pending_oldest_first,
                claim_batch_of_zero_takes_nothing,
                claim_batch_takes_due_retries,
                claim_batch_leaves_other_statuses,
                claim_batch_filters_by_function,
                complete_batch_writes_every_item,
                complete_batch_answers_per_item,
                complete_batch_of_nothing,
                complete_batch_recreates_missing_history_row,
                batches_are_atomic_with_their_history,
            }
            batch_atomicity {
                claim_batch_is_atomic_across_its_steps,
                complete_batch_is_atomic_across_its_items,
            }
            batch_races {
                claim_batch_race_16,
                complete_batch_race_8,
            }
            settled_runs {
                claim_batch_leaves_settled_runs,
            }
        }
    };
}

/// Expands the case list: `stamp` into tests, `names` into a list of
/// `group::case` names.
#[doc(hidden)]
#[macro_export]
macro_rules! __expand_cases {
    // The factory is awaited in one function, whose opaque return type
    // carries the suite's bound: a factory of the wrong type is one error
    // there, not one per case.
    ([stamp $suite:ident, $factory:expr, bound [$($bound:tt)+]] $($group:ident { $($case:ident,)* })*) => {
        #[allow(clippy::wildcard_imports)]
        mod $suite {
            #[allow(unused_imports)]
            use super::*;

            /// A fresh harness from the suite's factory.
            fn __harness() -> impl ::core::future::Future<Output = impl $($bound)+> {
                $factory
            }
            $(
                #[allow(clippy::wildcard_imports)]
                mod $group {
                    #[allow(unused_imports)]
                    use super::*;
                    $(
                        #[$crate::__private::tokio::test(
                            flavor = "multi_thread",
                            worker_threads = 4,
                            crate = "::flowstate_testkit::__private::tokio"
                        )]
                        async fn $case() {
                            let harness = super::__harness().await;
                            $crate::cases::$group::$case(&harness).await;
                            $crate::Harness::teardown(harness).await;
                        }
                    )*
                }
            )*
        }
    };
    ([names] $($group:ident { $($case:ident,)* })*) => {
        &[$($(concat!(stringify!($group), "::", stringify!($case)),)*)*]
    };
}
