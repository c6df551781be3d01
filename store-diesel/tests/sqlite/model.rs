//! The model test on Sqlite: random operation sequences on `MemoryStore`
//! and on `DieselStore`, every answer compared
//! (`common::model`), each sequence on a database of its own.

use flowstate_store_diesel::Dialect;

use crate::common::model::memory_and_dialect_agree;

/// 64 sequences of up to 50 ops.
#[test]
fn memory_and_sqlite_answer_every_sequence_alike() {
    memory_and_dialect_agree(Dialect::Sqlite, 64, 50);
}
