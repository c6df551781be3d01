//! The limits every backend applies to what it is given (names and keys,
//! retry delays, JSON payloads) before anything is stored, so bad input is
//! refused the same way everywhere, in the same words, before any write.
//!
//! [`InputLimits`] has one method per record a port takes (a run, a step, a
//! transition, a claim's names, a version) on top of [`InputLimits::encode`]
//! and [`InputLimits::check_key`]: a backend calls them and restates none of
//! the checks they make.

use serde_json::Value;

use crate::error::{Error, InvalidInput};
use crate::records::{NewRun, NewStep, NewWorkflowVersion, StepTransition};

/// A step checked against the limits, in the form a store writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedStep {
    /// The step's input as JSON text.
    pub input: String,
    /// The retry delay in whole milliseconds
    /// ([`RetryPolicy::retry_delay_millis`](crate::RetryPolicy::retry_delay_millis)).
    pub retry_delay_ms: Option<u32>,
}

/// The limits on input to a store: the size of JSON values and of names and
/// keys, checked with the record rules (retry delays, optional fields) by
/// one method per port input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputLimits {
    /// The largest serialised JSON value accepted, in bytes.
    pub max_value_bytes: usize,
    /// The longest run-state key, step name or workflow name, in bytes.
    pub max_key_bytes: usize,
}

impl Default for InputLimits {
    /// 1 MiB values, 255-byte keys.
    fn default() -> Self {
        Self {
            max_value_bytes: 1024 * 1024,
            max_key_bytes: 255,
        }
    }
}

impl InputLimits {
    /// Serialises `value` for storage, refusing it if it is larger than
    /// [`Self::max_value_bytes`] or holds a NUL character anywhere (in a key
    /// or a string): PostgreSQL's `jsonb` cannot store one, and a value that
    /// one backend refuses must be refused by all.
    ///
    /// `field` names what the value is, for the error.
    pub fn encode(&self, field: &'static str, value: &Value) -> Result<String, Error> {
        let text = value.to_string();
        if text.len() > self.max_value_bytes {
            return Err(Error::InvalidInput(InvalidInput::TooLarge {
                field,
                bytes: text.len(),
                limit: self.max_value_bytes,
            }));
        }
        // serde_json writes a NUL as the escape `\u0000`; an escaped
        // backslash followed by `u0000` is preceded by another backslash.
        if contains_nul_escape(&text) {
            return Err(Error::InvalidInput(InvalidInput::NulCharacter { field }));
        }
        Ok(text)
    }

    /// Checks a name or key: not empty, no NUL, at most
    /// [`Self::max_key_bytes`]. Quotes, dots and SQL are fine: keys are
    /// always bound, never spliced.
    pub fn check_key(&self, field: &'static str, key: &str) -> Result<(), Error> {
        if key.is_empty() {
            return Err(Error::InvalidInput(InvalidInput::Empty { field }));
        }
        if key.len() > self.max_key_bytes {
            return Err(Error::InvalidInput(InvalidInput::TooLarge {
                field,
                bytes: key.len(),
                limit: self.max_key_bytes,
            }));
        }
        if key.contains('\0') {
            return Err(Error::InvalidInput(InvalidInput::NulCharacter { field }));
        }
        Ok(())
    }
}

impl InputLimits {
    /// Checks a run to create (workflow, graph hash, idempotency key, input)
    /// and answers its input as JSON text. Every backend calls this before it
    /// writes, so a run one backend refuses is refused by all, in the same
    /// words.
    pub fn encode_run(&self, run: &NewRun) -> Result<String, Error> {
        self.check_key("workflow", &run.workflow)?;
        if let Some(hash) = &run.graph_hash {
            self.check_key("graph hash", hash)?;
        }
        if let Some(key) = &run.idempotency_key {
            self.check_key("idempotency key", key)?;
        }
        self.encode("run input", &run.input)
    }

