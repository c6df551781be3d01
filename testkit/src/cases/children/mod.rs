//! The `children` family: [`ChildRunStore`](flowstate_core::ports::ChildRunStore).

pub mod basics;
