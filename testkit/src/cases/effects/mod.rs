//! The `effects` family: [`EffectJournal`](flowstate_core::ports::EffectJournal).

pub mod basics;
