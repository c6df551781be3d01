//! [`RunStore::set_run_status_with_output`]: a run's output, written with
//! its status in one guarded write, kept by moves that carry none; and
//! [`RunStore::list_workflow_names`].

use flowstate_core::error::InvalidInput;
use flowstate_core::ports::RunStore;
use flowstate_core::{Error, InputLimits, NewRun, RunId, RunQuery, RunStatus};
use serde_json::json;

use crate::Harness;
use crate::cases::support::{assert_err, new_run, run_in};

/// An output written with a status reads back exactly from every read
/// (`get_run`, `list_runs`); JSON `null` is a value.
pub async fn run_output_round_trips<H: Harness>(h: &H) {
    let run = new_run(h).await;
    assert_eq!(run.output, None);
    let output = json!({"total": 3, "items": [1, "two", null, false], "nested": {"x": []}});
    let moved = h
        .store()
        .set_run_status_with_output(run.id, RunStatus::Completed, &output)
        .await
        .unwrap();
    assert_eq!(moved.status, RunStatus::Completed);
    assert_eq!(moved.output.as_ref(), Some(&output));
    assert_eq!(h.store().get_run(run.id).await.unwrap(), moved);
    let listed = h.store().list_runs(&RunQuery::default()).await.unwrap();
    assert_eq!(listed.items, vec![moved]);

    let other = new_run(h).await;
    let moved = h
        .store()
        .set_run_status_with_output(other.id, RunStatus::Failed, &json!(null))
        .await
        .unwrap();
    assert_eq!(moved.output, Some(json!(null)));
    assert_eq!(
        h.store().get_run(other.id).await.unwrap().output,
        Some(json!(null))
    );
}

/// A move without an output keeps the stored one; a second output
/// replaces the first.
pub async fn run_output_is_kept_and_replaced<H: Harness>(h: &H) {
    let run = new_run(h).await;
    h.store()
        .set_run_status_with_output(run.id, RunStatus::Suspended, &json!({"partial": 1}))
        .await
        .unwrap();
    let resumed = h
        .store()
        .set_run_status(run.id, RunStatus::Running)
        .await
        .unwrap();
    assert_eq!(resumed.output, Some(json!({"partial": 1})));
    let done = h
        .store()
        .set_run_status_with_output(run.id, RunStatus::Completed, &json!("done"))
        .await
        .unwrap();
    assert_eq!(done.output, Some(json!("done")));
    assert_eq!(h.store().get_run(run.id).await.unwrap(), done);
}

/// An illegal move carrying an output is refused and writes neither the
/// status nor the output; an unknown run is `RunNotFound`; an output over
/// the limits is `InvalidInput` and writes nothing.
pub async fn run_output_guards<H: Harness>(h: &H) {
    let settled = run_in(h, RunStatus::Completed).await;
    assert_err!(
        h.store()
            .set_run_status_with_output(settled.id, RunStatus::Running, &json!(1))
            .await,
        Error::IllegalRunTransition { run, .. } if run == settled.id
    );
    assert_eq!(h.store().get_run(settled.id).await.unwrap(), settled);

    let missing = RunId::generate();
    assert_err!(
        h.store()
            .set_run_status_with_output(missing, RunStatus::Completed, &json!(1))
            .await,
        Error::RunNotFound(id) if id == missing
    );

    let run = new_run(h).await;
    let too_big = json!("x".repeat(InputLimits::default().max_value_bytes + 1));
    assert_err!(
        h.store()
            .set_run_status_with_output(run.id, RunStatus::Completed, &too_big)
            .await,
        Error::InvalidInput(InvalidInput::TooLarge {
            field: "run output",
            ..
        })
    );
    assert_eq!(h.store().get_run(run.id).await.unwrap(), run);
}

/// The workflow names with runs, each once, sorted byte for byte; a name
/// whose runs are all deleted is gone.
pub async fn list_workflow_names_distinct_sorted<H: Harness>(h: &H) {
    assert_eq!(
        h.store().list_workflow_names().await.unwrap(),
        Vec::<String>::new()
    );
    let mut ids = Vec::new();
    for workflow in ["orders", "Billing", "orders", "a b", "orders"] {
        let run = h
            .store()
            .create_run(NewRun::new(workflow, json!(null)))
            .await
            .unwrap()
            .record;
        ids.push((workflow, run.id));
    }
    assert_eq!(
        h.store().list_workflow_names().await.unwrap(),
        vec!["Billing", "a b", "orders"]
    );
    for (workflow, id) in &ids {
        if *workflow == "orders" {
            h.store().delete_run(*id).await.unwrap();
        }
    }
    assert_eq!(
        h.store().list_workflow_names().await.unwrap(),
        vec!["Billing", "a b"]
    );
}
