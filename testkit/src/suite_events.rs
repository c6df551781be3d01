//! [`events_suite!`](crate::events_suite): the cases of the event ports
//! ([`DefinitionStore`](flowstate_core::ports::DefinitionStore),
//! [`EventStore`](flowstate_core::ports::EventStore)) stamped for a backend that
//! has them, with the same machinery as
//! [`conformance_suite!`](crate::conformance_suite). A backend without
//! events runs the conformance suite alone.
//!
//! [`event_queue_suite!`](crate::event_queue_suite) stamps the cases of
//! [`EventQueueStore`](flowstate_core::ports::EventQueueStore) for a backend that
//! has that port too; one with the event ports alone runs `events_suite!`
//! unchanged.

/// Stamps every event case into a multi-threaded tokio test, like
/// [`conformance_suite!`](crate::conformance_suite); the harness's store
/// must also implement [`EventBackend`](crate::EventBackend).
///
/// ```text
/// flowstate_testkit::events_suite!(<module name>, <harness factory>);
/// ```
#[macro_export]
macro_rules! events_suite {
    ($suite:ident, $factory:expr $(,)?) => {
        $crate::__event_cases! { stamp $suite, $factory, bound [
            $crate::Harness<Store: $crate::EventBackend>
        ] }
    };
}

/// The one list of event cases, by group.
#[doc(hidden)]
#[macro_export]
macro_rules! __event_cases {
    ($($mode:tt)*) => {
        $crate::__expand_cases! { [$($mode)*]
            definitions {
                create_workflow_is_idempotent_by_name,
                publish_makes_the_version_active,
                enable_disable_and_list,
                activation_of_another_workflows_version_is_refused,
                unknown_definition_ids_are_typed,
                empty_definition_names_are_refused,
            }
            event_dispatch {
                dispatch_pending_materialises_due_events,
                failing_dispatch_backs_off_and_dead_letters,
                stale_failure_report_writes_nothing,
                long_dispatch_error_is_cut_on_a_char_boundary,
                dispatcher_runs_until_shut_down,
            }
            event_races {
                emit_race_8_same_dedupe_key,
                emit_race_32_same_dedupe_key,
                emit_race_16_deferred_same_dedupe_key,
                dispatch_race_16_one_event,
                dispatchers_race_4_over_200_events,
            }
            events {
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
            }
        }
    };
}

/// Stamps every event-queue case into a multi-threaded tokio test, like
/// [`events_suite!`](crate::events_suite); the harness's store must also
/// implement [`EventQueueBackend`](crate::EventQueueBackend) (the event
/// ports and [`EventQueueStore`](flowstate_core::ports::EventQueueStore)).
///
/// ```text
/// flowstate_testkit::event_queue_suite!(<module name>, <harness factory>);
/// ```
#[macro_export]
macro_rules! event_queue_suite {
    ($suite:ident, $factory:expr $(,)?) => {
        $crate::__event_queue_cases! { stamp $suite, $factory, bound [
            $crate::Harness<Store: $crate::EventQueueBackend>
        ] }
    };
}

/// The one list of event-queue cases.
#[doc(hidden)]
#[macro_export]
macro_rules! __event_queue_cases {
    ($($mode:tt)*) => {
        $crate::__expand_cases! { [$($mode)*]
            event_queue {
                dispatch_next_takes_the_longest_due_first,
                dispatch_next_leaves_what_is_not_pending,
                dispatch_queued_backs_off_and_dead_letters,
                dispatch_next_race_16_over_200_events,
                queued_dispatcher_runs_until_shut_down,
            }
        }
    };
}
