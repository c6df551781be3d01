//! The `children` family: [`ChildRunStore`](flowstate_core::ports::ChildRunStore).

pub mod lease_children;
