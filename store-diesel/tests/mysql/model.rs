//! The model test on Mysql: random operation sequences on `MemoryStore`
//! and on `DieselStore`, every answer compared
//! (`common::model`), each sequence on a database of its own.

use flowstate_store_diesel::Dialect;

use crate::common::model::memory_and_dialect_agree;

/// 24 sequences of up to 40 ops.
#[test]
fn memory_and_mysql_answer_every_sequence_alike() {
    memory_and_dialect_agree(Dialect::Mysql, 24, 40);
}
