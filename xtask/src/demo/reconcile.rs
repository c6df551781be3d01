//! Stranded effects of settled runs: a worker began an effect and crashed
//! before settling it, and no later attempt came to resolve it because the
//! run was settled meanwhile (a customer cancelled the order while its
//! step's claim was running out). Nothing will ever come back for such an
//! effect, so once the session's runs are settled this pass asks the
//! provider, as `steps` does for a live run: an effect the provider
//! performed is settled with its receipt, one it never saw is settled as
//! abandoned (never performed now: its run is over).
//!
//! Leans on `EffectJournal::stranded_effects` (every effect begun and never
//! settled, on the store's clock) and `settle_effect` (the first outcome
//! stays, so a pass racing a late worker changes nothing).

use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Result;
use flowstate_core::ports::EffectJournal;
use flowstate_store_diesel::DieselStore;
use serde_json::json;

use super::engine::Shared;
use super::provider::Provider;
use super::verify;

/// Settles every stranded effect of this session's settled runs; answers
/// how many it settled (also counted in `shared.stranded_resolved`).
pub async fn settle_stranded(
    store: &DieselStore,
    provider: &mut Provider,
    shared: &Shared,
) -> Result<u64> {
    let mut settled = 0;
    for stranded in store.stranded_effects(Duration::ZERO).await? {
        if !verify::is_settled_session_run(provider, stranded.run).await? {
            continue;
        }
        let outcome = match provider.lookup(stranded.run, &stranded.key).await? {
            Some(receipt) => receipt,
            None => json!({
                "abandoned": "the run was settled before this effect was performed"
            }),
        };
        store
            .settle_effect(stranded.run, &stranded.key, &outcome)
            .await?;
        shared.stranded_resolved.fetch_add(1, Ordering::Relaxed);
        settled += 1;
        tracing::info!(
            run = %stranded.run,
            key = stranded.key,
            began_at = %stranded.began_at,
            "stranded effect of a settled run resolved from the provider"
        );
    }
    Ok(settled)
}
