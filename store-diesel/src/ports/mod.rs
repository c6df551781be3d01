//! Every port of `flowstate-core` for [`DieselStore`], one file per port
//! family (`impl <Port> for DieselStore`), written once for all three
//! dialects: the typed queries run through `on_connection!`
//! (`crate::backend`), which binds a pooled connection of whichever dialect
//! the store speaks and monomorphises the same diesel DSL for each. The hot
//! writes that truly differ (claims, transitions, step inserts, batches,
//! reaps, retention's deletes) are handed to the dialect modules through the one seam, the
//! `crate::dialect::Dialect` trait, which `by_dialect!` dispatches on; a
//! cold write that a dialect spells its own way (`RETURNING`, `ON CONFLICT
//! (target)`, the transaction) is a method of `crate::dialect::Connection`
//! called on the pooled connection (`conn.move_run(..)`). No file here
//! names a dialect module nor branches on which dialect it runs on.
//!
//! [`DieselStore`]: crate::DieselStore

mod batch;
mod children;
mod definitions;
mod effects;
mod emit_batch;
mod event_queue;
mod events;
mod fenced;
mod inline_steps;
mod leases;
mod recovery;
mod retention;
mod runs;
mod state;
mod steps;
mod versions;
mod virtual_users;
mod waits;
