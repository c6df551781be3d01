//! [`RunStore::list_runs`]: newest first by `(created_at, id)`, filtered,
//! one keyset page at a time.

use std::time::Duration;

use flowstate_core::ports::RunStore;
use flowstate_core::{NewRun, Run, RunCursor, RunId, RunQuery, RunStatus};
use serde_json::json;

use crate::Harness;
use crate::cases::support::new_run;

/// `n` runs of `wf`, one millisecond apart, oldest first.
async fn runs_apart<H: Harness>(h: &H, n: usize) -> Vec<Run> {
    let mut runs = Vec::new();
    for _ in 0..n {
        h.clock().advance(Duration::from_millis(1));
        runs.push(new_run(h).await);
    }
    runs
}

fn ids(runs: &[Run]) -> Vec<RunId> {
    runs.iter().map(|r| r.id).collect()
}

/// Reads every page of `query`, checking each page's `next`.
async fn all_pages<H: Harness>(h: &H, mut query: RunQuery) -> Vec<Vec<RunId>> {
    let mut pages = Vec::new();
    loop {
        let page = h.store().list_runs(&query).await.unwrap();
        let full = page.items.len() == query.effective_limit() as usize;
        let expected_next = full.then(|| RunCursor::after(page.items.last().unwrap()));
        assert_eq!(
            page.next, expected_next,
            "next is set exactly when the page is full"
        );
        pages.push(ids(&page.items));
        match page.next {
            Some(cursor) => query.cursor = Some(cursor),
            None => return pages,
        }
        assert!(pages.len() < 100, "the listing does not end");
    }
}

/// An empty store lists nothing, with no next page.
pub async fn list_runs_empty<H: Harness>(h: &H) {
    let page = h.store().list_runs(&RunQuery::default()).await.unwrap();
    assert!(page.items.is_empty());
    assert_eq!(page.next, None);
}

/// Runs are listed newest first.
pub async fn list_runs_newest_first<H: Harness>(h: &H) {
    let runs = runs_apart(h, 4).await;
    let page = h.store().list_runs(&RunQuery::default()).await.unwrap();
    let mut expected = ids(&runs);
    expected.reverse();
    assert_eq!(ids(&page.items), expected);
    assert_eq!(page.items[0], runs[3]);
    assert_eq!(page.next, None);
}

/// Runs created in the same microsecond are listed by id, descending.
pub async fn list_runs_breaks_ties_by_id<H: Harness>(h: &H) {
    let mut expected = Vec::new();
    for _ in 0..5 {
        expected.push(new_run(h).await.id);
    }
    expected.sort_unstable_by(|a, b| b.cmp(a));
    let page = h.store().list_runs(&RunQuery::default()).await.unwrap();
    assert_eq!(ids(&page.items), expected);
}

/// Pages follow each other through the cursor, each run exactly once; `next`
/// is set when a page is full.
pub async fn list_runs_pages_through_cursor<H: Harness>(h: &H) {
    let runs = runs_apart(h, 5).await;
    let query = RunQuery {
        limit: 2,
        ..RunQuery::default()
    };
    let pages = all_pages(h, query).await;
    let r = ids(&runs);
    assert_eq!(pages, vec![vec![r[4], r[3]], vec![r[2], r[1]], vec![r[0]]]);
}

/// When the runs fill the last page exactly, one more (empty) page ends the
/// listing.
pub async fn list_runs_exact_multiple_ends_with_empty_page<H: Harness>(h: &H) {
    let runs = runs_apart(h, 4).await;
    let query = RunQuery {
        limit: 2,
        ..RunQuery::default()
    };
    let pages = all_pages(h, query).await;
    let r = ids(&runs);
    assert_eq!(pages, vec![vec![r[3], r[2]], vec![r[1], r[0]], vec![]]);
}

/// Paging through runs that share a creation time still yields each once,
/// in id order.
pub async fn list_runs_pages_through_ties<H: Harness>(h: &H) {
    let mut expected = Vec::new();
    for _ in 0..7 {
        expected.push(new_run(h).await.id);
    }
    expected.sort_unstable_by(|a, b| b.cmp(a));
    let query = RunQuery {
        limit: 3,
        ..RunQuery::default()
    };
    let pages = all_pages(h, query).await;
    assert_eq!(pages.len(), 3);
    assert_eq!(pages.concat(), expected);
}

/// A limit of 0 reads as [`RunQuery::DEFAULT_LIMIT`].
pub async fn list_runs_default_limit<H: Harness>(h: &H) {
    let runs = runs_apart(h, RunQuery::DEFAULT_LIMIT as usize + 1).await;
    let page = h.store().list_runs(&RunQuery::default()).await.unwrap();
    assert_eq!(page.items.len(), RunQuery::DEFAULT_LIMIT as usize);
    assert_eq!(page.items[0].id, runs.last().unwrap().id);
    assert_eq!(page.next, Some(RunCursor::after(&runs[1])));
}

