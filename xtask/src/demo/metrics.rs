//! The demo's metrics recorder: a small one of its own, installed for the
//! whole process, that sums each counter and histogram by name (its labels
//! added together), so the summary can print a few of the figures
//! `flowstate-metrics` records on the workers' `Metered` stores. A host
//! would install an exporter (Prometheus, StatsD) instead.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use flowstate_metrics::metrics::{
    self, Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString,
    Unit,
};
use flowstate_metrics::names;

/// A histogram's observations: how many and their sum, in nanoseconds.
#[derive(Debug, Default)]
struct Sum {
    count: AtomicU64,
    nanos: AtomicU64,
}

impl HistogramFn for Sum {
    fn record(&self, seconds: f64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.nanos
            .fetch_add((seconds.max(0.0) * 1e9) as u64, Ordering::Relaxed);
    }
}

/// Every counter and histogram by name.
#[derive(Debug, Default)]
struct Totals {
    counters: Mutex<HashMap<String, Arc<AtomicU64>>>,
    histograms: Mutex<HashMap<String, Arc<Sum>>>,
}

impl Totals {
    fn counter(&self, name: &str) -> u64 {
        let counters = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        counters.get(name).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// The mean of histogram `name`, in milliseconds, if it has any.
    fn mean_ms(&self, name: &str) -> Option<f64> {
        let histograms = self
            .histograms
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let sum = histograms.get(name)?;
        let count = sum.count.load(Ordering::Relaxed);
        (count > 0).then(|| sum.nanos.load(Ordering::Relaxed) as f64 / count as f64 / 1e6)
    }
}

/// The recorder the process installs, sharing its totals with [`figures`].
struct Summing(Arc<Totals>);

impl Recorder for Summing {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut counters = self
            .0
            .counters
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Counter::from_arc(Arc::clone(
            counters.entry(key.name().to_owned()).or_default(),
        ))
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut histograms = self
            .0
            .histograms
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Histogram::from_arc(Arc::clone(
            histograms.entry(key.name().to_owned()).or_default(),
        ))
    }
}

static TOTALS: OnceLock<Arc<Totals>> = OnceLock::new();

/// Installs the recorder for the whole process, once; a second call (or a
/// recorder installed by someone else first) leaves things as they are.
pub fn install() {
    TOTALS.get_or_init(|| {
        let totals = Arc::new(Totals::default());
        let _ = metrics::set_global_recorder(Summing(Arc::clone(&totals)));
        totals
    });
}

/// A few of the figures recorded so far.
pub struct Figures {
    /// Step claims that took their step (`flowstate_claims_won_total`).
    pub claims_won: u64,
    /// Step claims that took nothing: the duplicate deliveries.
    pub claims_lost: u64,
    /// Step claims answered with an error.
    pub claims_refused: u64,
    /// Step transitions written.
    pub transitions: u64,
    /// Attempts after the first that started running.
    pub retries: u64,
    /// Run leases taken.
    pub leases_taken: u64,
    /// Writes refused by a lease or a claim's fence.
    pub fencing_refusals: u64,
    /// Runs the recovery sweeps re-drove.
    pub sweep_redrives: u64,
    /// The mean step claim, in milliseconds.
    pub mean_claim_ms: Option<f64>,
    /// The mean step transition, in milliseconds.
    pub mean_transition_ms: Option<f64>,
}

/// The figures, if [`install`] installed the recorder.
pub fn figures() -> Option<Figures> {
    let totals = TOTALS.get()?;
    Some(Figures {
        claims_won: totals.counter(names::CLAIMS_WON),
        claims_lost: totals.counter(names::CLAIMS_LOST),
        claims_refused: totals.counter(names::CLAIMS_REFUSED),
        transitions: totals.counter(names::TRANSITIONS),
        retries: totals.counter(names::RETRIES),
        leases_taken: totals.counter(names::LEASES_TAKEN),
        fencing_refusals: totals.counter(names::FENCING_REFUSALS),
        sweep_redrives: totals.counter(names::SWEEP_REDRIVES),
        mean_claim_ms: totals.mean_ms(names::CLAIM_SECONDS),
        mean_transition_ms: totals.mean_ms(names::TRANSITION_SECONDS),
    })
}