    /// Checks a step to insert (name, function, input, retry delay) and
    /// answers it as a store writes it.
    pub fn encode_step(&self, step: &NewStep) -> Result<EncodedStep, Error> {
        self.check_key("step name", &step.name)?;
        if let Some(function) = &step.function {
            self.check_key("function", function)?;
        }
        let input = self.encode("step input", &step.input)?;
        let retry_delay_ms = step.retry.retry_delay_millis()?;
        Ok(EncodedStep {
            input,
            retry_delay_ms,
        })
    }

    /// Checks the payload of a step transition and answers it as JSON text:
    /// the result of `Succeeded`, the error of `Failed`, `None` for
    /// `Running` and `Scheduled`, which carry none.
    pub fn encode_transition(&self, transition: &StepTransition) -> Result<Option<String>, Error> {
        match transition {
            StepTransition::Succeeded(result) => self.encode("step result", result).map(Some),
            StepTransition::Failed(error) => self.encode("step error", error).map(Some),
            StepTransition::Running | StepTransition::Scheduled => Ok(None),
        }
    }

    /// Checks the names a claim looks up by: the step name, then the
    /// function the worker runs.
    pub fn check_claim(&self, name: &str, function: &str) -> Result<(), Error> {
        self.check_key("step name", name)?;
        self.check_key("function", function)
    }

    /// Checks a workflow version to store (workflow, graph hash, graph) and
    /// answers its graph as JSON text.
    pub fn encode_version(&self, version: &NewWorkflowVersion) -> Result<String, Error> {
        self.check_key("workflow", &version.workflow)?;
        self.check_key("graph hash", &version.graph_hash)?;
        self.encode("workflow graph", &version.graph)
    }
}

