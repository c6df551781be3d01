//! What a failed insert of child runs means: a foreign-key violation is a
//! parent that does not exist.

use diesel::result::Error as DieselError;
use flowstate_core::{Error, RunId};

use crate::error::{backend, is_foreign_key_violation};

/// `err`, from inserting children of `parent`, as the port answers it.
pub(crate) fn missing_parent(parent: RunId, err: DieselError) -> Error {
    if is_foreign_key_violation(&err) {
        Error::RunNotFound(parent)
    } else {
        backend("create_children", err)
    }
}
