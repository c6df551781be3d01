//! The `definitions` family: [`DefinitionStore`](flowstate_core::ports::DefinitionStore).

pub mod basics;