fn contains_nul_escape(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            if bytes[i + 1..].starts_with(b"u0000") {
                return true;
            }
            i += 2; // skip the escaped character, whatever it is
        } else {
            i += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn encode(value: &Value) -> Result<String, Error> {
        InputLimits::default().encode("input", value)
    }

    #[test]
    fn ordinary_values_encode_unchanged() {
        for value in [
            json!([]),
            json!(0),
            json!(false),
            json!(null),
            json!({"a": {"b": [1, "x"]}}),
        ] {
            let text = encode(&value).unwrap();
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
        }
    }

    #[test]
    fn a_nul_in_a_string_or_a_key_is_refused() {
        assert!(matches!(
            encode(&json!({"a": "x\u{0}y"})),
            Err(Error::InvalidInput(InvalidInput::NulCharacter {
                field: "input"
            }))
        ));
        assert!(encode(&json!({"k\u{0}": 1})).is_err());
    }

    #[test]
    fn an_escaped_backslash_before_u0000_text_is_not_a_nul() {
        assert!(encode(&json!("\\u0000")).is_ok());
        assert!(encode(&json!("\\\u{0}")).is_err());
    }

    #[test]
    fn an_oversized_value_is_refused_with_its_size() {
        let big = json!("x".repeat(2 * 1024 * 1024));
        match encode(&big) {
            Err(Error::InvalidInput(InvalidInput::TooLarge { bytes, limit, .. })) => {
                assert!(bytes > limit);
            }
            other => panic!("expected TooLarge, got {other:?}"),
        }
    }

    #[test]
    fn records_are_checked_whole() {
        use crate::ids::RunId;
        use crate::retry::RetryPolicy;
        use std::time::Duration;
        let limits = InputLimits::default();
        let run = NewRun::new("wf", json!({"a": 1})).with_idempotency_key("k");
        assert_eq!(limits.encode_run(&run).unwrap(), r#"{"a":1}"#);
        assert!(
            limits
                .encode_run(&NewRun::new("wf", json!(1)).with_idempotency_key(""))
                .is_err()
        );
        assert!(
            limits
                .encode_run(&NewRun::new("wf", json!(1)).with_graph_hash("h\0"))
                .is_err()
        );
        let step = NewStep::new(RunId::generate(), "s", "f", json!([])).with_retry(RetryPolicy {
            retries: 1,
            retry_delay: Some(Duration::from_micros(1_500)),
        });
        let encoded = limits.encode_step(&step).unwrap();
        assert_eq!(
            (encoded.input.as_str(), encoded.retry_delay_ms),
            ("[]", Some(1))
        );
        let mut unnamed = step.clone();
        unnamed.function = Some(String::new());
        assert!(limits.encode_step(&unnamed).is_err());
        let version = NewWorkflowVersion {
            workflow: "wf".into(),
            graph_hash: String::new(),
            graph: json!({}),
        };
        assert!(limits.encode_version(&version).is_err());
    }

    #[test]
    fn transitions_encode_their_payload_only() {
        let limits = InputLimits::default();
        let rows = [
            (StepTransition::Running, None),
            (StepTransition::Scheduled, None),
            (
                StepTransition::Succeeded(json!({"ok": true})),
                Some(r#"{"ok":true}"#),
            ),
            (StepTransition::Succeeded(json!(null)), Some("null")),
            (StepTransition::Failed(json!([1])), Some("[1]")),
        ];
        for (transition, text) in rows {
            assert_eq!(
                limits.encode_transition(&transition).unwrap().as_deref(),
                text,
                "{transition:?}"
            );
        }
    }

    #[test]
    fn a_bad_transition_payload_is_refused_by_name() {
        let limits = InputLimits {
            max_value_bytes: 16,
            ..InputLimits::default()
        };
        let big = json!("x".repeat(32));
        let rows = [
            (StepTransition::Succeeded(big.clone()), "step result"),
            (StepTransition::Failed(big), "step error"),
            (StepTransition::Succeeded(json!("\u{0}")), "step result"),
            (StepTransition::Failed(json!({"\u{0}": 1})), "step error"),
        ];
        for (transition, field) in rows {
            match limits.encode_transition(&transition) {
                Err(Error::InvalidInput(
                    InvalidInput::TooLarge { field: f, .. }
                    | InvalidInput::NulCharacter { field: f },
                )) => assert_eq!(f, field, "{transition:?}"),
                other => panic!("{transition:?}: expected a refusal, got {other:?}"),
            }
        }
    }

    #[test]
    fn claims_check_the_name_then_the_function() {
        let limits = InputLimits::default();
        let long = "k".repeat(256);
        let rows = [
            ("s1", "rpc.fn", None),
            ("", "rpc.fn", Some("step name")),
            ("s\0", "rpc.fn", Some("step name")),
            (long.as_str(), "rpc.fn", Some("step name")),
            ("s1", "", Some("function")),
            ("s1", "f\0", Some("function")),
            ("s1", long.as_str(), Some("function")),
            ("", "", Some("step name")),
        ];
        for (name, function, refused) in rows {
            let field = match limits.check_claim(name, function) {
                Ok(()) => None,
                Err(Error::InvalidInput(
                    InvalidInput::Empty { field }
                    | InvalidInput::NulCharacter { field }
                    | InvalidInput::TooLarge { field, .. },
                )) => Some(field),
                Err(other) => panic!("{name:?}, {function:?}: {other:?}"),
            };
            assert_eq!(field, refused, "{name:?}, {function:?}");
        }
    }

    #[test]
    fn key_rules() {
        let limits = InputLimits::default();
        assert!(limits.check_key("key", "a.b").is_ok());
        assert!(limits.check_key("key", "'; drop table runs; --").is_ok());
        assert!(limits.check_key("key", "say \"hi\"").is_ok());
        assert!(limits.check_key("key", "").is_err());
        assert!(limits.check_key("key", "a\0b").is_err());
        assert!(limits.check_key("key", &"k".repeat(256)).is_err());
        assert!(limits.check_key("key", &"k".repeat(255)).is_ok());
    }
}
