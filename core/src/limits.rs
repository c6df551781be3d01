//! The limits every backend applies to what it is given (names and keys,
//! retry delays, JSON payloads: their size and how deep they nest) before
//! anything is stored, so bad input is refused the same way everywhere, in
//! the same words, before any write.
//!
//! [`InputLimits`] has one method per record a port takes (a run, a step, a
//! transition, a claim's names, a version) on top of [`InputLimits::encode`]
//! and [`InputLimits::check_key`]: a backend calls them and restates none of
//! the checks they make.

use serde_json::Value;

use crate::error::{Error, InvalidInput};
use crate::field;
use crate::records::{InlineStep, NewRun, NewStep, NewWorkflowVersion, StepTransition};

/// A step checked against the limits, in the form a store writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedStep {
    /// The step's input as JSON text.
    pub input: String,
    /// The retry delay in whole milliseconds
    /// ([`RetryPolicy::retry_delay_millis`](crate::RetryPolicy::retry_delay_millis)).
    pub retry_delay_ms: Option<u32>,
}

/// The deepest JSON value [`InputLimits::default`] accepts, counted as
/// [`json_depth`] counts: 64 arrays or objects inside one another.
///
/// Every dialect stores and reads back this depth: PostgreSQL's `jsonb`,
/// SQLite's `json_valid` check (1,000 levels and more) and serde_json's
/// reading of stored text, which refuses 128 levels. MySQL 8's native
/// `JSON` stops at 100 levels; MariaDB's `JSON` columns refused 32 levels
/// and more through their automatic `json_valid` check until migration
/// 000015 took it off (store-diesel's `SCHEMA.md`, "JSON depth").
pub const DEFAULT_MAX_JSON_DEPTH: usize = 64;

/// The limits on input to a store: the size and depth of JSON values and
/// the size of names and keys, checked with the record rules (retry delays,
/// optional fields) by one method per port input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputLimits {
    /// The largest serialised JSON value accepted, in bytes.
    pub max_value_bytes: usize,
    /// The longest run-state key, step name or workflow name, in bytes.
    pub max_key_bytes: usize,
    /// The deepest JSON value accepted, as [`json_depth`] counts it (a
    /// scalar is 0, `[]` is 1, `[[]]` is 2). Raising it past 100 makes
    /// values that MySQL 8 refuses, past 127 values that no backend can read
    /// back (serde_json's recursion limit): keep it at most 100.
    pub max_json_depth: usize,
}

impl Default for InputLimits {
    /// 1 MiB values nested at most [`DEFAULT_MAX_JSON_DEPTH`] deep, 255-byte
    /// keys.
    fn default() -> Self {
        Self {
            max_value_bytes: 1024 * 1024,
            max_key_bytes: 255,
            max_json_depth: DEFAULT_MAX_JSON_DEPTH,
        }
    }
}

