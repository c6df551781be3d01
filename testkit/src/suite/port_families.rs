//! The case list of the port families beyond the core three: batch, leases, waits, children,
//! effects, definitions, events, recovery, virtual users and retention: one arm per family, each
//! handing its folder of [`cases`](crate::cases), its bound and its cases
//! (those that need [`Hooks`](crate::Hooks) apart) to
//! [`__expand_family!`](crate::__expand_family). A family name no arm
//! knows falls through to the next list.

/// The case lists of the port families beyond the core three, by family.
#[doc(hidden)]
#[macro_export]
macro_rules! __port_family {
    (batch $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] batch batch [$crate::family::Batch]
            cases {
                basics {
                    claim_batch_takes_pending_oldest_first,
                    claim_batch_of_zero_takes_nothing,
                    claim_batch_takes_due_retries,
                    claim_batch_leaves_other_statuses,
                    claim_batch_filters_by_function,
                    complete_batch_writes_every_item,
                    complete_batch_answers_per_item,
                    complete_batch_of_nothing,
                }
                races {
                    claim_batch_race_16,
                    complete_batch_race_8,
                }
                settled_runs {
                    claim_batch_leaves_settled_runs,
                }
            }
            hooked {
                basics {
                    complete_batch_recreates_missing_history_row,
                    batches_are_atomic_with_their_history,
                }
                atomicity {
                    claim_batch_is_atomic_across_its_steps,
                    complete_batch_is_atomic_across_its_items,
                }
                aborts {
                    claim_batch_aborted_after_its_pick_takes_each_step_once,
                }
            }
        }
    };
    (leases $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] leases leases [$crate::family::Leases]
            cases {
                basics {
                    claim_takes_the_oldest_runnable_run,
                    claim_leaves_settled_and_leased_runs,
                    claim_with_nothing_runnable_is_none,
                    token_rises_with_every_claim,
                    expired_lease_is_taken_over,
                    renew_keeps_the_lease,
                    finish_settles_the_run,
                    claim_runs_takes_a_batch,
                    claim_runs_takes_run_out_and_free_runs_past_held_ones,
                    lease_calls_on_unknown_runs,
                    bad_lease_input_is_refused,
                }
                releases {
                    release_yield_frees_and_resets_failures,
                    failure_limit_fails_the_run,
                    failure_limit_is_overridable,
                    cancel_is_settled_at_the_next_claim,
                }
                races {
                    claim_race_2_workers,
                    claim_race_16_workers,
                    claim_runs_race_16_workers,
                    skewed_clocks_never_share_a_run,
                }
                fenced_writes {
                    a_stale_holder_writes_nothing,
                    fenced_writes_refuse_unknown_and_settled_runs,
                    a_settled_run_takes_no_signal,
                }
                output {
                    finish_with_output_records_the_output,
                    finish_with_output_guards,
                }
            }
            hooked {
                aborts {
                    a_run_claim_aborted_after_its_pick_leases_each_run_once,
                }
            }
        }
    };
    (waits $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] waits waits [$crate::family::Waits]
            cases {
                basics {
                    sleeping_run_is_left_alone_until_its_time,
                    signal_wakes_a_waiting_run,
                    signal_before_wait_is_not_lost,
                    wait_deadline_wakes_the_run,
                    wake_expired_clears_waits_past_their_time,
                    claim_runs_takes_woken_and_free_runs_past_sleeping_ones,
                    wait_and_signal_refusals,
                }
            }
            hooked {
            }
        }
    };
    (children $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] children children [$crate::family::Children]
            cases {
                basics {
                    create_children_is_idempotent_per_key,
                    create_children_of_unknown_parent,
                    create_children_race_16,
                    parent_waits_until_children_settle,
                }
            }
            hooked {
            }
        }
    };
    (effects $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] effects effects [$crate::family::Effects]
            cases {
                basics {
                    begin_starts_once_and_a_replay_reads_the_outcome,
                    begin_effect_race_32,
                    stranded_effects_are_old_and_unsettled,
                    effect_refusals,
                }
            }
            hooked {
            }
        }
    };
    (definitions $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] definitions definitions [$crate::family::Definitions]
            cases {
                basics {
                    create_workflow_is_idempotent_by_name,
                    publish_makes_the_version_active,
                    enable_disable_and_list,
                    activation_of_another_workflows_version_is_refused,
                    unknown_definition_ids_are_typed,
                    empty_definition_names_are_refused,
                }
            }
            hooked {
            }
        }
    };
    (events $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] events events [$crate::family::Events]
            cases {
                basics {
                    emit_now_returns_the_runs,
                    emit_deferred_waits_for_dispatch,
                    emit_matching_nothing_is_dispatched_at_once,
                    emit_duplicate_answers_the_first_runs,
                    deliveries_are_pinned,
                    target_workflow_narrows_matching,
                    only_live_activations_in_scope_match,
                    empty_authorization_falls_back_to_the_snapshot,
                    ordinary_runs_have_no_cause,
                    list_undispatched_filters_and_pages,
                    bad_event_input_is_refused,
                    unknown_event_ids_are_typed,
                }
                event_runs {
                    event_runs_lists_the_runs_its_deliveries_started,
                    event_runs_of_an_unknown_event_is_typed,
                }
                races {
                    emit_race_8_same_dedupe_key,
                    emit_race_32_same_dedupe_key,
                    emit_race_16_deferred_same_dedupe_key,
                    dispatch_race_16_one_event,
                    dispatchers_race_4_over_200_events,
                }
                queue {
                    dispatch_next_takes_the_longest_due_first,
                    dispatch_next_leaves_what_is_not_pending,
                    dispatch_queued_backs_off_and_dead_letters,
                    dispatch_next_race_16_over_200_events,
                    queued_dispatcher_runs_until_shut_down,
                }
                batches {
                    dispatch_next_batch_takes_the_longest_due_once,
                    dispatch_next_batch_refuses_a_size_out_of_range,
                    dispatch_next_batch_leaves_what_is_not_pending,
                    dispatch_next_batch_race_12_over_150_events,
                    dispatch_queued_records_the_failed_event_of_a_batch,
                }
                emit_batches {
                    emit_batch_answers_in_input_order,
                    emit_batch_matching_nothing_is_dispatched_at_once,
                    emit_batch_now_materialises_the_runs,
                    emit_batch_dedupes_against_stored_and_within,
                    emit_batch_refuses_a_size_out_of_range,
                    emit_batch_with_a_bad_event_writes_nothing,
                    emit_batch_race_8_overlapping_keys,
                }
            }
            hooked {
                aborts {
                    a_dispatch_aborted_after_its_lock_dispatches_once,
                    a_batch_aborted_after_its_lock_dispatches_once,
                }
            }
        }
    };
    (recovery $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] recovery recovery [$crate::family::Recovery]
            cases {
                queries {
                    undispatched_steps_are_idle_claimable_steps,
                    undispatched_steps_wait_for_the_retry_delay,
                    recovery_queries_honour_their_limit,
                    stalled_runs_are_running_and_quiet,
                    leased_and_waiting_runs_are_not_stalled,
                    settled_runs_hold_nothing_to_recover,
                }
                leases {
                    lease_run_takes_the_named_run,
                    lease_run_carries_out_a_cancel,
                    lease_run_refusals,
                    lease_run_race_16,
                    reap_frees_expired_leases_only,
                    reap_honours_its_limit,
                    reap_race_8,
                    reap_leaves_deleted_runs_out,
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
                dense_expiry {
                    expiry_races_completions_dense,
                }
            }
            hooked {
                expiry_atomicity {
                    expiry_is_atomic_across_its_steps,
                }
            }
        }
    };
    (virtual_users $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] virtual_users virtual_users [$crate::family::VirtualUsers]
            cases {
                schedules {
                    upsert_schedule_then_get,
                    upsert_schedule_replaces_and_keeps_last_run,
                    new_schedule_defaults_next_run_at_from_now,
                    due_schedules_are_enabled_and_due_earliest_first,
                    claim_schedule_is_compare_and_set,
                    claim_schedule_race_8,
                }
                schedule_records {
                    schedule_goals_and_budget_round_trip,
                    update_schedule_is_partial,
                    claim_recording_a_run_sets_last_run_at,
                    list_and_remove_schedules,
                    unknown_schedule_is_not_found,
                    bad_schedule_patch_is_refused,
                }
                runs {
                    start_and_get_virtual_user_run,
                    list_virtual_user_runs_newest_first,
                    complete_and_fail_are_status_guarded,
                    settle_race_8,
                    bad_virtual_user_input_is_refused,
                }
                run_records {
                    run_goals_seed_and_starter_round_trip,
                    stop_reason_is_recorded_when_settled,
                    removing_a_schedule_keeps_its_runs,
                }
                run_progress {
                    tally_adds_in_place_while_running,
                    tally_add_race_8,
                    memory_and_intents_are_overwritten_while_running,
                    bad_run_records_are_refused,
                }
                transcripts {
                    transcript_appends_in_order_and_pages,
                    transcript_keeps_json_types,
                    transcript_of_unknown_or_settled_run,
                    transcripts_are_per_run,
                    transcript_append_race_8,
                }
                races {
                    ticks_race_2,
                    ticks_race_8,
                    claimed_draws_stay_within_bounds_and_swapped_bounds_are_a_range,
                    runner_ticks_until_shut_down_and_finishes_its_tick,
                }
            }
            hooked {
            }
        }
    };
    (retention $($mode:tt)*) => {
        $crate::__expand_family! { [$($mode)*] retention retention [$crate::family::Retention]
            cases {
                runs {
                    old_settled_runs_are_pruned_with_what_hangs_off_them,
                    an_idempotency_key_protects_until_its_run_is_pruned,
                    live_runs_and_parents_of_live_children_are_kept,
                    a_settled_run_under_a_live_lease_is_kept,
                }
                batches {
                    batches_are_bounded_oldest_settled_first,
                    prune_race_8,
                    prune_edge_inputs,
                }
                events {
                    dispatched_events_are_pruned_and_free_their_dedupe_keys,
                    dead_letters_are_kept_until_their_longer_window,
                }
                virtual_users {
                    finished_virtual_user_runs_are_pruned_with_transcripts,
                }
                pruner {
                    a_pruner_pass_takes_every_batch,
                    a_spawned_pruner_reports_and_shuts_down,
                }
            }
            hooked {
                runs {
                    pruned_runs_leave_no_rows,
                }
            }
        }
    };
    ($($other:tt)*) => {
        $crate::__policy_family! { $($other)* }
    };
}
