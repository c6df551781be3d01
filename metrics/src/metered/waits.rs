//! [`RunWaitStore`] for [`Metered`]: a wait or a signal taken that the
//! lease's fence refused is a fencing refusal; the rest passes through.

use flowstate_core::ports::RunWaitStore;
use flowstate_core::{Result, RunId, Wait};
use serde_json::Value;

use super::Metered;
use crate::record::fenced;

impl<S: RunWaitStore> RunWaitStore for Metered<S> {
    async fn wait(&self, run: RunId, token: u64, wait: Wait) -> Result<()> {
        let answer = self.inner.wait(run, token, wait).await;
        fenced(&answer);
        answer
    }

    async fn signal(&self, run: RunId, name: &str, payload: &Value) -> Result<()> {
        self.inner.signal(run, name, payload).await
    }

    async fn take_signal(&self, run: RunId, token: u64, name: &str) -> Result<Option<Value>> {
        let answer = self.inner.take_signal(run, token, name).await;
        fenced(&answer);
        answer
    }

    async fn wake_expired(&self) -> Result<u64> {
        self.inner.wake_expired().await
    }
}