impl InputLimits {
    /// Serialises `value` for storage, refusing it if it nests deeper than
    /// [`Self::max_json_depth`], is larger than [`Self::max_value_bytes`] or
    /// holds a NUL character anywhere (in a key or a string): PostgreSQL's
    /// `jsonb` cannot store one, and a value that one backend refuses must
    /// be refused by all.
    ///
    /// The depth is checked first, without recursion, because serialising
    /// recurses once per level: a value a million levels deep is refused,
    /// not a stack overflow.
    ///
    /// `field` names what the value is, for the error. Every method of
    /// this type that takes JSON encodes it here.
    pub fn encode(&self, field: &'static str, value: &Value) -> Result<String, Error> {
        self.check_depth(field, value)?;
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

    /// Refuses `value` if it nests deeper than [`Self::max_json_depth`]
    /// ([`InvalidInput::TooDeep`]), measured by [`json_depth`], which stops
    /// one level past the limit.
    pub fn check_depth(&self, field: &'static str, value: &Value) -> Result<(), Error> {
        if json_depth(value, self.max_json_depth) > self.max_json_depth {
            return Err(Error::InvalidInput(InvalidInput::TooDeep {
                field,
                limit: self.max_json_depth,
            }));
        }
        Ok(())
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
        self.check_key(field::WORKFLOW, &run.workflow)?;
        if let Some(hash) = &run.graph_hash {
            self.check_key(field::GRAPH_HASH, hash)?;
        }
        if let Some(key) = &run.idempotency_key {
            self.check_key(field::IDEMPOTENCY_KEY, key)?;
        }
        self.encode(field::RUN_INPUT, &run.input)
    }

    /// Checks a step to insert (name, function, input, retry delay) and
    /// answers it as a store writes it.
    pub fn encode_step(&self, step: &NewStep) -> Result<EncodedStep, Error> {
        self.check_key(field::STEP_NAME, &step.name)?;
        if let Some(function) = &step.function {
            self.check_key(field::FUNCTION, function)?;
        }
        let input = self.encode(field::STEP_INPUT, &step.input)?;
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
            StepTransition::Succeeded(result) => self.encode(field::STEP_RESULT, result).map(Some),
            StepTransition::Failed(error) => self.encode(field::STEP_ERROR, error).map(Some),
            StepTransition::Running | StepTransition::Scheduled => Ok(None),
        }
    }

    /// Checks the names a claim looks up by: the step name, then the
    /// function the worker runs.
    pub fn check_claim(&self, name: &str, function: &str) -> Result<(), Error> {
        self.check_key(field::STEP_NAME, name)?;
        self.check_key(field::FUNCTION, function)
    }

    /// Checks free text kept as it is (a version's source, a run's stop
    /// reason): not empty, no NUL, at most [`Self::max_value_bytes`].
    pub fn check_text(&self, field: &'static str, text: &str) -> Result<(), Error> {
        if text.is_empty() {
            return Err(InvalidInput::Empty { field }.into());
        }
        if text.len() > self.max_value_bytes {
            return Err(InvalidInput::TooLarge {
                field,
                bytes: text.len(),
                limit: self.max_value_bytes,
            }
            .into());
        }
        if text.contains('\0') {
            return Err(InvalidInput::NulCharacter { field }.into());
        }
        Ok(())
    }

    /// Checks a workflow version to store (workflow, graph hash, graph) and
    /// answers its graph as JSON text.
    pub fn encode_version(&self, version: &NewWorkflowVersion) -> Result<String, Error> {
        self.check_key(field::WORKFLOW, &version.workflow)?;
        self.check_key(field::GRAPH_HASH, &version.graph_hash)?;
        self.encode(field::WORKFLOW_GRAPH, &version.graph)
    }
}

/// How deep `value` nests: the number of arrays and objects along its
/// deepest path. A scalar (null, a boolean, a number, a string) is 0;
/// `[]`, `{}` and `[1, "x"]` are 1; `[[]]`, `[1, {}]` and `{"a": [1]}` are
/// 2. serde_json's recursion limit and MariaDB's `json_valid` count levels
/// the same way (serde_json reads 127, `json_valid` accepts 31).
///
/// The walk keeps its own stack, one entry per open array or object, never
/// recursion, and stops as soon as the depth passes `stop_after`: a value
/// deeper than that answers `stop_after + 1`, whatever its real depth, so a
/// value of any depth costs at most `stop_after + 1` stack entries. Pass
/// `usize::MAX` for the exact depth.
pub fn json_depth(value: &Value, stop_after: usize) -> usize {
    /// The children of one open array or object still to visit.
    enum Open<'a> {
        Array(std::slice::Iter<'a, Value>),
        Object(serde_json::map::Values<'a>),
    }
    fn open(value: &Value) -> Option<Open<'_>> {
        match value {
            Value::Array(items) => Some(Open::Array(items.iter())),
            Value::Object(fields) => Some(Open::Object(fields.values())),
            _ => None,
        }
    }

    let Some(root) = open(value) else {
        return 0;
    };
    if stop_after == 0 {
        return 1;
    }
    let mut stack = vec![root];
    let mut deepest = 1;
    while let Some(top) = stack.last_mut() {
        let next = match top {
            Open::Array(items) => items.next(),
            Open::Object(fields) => fields.next(),
        };
        match next {
            None => {
                stack.pop();
            }
            Some(child) => {
                if let Some(inner) = open(child) {
                    if stack.len() == stop_after {
                        return stop_after + 1;
                    }
                    stack.push(inner);
                    deepest = deepest.max(stack.len());
                }
            }
        }
    }
    deepest
}

