//! [`dialect_tests!`]: everything every dialect runs, stamped by one call
//! in its test main: the whole kit over [`DieselHarness`](super::harness::DieselHarness)
//! (every family and the hooks), the statement budgets of the one table,
//! and the checks written once in `common` (corrupt rows, the schema
//! check, an event dispatch rolled back, large batches, the recovery
//! queries on real rows).

/// Stamps every shared test for one dialect:
///
/// ```text
/// common::stamp::dialect_tests!(Dialect::Postgres);
/// ```
///
/// The kit's cases are `kit::<family>::<group>::<case>`; the shared checks
/// `shared::<file>::<check>`, each calling `common::<file>::<check>` with
/// the dialect.
macro_rules! dialect_tests {
    (Dialect::$dialect:ident) => {
        $crate::common::stamp::dialect_tests!(@ $ Dialect::$dialect);
    };
    // `$d` is a `$`, for the macro the stamp defines.
    (@ $d:tt Dialect::$dialect:ident) => {
        flowstate_testkit::suite!(
            kit,
            crate::common::harness::DieselHarness::create(
                ::flowstate_store_diesel::Dialect::$dialect
            ),
            [all]
        );

        /// The checks written once in `common`, for this dialect.
        mod shared {
            use crate::common;

            /// One test per check, `<root>::<file>::<check>(dialect)`, in a
            /// module per file.
            macro_rules! checks {
                ($d root:ident; $d($d file:ident: [$d($d check:ident),+ $d(,)?])+) => {
                    $d(
                        mod $d file {
                            use super::$d root;
                            $d(
                                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                                async fn $d check() {
                                    $d root::$d file::$d check(
                                        ::flowstate_store_diesel::Dialect::$dialect,
                                    )
                                    .await;
                                }
                            )+
                        }
                    )+
                };
            }

            checks! {
                common;
                corrupt: [corrupt_rows_are_typed_errors]
                schema_check: [open_refuses_a_schema_it_was_not_written_for]
                events_rollback: [
                    a_failed_dispatch_keeps_the_event,
                    a_failed_queued_dispatch_names_the_event,
                    a_failed_event_of_a_batch_fails_alone,
                ]
                large_batches: [
                    a_batch_over_many_chunks_moves_every_step,
                    a_partly_refused_batch_moves_the_rest,
                ]
                reopen: [every_record_reads_back_from_a_fresh_store]
                recovery: [
                    the_relay_finds_idle_claimable_steps,
                    the_stalled_sweep_finds_quiet_free_running_runs,
                    lease_run_leases_one_runnable_run,
                    concurrent_lease_runs_lease_once,
                    the_reaper_frees_expired_leases_first_expired_first,
                    concurrent_reapers_answer_each_run_once,
                ]
            }

            /// Every operation sends exactly its rows of the one budget
            /// table (`common::budgets::table`), one test per scenario.
            mod budgets {
                use crate::common::budgets as table;

                checks! {
                    table;
                    steps: [every_operation_sends_its_budget]
                    events: [every_operation_sends_its_budget]
                    leases: [every_operation_sends_its_budget]
                    recovery: [every_operation_sends_its_budget]
                    virtual_users: [every_operation_sends_its_budget]
                    retention: [every_operation_sends_its_budget]
                }
            }
        }
    };
}
pub(crate) use dialect_tests;
