//! The effect journal: before a step performs a side effect (a charge, an
//! email) it records the effect's key, so a replayed step reads the outcome
//! of the first attempt instead of performing it again. The records of
//! [`EffectJournal`](crate::ports::EffectJournal).

use serde_json::Value;

use crate::error::Error;
use crate::field;
use crate::ids::RunId;
use crate::limits::InputLimits;
use crate::time::Timestamp;

/// What [`EffectJournal::begin_effect`](crate::ports::EffectJournal::begin_effect)
/// found.
#[derive(Clone, Debug, PartialEq)]
pub enum EffectBegin {
    /// This call began the effect: perform it, then settle it.
    Started,
    /// An earlier call began it and never settled it: it may or may not
    /// have happened. Do not perform it again blindly; see
    /// [`StrandedEffect`].
    InFlight {
        /// When it was begun, on the store's clock.
        began_at: Timestamp,
    },
    /// It was performed and settled with this outcome: use it.
    Settled(Value),
}

/// An effect begun and never settled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrandedEffect {
    /// The run.
    pub run: RunId,
    /// The effect's key within the run.
    pub key: String,
    /// When it was begun, on the store's clock.
    pub began_at: Timestamp,
}

impl InputLimits {
    /// Checks an effect key and, when settling, encodes its outcome.
    pub fn check_effect_key(&self, key: &str) -> Result<(), Error> {
        self.check_key(field::EFFECT_KEY, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effect_keys_are_keys() {
        let limits = InputLimits::default();
        assert!(limits.check_effect_key("charge:1").is_ok());
        assert!(limits.check_effect_key("").is_err());
    }
}