/// Drops `value` without recursion, one array or object at a time.
///
/// serde_json drops a value recursively, a few frames per level: about
/// 15,000 levels overflow a 2 MiB stack (a tokio worker's). serde_json's
/// parser never builds such a value (it stops at 128 levels), but code can;
/// whoever holds one that [`json_depth`] found too deep can drop it here.
pub fn dismantle_json(value: Value) {
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::Array(items) => pending.extend(items),
            Value::Object(fields) => pending.extend(fields.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// Input a store takes by value that carries JSON: dropped without
/// recursion ([`dismantle_json`]) when it is refused, since a value refused
/// for its depth may be too deep to drop any other way.
pub trait Dismantle {
    /// Drops `self`, its JSON one array or object at a time.
    fn dismantle(self);
}

impl Dismantle for Value {
    fn dismantle(self) {
        dismantle_json(self);
    }
}

impl<T: Dismantle> Dismantle for Vec<T> {
    fn dismantle(self) {
        self.into_iter().for_each(Dismantle::dismantle);
    }
}

impl<A, T: Dismantle> Dismantle for (A, T) {
    fn dismantle(self) {
        self.1.dismantle();
    }
}

impl Dismantle for NewRun {
    fn dismantle(self) {
        dismantle_json(self.input);
    }
}

impl Dismantle for NewStep {
    fn dismantle(self) {
        dismantle_json(self.input);
    }
}

impl Dismantle for StepTransition {
    fn dismantle(self) {
        match self {
            Self::Succeeded(value) | Self::Failed(value) => dismantle_json(value),
            Self::Running | Self::Scheduled => {}
        }
    }
}

impl Dismantle for InlineStep {
    fn dismantle(self) {
        self.step.dismantle();
        self.outcome.into_transition().dismantle();
    }
}

impl Dismantle for NewWorkflowVersion {
    fn dismantle(self) {
        dismantle_json(self.graph);
    }
}

/// Runs `check` on `input` and answers both; when `check` refuses it, drops
/// `input` without recursion ([`Dismantle`]) before answering the refusal:
/// a store taking JSON by value checks it this way, so input refused for
/// its depth, however deep, never overflows the stack as it is dropped.
pub fn checked<T: Dismantle, R>(
    input: T,
    check: impl FnOnce(&T) -> Result<R, Error>,
) -> Result<(T, R), Error> {
    match check(&input) {
        Ok(checked) => Ok((input, checked)),
        Err(err) => {
            input.dismantle();
            Err(err)
        }
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

    /// `levels` arrays inside one another around `inner`, built in a loop.
    fn nested_arrays(levels: usize, inner: Value) -> Value {
        let mut value = inner;
        for _ in 0..levels {
            value = Value::Array(vec![value]);
        }
        value
    }

    /// `levels` objects inside one another (`{"k": {"k": ...}}`).
    fn nested_objects(levels: usize) -> Value {
        let mut value = json!(1);
        for _ in 0..levels {
            let mut fields = serde_json::Map::new();
            fields.insert("k".to_owned(), value);
            value = Value::Object(fields);
        }
        value
    }

    fn too_deep(result: Result<impl std::fmt::Debug, Error>) -> (&'static str, usize) {
        match result {
            Err(Error::InvalidInput(InvalidInput::TooDeep { field, limit })) => (field, limit),
            other => panic!("expected TooDeep, got {other:?}"),
        }
    }

    #[test]
    fn depth_counts_arrays_and_objects_along_the_deepest_path() {
        let rows = [
            (json!(null), 0),
            (json!("[[[["), 0),
            (json!(1.5), 0),
            (json!(true), 0),
            (json!([]), 1),
            (json!({}), 1),
            (json!([1, "x", null]), 1),
            (json!({"a": 1, "b": "c"}), 1),
            (json!([[]]), 2),
            (json!([1, {}]), 2),
            (json!({"a": [1]}), 2),
            (json!([[], [[]], {"x": [[[]]]}, 1]), 5),
            (json!({"a": {"b": {"c": {}}}, "z": []}), 4),
            (json!([[[[1]]], [[[[[2]]]]], [[3]]]), 6),
        ];
        for (value, depth) in rows {
            assert_eq!(json_depth(&value, usize::MAX), depth, "{value}");
            // Stopping exactly at the depth changes nothing; one below
            // answers one past where it stopped.
            assert_eq!(json_depth(&value, depth), depth, "{value}");
            if depth > 0 {
                assert_eq!(json_depth(&value, depth - 1), depth, "{value}");
            }
        }
    }

    #[test]
    fn depth_stops_one_past_the_limit() {
        let deep = nested_arrays(1_000, json!(1));
        assert_eq!(json_depth(&deep, 0), 1);
        assert_eq!(json_depth(&deep, 3), 4);
        assert_eq!(json_depth(&deep, 999), 1_000);
        assert_eq!(json_depth(&deep, 1_000), 1_000);
        assert_eq!(json_depth(&deep, usize::MAX), 1_000);
        assert_eq!(json_depth(&json!(7), 0), 0);
    }

    #[test]
    fn the_limit_is_inclusive_for_arrays_and_objects() {
        let limits = InputLimits::default();
        assert_eq!(limits.max_json_depth, DEFAULT_MAX_JSON_DEPTH);
        for at_limit in [
            nested_arrays(DEFAULT_MAX_JSON_DEPTH, json!("leaf")),
            nested_arrays(DEFAULT_MAX_JSON_DEPTH - 1, json!({})),
            nested_objects(DEFAULT_MAX_JSON_DEPTH),
        ] {
            assert_eq!(json_depth(&at_limit, usize::MAX), DEFAULT_MAX_JSON_DEPTH);
            let text = limits.encode("input", &at_limit).unwrap();
            // What is accepted reads back: serde_json's reader refuses 128.
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), at_limit);
        }
        for over in [
            nested_arrays(DEFAULT_MAX_JSON_DEPTH + 1, json!("leaf")),
            nested_arrays(DEFAULT_MAX_JSON_DEPTH, json!({})),
            nested_objects(DEFAULT_MAX_JSON_DEPTH + 1),
            json!({"a": nested_arrays(DEFAULT_MAX_JSON_DEPTH, json!(1))}),
        ] {
            assert_eq!(
                too_deep(limits.encode("input", &over)),
                ("input", DEFAULT_MAX_JSON_DEPTH)
            );
        }
    }

    #[test]
    fn serde_json_reads_back_up_to_127_levels() {
        // Why the limit must stay below 128 on every backend: stored text is
        // read back with serde_json, whose recursion limit refuses 128.
        let read = |levels: usize| {
            let text = format!("{}{}", "[".repeat(levels), "]".repeat(levels));
            serde_json::from_str::<Value>(&text).map(dismantle_json)
        };
        assert!(read(127).is_ok());
        assert!(read(128).is_err());
    }

    #[test]
    fn wide_values_are_as_deep_as_their_deepest_branch() {
        let limits = InputLimits::default();
        let wide = Value::Array((0..100_000).map(|i| json!(i)).collect());
        assert_eq!(json_depth(&wide, usize::MAX), 1);
        assert!(limits.encode("input", &wide).is_ok());
        // Branches one level short of the limit, in an array and in an
        // object: exactly at the limit.
        let branch = nested_arrays(DEFAULT_MAX_JSON_DEPTH - 2, json!([1, 2]));
        assert_eq!(json_depth(&branch, usize::MAX), DEFAULT_MAX_JSON_DEPTH - 1);
        let mut items: Vec<Value> = (0..1_000).map(|_| branch.clone()).collect();
        let mut fields = serde_json::Map::new();
        for i in 0..100 {
            fields.insert(format!("k{i}"), branch.clone());
        }
        assert!(limits.encode("input", &Value::Array(items.clone())).is_ok());
        assert!(
            limits
                .encode("input", &Value::Object(fields.clone()))
                .is_ok()
        );
        // One branch a level deeper, last, after every shallow one.
        items.push(nested_objects(DEFAULT_MAX_JSON_DEPTH));
        fields.insert("last".to_owned(), nested_objects(DEFAULT_MAX_JSON_DEPTH));
        for over in [Value::Array(items), Value::Object(fields)] {
            assert_eq!(json_depth(&over, usize::MAX), DEFAULT_MAX_JSON_DEPTH + 1);
            assert_eq!(
                too_deep(limits.encode("input", &over)),
                ("input", DEFAULT_MAX_JSON_DEPTH)
            );
        }
    }

    #[test]
    fn a_million_levels_are_refused_without_recursion() {
        let limits = InputLimits::default();
        for deep in [
            nested_arrays(1_000_000, json!(null)),
            nested_objects(1_000_000),
        ] {
            assert_eq!(json_depth(&deep, usize::MAX), 1_000_000);
            // The depth is checked before the value is serialised (which
            // would recurse a million times), even when it is too large
            // too.
            let small = InputLimits {
                max_value_bytes: 8,
                ..limits
            };
            for limits in [limits, small] {
                assert_eq!(too_deep(limits.encode("input", &deep)).0, "input");
            }
            dismantle_json(deep);
        }
    }

    #[test]
    fn every_json_of_every_record_is_depth_checked() {
        use crate::children::NewChild;
        use crate::events::{NewEvent, NewPublishedVersion};
        use crate::ids::{RunId, WorkflowId};
        let limits = InputLimits {
            max_json_depth: 3,
            ..InputLimits::default()
        };
        let deep = || json!([[[[1]]]]);
        let fine = || json!([[[1]]]);
        let field = |result| too_deep(result).0;
        assert_eq!(
            field(limits.encode_run(&NewRun::new("wf", deep())).map(drop)),
            "run input"
        );
        assert!(limits.encode_run(&NewRun::new("wf", fine())).is_ok());
        let run = RunId::generate();
        assert_eq!(
            field(
                limits
                    .encode_step(&NewStep::new(run, "s", "f", deep()))
                    .map(drop)
            ),
            "step input"
        );
        assert_eq!(
            field(
                limits
                    .encode_transition(&StepTransition::Succeeded(deep()))
                    .map(drop)
            ),
            "step result"
        );
        assert_eq!(
            field(
                limits
                    .encode_transition(&StepTransition::Failed(deep()))
                    .map(drop)
            ),
            "step error"
        );
        let version = NewWorkflowVersion {
            workflow: "wf".into(),
            graph_hash: "h".into(),
            graph: deep(),
        };
        assert_eq!(
            field(limits.encode_version(&version).map(drop)),
            "workflow graph"
        );
        assert_eq!(
            field(
                limits
                    .encode_children(run, vec![NewChild::new("k", "wf", deep())])
                    .map(drop)
            ),
            "child input"
        );
        assert_eq!(
            field(limits.encode_transcript(&[fine(), deep()]).map(drop)),
            "transcript entry"
        );
        assert_eq!(
            field(
                limits
                    .encode_event(&NewEvent::new("a", "s", "t", deep()))
                    .map(drop)
            ),
            "event data"
        );
        let mut event = NewEvent::new("a", "s", "t", fine());
        event.context = deep();
        assert_eq!(
            field(limits.encode_event(&event).map(drop)),
            "event context"
        );
        let published = NewPublishedVersion {
            workflow: WorkflowId::generate(),
            hash: "h".into(),
            definition: deep(),
        };
        assert_eq!(
            field(limits.encode_published_version(&published).map(drop)),
            "workflow definition"
        );
    }
}
