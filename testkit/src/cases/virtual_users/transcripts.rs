//! Cases for the transcript half of [`VirtualUserRunStore`]: chunks appended
//! as a run goes, numbered in order, read back one page at a time.

use std::time::Duration;

use flowstate_core::ports::VirtualUserRunStore;
use flowstate_core::{Clock, Error, TranscriptPage, VirtualUserRunId};
use serde_json::{Value, json};

use crate::Harness;
use crate::cases::support::{assert_err, race};

/// `n` entries numbered from `from`: `{"turn": i}`.
fn turns(from: u64, n: u64) -> Vec<Value> {
    (from..from + n).map(|i| json!({"turn": i})).collect()
}

/// The entries' positions and values.
fn read(page: &TranscriptPage) -> Vec<(u64, Value)> {
    page.entries
        .iter()
        .map(|e| (e.seq, e.entry.clone()))
        .collect()
}

fn numbered(from: u64, n: u64) -> Vec<(u64, Value)> {
    (from..from + n).zip(turns(from, n)).collect()
}

/// Chunks appended are numbered on in order and read back one page at a time; a full page points at the next, an exact multiple ends with an empty page.
pub async fn transcript_appends_in_order_and_pages<H: Harness>(h: &H)
where
    H::Store: VirtualUserRunStore,
{
    let store = h.store();
    let run = store.start_virtual_user_run("alice").await.unwrap().id;
    let first = h.clock().now();
    assert_eq!(store.append_transcript(run, &turns(0, 3)).await.unwrap(), 3);
    let second = h.clock().advance(Duration::from_secs(1));
    assert_eq!(store.append_transcript(run, &turns(3, 2)).await.unwrap(), 5);
    assert_eq!(
        store.append_transcript(run, &turns(5, 5)).await.unwrap(),
        10
    );
    let stored = store.get_virtual_user_run(run).await.unwrap();
    assert_eq!((stored.transcript_len, stored.updated_at), (10, second));

    let page = store.read_transcript(run, 0, 4).await.unwrap();
    assert_eq!((read(&page), page.next), (numbered(0, 4), Some(4)));
    assert_eq!(page.entries[0].at, first);
    assert_eq!(page.entries[3].at, second);
    let page = store.read_transcript(run, 4, 4).await.unwrap();
    assert_eq!((read(&page), page.next), (numbered(4, 4), Some(8)));
    let page = store.read_transcript(run, 8, 4).await.unwrap();
    assert_eq!((read(&page), page.next), (numbered(8, 2), None));

    // An exact multiple of the page size ends with an empty page.
    let page = store.read_transcript(run, 5, 5).await.unwrap();
    assert_eq!((read(&page), page.next), (numbered(5, 5), Some(10)));
    let page = store.read_transcript(run, 10, 5).await.unwrap();
    assert_eq!((read(&page), page.next), (vec![], None));

    let whole = store.read_transcript(run, 0, 0).await.unwrap();
    assert_eq!((read(&whole), whole.next), (numbered(0, 10), None));
}

/// Transcript entries keep their JSON exactly (`null`, `[]`, `0`, `false`, quotes, nesting).
pub async fn transcript_keeps_json_types<H: Harness>(h: &H)
where
    H::Store: VirtualUserRunStore,
{
    let store = h.store();
    let run = store.start_virtual_user_run("alice").await.unwrap().id;
    let entries = [
        json!(null),
        json!([]),
        json!(0),
        json!(false),
        json!("null"),
        json!({"role": "user", "text": "it's \"fine\"; DROP TABLE x", "n": [1.5, {"a": null}]}),
    ];
    store.append_transcript(run, &entries).await.unwrap();
    let page = store.read_transcript(run, 0, 0).await.unwrap();
    let values: Vec<Value> = page.entries.into_iter().map(|e| e.entry).collect();
    assert_eq!(values, entries);
}

/// An unknown run's transcript is `VirtualUserRunNotFound`; a settled run refuses appends but still reads.
pub async fn transcript_of_unknown_or_settled_run<H: Harness>(h: &H)
where
    H::Store: VirtualUserRunStore,
{
    let store = h.store();
    let unknown = VirtualUserRunId::generate();
    assert_err!(store.read_transcript(unknown, 0, 10).await, Error::VirtualUserRunNotFound(id) if id == unknown);
    assert_err!(store.append_transcript(unknown, &turns(0, 1)).await, Error::VirtualUserRunNotFound(id) if id == unknown);

    let run = store.start_virtual_user_run("alice").await.unwrap().id;
    let empty = store.read_transcript(run, 0, 10).await.unwrap();
    assert_eq!((empty.entries.len(), empty.next), (0, None));
    store.append_transcript(run, &turns(0, 2)).await.unwrap();
    store.fail_virtual_user_run(run, "reaped").await.unwrap();
    assert_err!(
        store.append_transcript(run, &turns(2, 1)).await,
        Error::VirtualUserRunSettled { run: r, .. } if r == run
    );
    let page = store.read_transcript(run, 0, 10).await.unwrap();
    assert_eq!(
        read(&page),
        numbered(0, 2),
        "a settled run's transcript still reads"
    );
    assert_eq!(
        store
            .get_virtual_user_run(run)
            .await
            .unwrap()
            .transcript_len,
        2
    );
}

/// Each run numbers its own transcript from 0.
pub async fn transcripts_are_per_run<H: Harness>(h: &H)
where
    H::Store: VirtualUserRunStore,
{
    let store = h.store();
    let a = store.start_virtual_user_run("alice").await.unwrap().id;
    let b = store.start_virtual_user_run("alice").await.unwrap().id;
    store.append_transcript(a, &turns(0, 3)).await.unwrap();
    assert_eq!(store.append_transcript(b, &turns(0, 1)).await.unwrap(), 1);
    let page = store.read_transcript(b, 0, 0).await.unwrap();
    assert_eq!(read(&page), numbered(0, 1));
}

/// 8 concurrent appends to one run take disjoint, contiguous positions, each answering its own length.
pub async fn transcript_append_race_8<H: Harness>(h: &H)
where
    H::Store: VirtualUserRunStore,
{
    const CHUNK: u64 = 4;
    let run = h.store().start_virtual_user_run("alice").await.unwrap().id;
    let lengths = race(h.store(), 8, move |store, i| async move {
        let chunk: Vec<Value> = (0..CHUNK).map(|j| json!({"task": i, "j": j})).collect();
        store
            .append_transcript(run, &chunk)
            .await
            .expect("append_transcript")
    })
    .await;
    let mut sorted = lengths.clone();
    sorted.sort_unstable();
    let expected: Vec<u64> = (1..=8).map(|n| n * CHUNK).collect();
    assert_eq!(sorted, expected, "each append answered its own length");
    let page = h.store().read_transcript(run, 0, 0).await.unwrap();
    let seqs: Vec<u64> = page.entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (0..8 * CHUNK).collect::<Vec<_>>());
    for (i, len) in lengths.iter().enumerate() {
        // Task i's chunk fills the positions just below the length it got.
        for (j, entry) in page.entries[(len - CHUNK) as usize..*len as usize]
            .iter()
            .enumerate()
        {
            assert_eq!(
                entry.entry,
                json!({"task": i, "j": j}),
                "a chunk was interleaved"
            );
        }
    }
}