/// The workflow, status and parent filters select exactly their runs, alone
/// and together.
pub async fn list_runs_filters<H: Harness>(h: &H) {
    let store = h.store();
    let parent = new_run(h).await;
    h.clock().advance(Duration::from_millis(1));
    let a = store
        .create_run(NewRun::new("a", json!(1)))
        .await
        .unwrap()
        .record;
    h.clock().advance(Duration::from_millis(1));
    let b = NewRun::new("b", json!(1)).with_parent(parent.id);
    let b = store.create_run(b).await.unwrap().record;
    h.clock().advance(Duration::from_millis(1));
    let b2 = NewRun::new("b", json!(1)).with_parent(parent.id);
    let b2 = store.create_run(b2).await.unwrap().record;
    store
        .set_run_status(b2.id, RunStatus::Failed)
        .await
        .unwrap();
    store.set_run_status(a.id, RunStatus::Failed).await.unwrap();

    let list = |query: RunQuery| async move { ids(&store.list_runs(&query).await.unwrap().items) };
    let by_workflow = RunQuery {
        workflow: Some("b".into()),
        ..RunQuery::default()
    };
    assert_eq!(list(by_workflow).await, vec![b2.id, b.id]);
    let by_status = RunQuery {
        status: Some(RunStatus::Failed),
        ..RunQuery::default()
    };
    assert_eq!(list(by_status).await, vec![b2.id, a.id]);
    let by_parent = RunQuery {
        parent: Some(parent.id),
        ..RunQuery::default()
    };
    assert_eq!(list(by_parent).await, vec![b2.id, b.id]);
    let all_three = RunQuery {
        workflow: Some("b".into()),
        status: Some(RunStatus::Running),
        parent: Some(parent.id),
        ..RunQuery::default()
    };
    assert_eq!(list(all_three).await, vec![b.id]);
    let nothing = RunQuery {
        workflow: Some("zz".into()),
        ..RunQuery::default()
    };
    assert_eq!(list(nothing).await, Vec::<RunId>::new());
}

/// A limit over [`RunQuery::MAX_LIMIT`], over more runs than the cap, reads
/// as the cap: a full page of exactly that many, and a cursor to go on.
pub async fn list_runs_caps_the_page<H: Harness>(h: &H) {
    let cap = RunQuery::MAX_LIMIT as usize;
    let runs = runs_apart(h, cap + 1).await;
    let query = RunQuery {
        limit: RunQuery::MAX_LIMIT * 5,
        ..RunQuery::default()
    };
    let page = h.store().list_runs(&query).await.unwrap();
    assert_eq!(page.items.len(), cap);
    assert_eq!(page.items[0].id, runs[cap].id);
    assert_eq!(page.next, Some(RunCursor::after(&runs[1])));
    let rest = RunQuery {
        cursor: page.next,
        ..query
    };
    assert_eq!(
        ids(&h.store().list_runs(&rest).await.unwrap().items),
        [runs[0].id]
    );
}

/// The parent filter, with children of two parents: each parent lists
/// exactly its own children, newest first.
pub async fn list_runs_parent_filter_two_parents<H: Harness>(h: &H) {
    let store = h.store();
    let a = new_run(h).await;
    let b = new_run(h).await;
    let mut children = Vec::new();
    for parent in [a.id, b.id, a.id, b.id, a.id] {
        h.clock().advance(Duration::from_millis(1));
        let child = NewRun::new("child", json!({})).with_parent(parent);
        children.push(store.create_run(child).await.unwrap().record.id);
    }
    let of = |parent| RunQuery {
        parent: Some(parent),
        ..RunQuery::default()
    };
    let listed =
        |query: RunQuery| async move { ids(&store.list_runs(&query).await.unwrap().items) };
    assert_eq!(
        listed(of(a.id)).await,
        [children[4], children[2], children[0]]
    );
    assert_eq!(listed(of(b.id)).await, [children[3], children[1]]);
}

/// Pages of two through runs made three to a microsecond: the cursor at a
/// timestamp that several runs share goes on by id, never skips or repeats.
pub async fn list_runs_pages_through_mixed_ties<H: Harness>(h: &H) {
    let mut expected = Vec::new();
    for group in [3, 3, 1] {
        h.clock().advance(Duration::from_millis(1));
        let mut made = Vec::new();
        for _ in 0..group {
            made.push(new_run(h).await.id);
        }
        made.sort_unstable_by(|a, b| b.cmp(a));
        expected.splice(0..0, made);
    }
    let query = RunQuery {
        limit: 2,
        ..RunQuery::default()
    };
    let pages = all_pages(h, query).await;
    assert_eq!(pages.len(), 4);
    assert_eq!(pages.concat(), expected);
}
