//! flowstate-events: events with dedupe keys, matched to activations,
//! materialised into runs idempotently, dispatched now or deferred with
//! backoff and dead-lettering.
//!
//! Nothing lives here yet. The pure pieces it will build on (the event
//! dispatch backoff and the `event:{event}:{activation}` idempotency key) are
//! already in `flowstate-core`; this crate will hold the policy loops over the
//! core store ports and will never know which database is behind them.
