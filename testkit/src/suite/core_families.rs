//! The case list of runs, steps and versions: the ports of every [`Store`](flowstate_core::ports::Store): one arm per family, each
//! handing its folder of [`cases`](crate::cases), its bound and its cases
//! (those that need [`Hooks`](crate::Hooks) apart) to
//! [`__expand_family!`](crate::__expand_family). A family name no arm
//! knows falls through to the next list.

/// The case lists of runs, steps and versions, by family.
#[doc(hidden)]
#[macro_export]
macro_rules! __family {
    (runs $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] runs runs [$crate::family::Runs]
            cases {
                basics {
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
                deletion {
                    delete_run_frees_its_idempotency_key,
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
                exactness {
                    state_keys_are_exact,
                    step_names_are_exact,
                    idempotency_keys_are_exact,
                    function_names_are_exact,
                    workflow_filter_is_exact,
                }
                unknown_ids {
                    unknown_run_id_is_run_not_found,
                    unknown_step_id_is_step_not_found,
                    deleted_ids_are_not_found,
                }
                output {
                    run_output_round_trips,
                    run_output_is_kept_and_replaced,
                    run_output_guards,
                    list_workflow_names_distinct_sorted,
                }
                summary {
                    run_summary_durations,
                    run_summary_collapses_retries,
                    run_summary_of_run_without_steps_is_empty,
                }
            }
            hooked {
                deletion {
                    delete_run_leaves_no_rows,
                }
            }
        }
    };
    (steps $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] steps steps [$crate::family::Steps]
            cases {
                basics {
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
                claim {
                    claim_pending_step,
                    claim_scheduled_step,
                    claim_running_step_gives_none,
                    claim_succeeded_step_gives_none,
                    claim_failed_step_starts_retry,
                    claim_with_retries_exhausted_gives_none,
                    claim_for_other_function_is_refused,
                    claim_unknown_step_name,
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
                step_claims {
                    a_claim_sets_a_deadline_and_every_other_move_clears_it,
                    claim_timeouts_are_checked_and_kept_in_millis,
                    a_claimer_writes_under_its_claim,
                    a_claimer_may_put_its_step_to_sleep,
                    renew_extends_a_held_claim,
                }
                transitions {
                    step_transitions_legal_rows,
                    step_transitions_illegal_rows,
                    succeeded_writes_step_and_history,
                    failed_writes_step_and_history,
                    transitions_keep_earlier_stamps,
                    transition_touches_only_its_step,
                }
                wide_races {
                    claim_pending_wide_race,
                    claim_failed_wide_race,
                    retry_attempt_wide_race,
                    set_run_status_wide_race,
                    insert_step_wide_race,
                    create_run_wide_race,
                }
                graph {
                    graph_state_of_new_run_is_empty,
                    graph_state_names_and_branches,
                    graph_state_follows_retries,
                    set_branch_taken_replaces,
                    step_results_of_named_steps,
                }
                inline {
                    record_step_succeeded_round_trips,
                    record_step_failed_round_trips,
                    record_step_guards,
                }
                settled_runs {
                    settled_runs_refuse_new_work,
                    unsettled_runs_and_work_in_flight_go_on,
                }
            }
            hooked {
                claim {
                    claim_recreates_missing_history_row,
                }
                transitions {
                    transition_recreates_missing_history_row,
                    recreated_history_row_is_updated_in_place,
                }
                atomicity {
                    claim_is_atomic_with_its_history,
                    retry_claim_is_atomic_with_its_history,
                    transitions_are_atomic_with_their_history,
                    retry_attempt_is_atomic_with_its_history,
                    insert_step_is_atomic_with_its_history,
                    transition_claimed_is_atomic_with_its_history,
                }
            }
        }
    };
    (versions $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] versions versions [$crate::family::Versions]
            cases {
                basics {
                    upsert_version_stores_it,
                    upsert_version_twice_changes_nothing,
                    get_version_missing_is_none,
                    versions_are_keyed_by_workflow_and_hash,
                    upsert_version_race_32,
                }
                status {
                    proposed_version_round_trips,
                    version_status_moves_once,
                    version_status_race_8,
                    version_status_unknown_id,
                    propose_version_refuses_bad_source,
                }
            }
            hooked {
            }
        }
    };
    ($($other:tt)*) => {
        $crate::__port_family! { $($other)* }
    };
}
