//! Pruning virtual-user runs: finished runs past the window go with their
//! transcripts; a running one, however old, stays with its transcript.

use flowstate_core::ports::VirtualUserRunStore;
use flowstate_core::{Error, PruneKind, VirtualUserRunId};
use serde_json::json;

use super::{PAST_WINDOW, RetentionBackend, prunable, prune};
use crate::LeaseHarness;
use crate::cases::support::assert_err;

/// Completed and failed runs settled before the window are pruned, with
/// their transcripts; a running run and one finished within the window
/// stay, transcripts and all.
pub async fn finished_virtual_user_runs_are_pruned_with_transcripts<H: LeaseHarness>(h: &H)
where
    H::Store: RetentionBackend,
{
    let store = h.store();
    let mut runs = Vec::new();
    for persona in ["done", "failed", "running", "young"] {
        let run = store.start_virtual_user_run(persona).await.unwrap();
        store
            .append_transcript(run.id, &[json!({"say": "hi"}), json!({"say": "bye"})])
            .await
            .unwrap();
        runs.push(run.id);
    }
    store
        .complete_virtual_user_run(runs[0], &json!({"ok": true}))
        .await
        .unwrap();
    store.fail_virtual_user_run(runs[1], "lost").await.unwrap();
    h.clock().advance(PAST_WINDOW);
    store
        .complete_virtual_user_run(runs[3], &json!({}))
        .await
        .unwrap();

    assert_eq!(prunable(h, PruneKind::VirtualUserRuns).await, 2);
    assert_eq!(prune(h, PruneKind::VirtualUserRuns, 1).await, 1);
    assert_eq!(prune(h, PruneKind::VirtualUserRuns, 100).await, 1);
    assert_eq!(prune(h, PruneKind::VirtualUserRuns, 100).await, 0);
    for id in &runs[..2] {
        let id: VirtualUserRunId = *id;
        assert_err!(
            store.get_virtual_user_run(id).await,
            Error::VirtualUserRunNotFound(missing) if missing == id
        );
        assert_err!(
            store.read_transcript(id, 0, 10).await,
            Error::VirtualUserRunNotFound(missing) if missing == id
        );
    }
    for id in &runs[2..] {
        let page = store.read_transcript(*id, 0, 10).await.unwrap();
        assert_eq!(page.entries.len(), 2);
    }
    // Runs are not virtual-user runs, nor the other way round.
    assert_eq!(prunable(h, PruneKind::Runs).await, 0);
}
