//! Retries (LLM3): the one place a failed model request is tried again.
//!
//! A retryable failure (429, 5xx, connection errors, timeouts, a stream cut
//! mid-way) is retried with exponential backoff and full jitter, honouring
//! the server's `Retry-After`, up to `max_attempts` requests in all. Each
//! retry is announced with [`ModelEvent::Retrying`] so consumers discard the
//! partial deltas. Then the error is [`ModelError::RetriesExhausted`].

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use super::{ModelClient, ModelError, ModelEvent, ModelRequest, ModelStream};

/// How often and how patiently to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Requests in all, the first included (1 means no retry).
    pub max_attempts: u32,
    /// The backoff before the second attempt; it doubles each time.
    pub base_delay: Duration,
    /// The longest wait between attempts.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// 5 attempts, 500 ms doubling to at most 16 s.
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(16),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt `attempt` (1-based): the server's
    /// `Retry-After` when it gave one, else a jittered exponential backoff.
    pub fn delay(&self, attempt: u32, error: &ModelError) -> Duration {
        if let ModelError::Http {
            retry_after: Some(wait),
            ..
        } = error
        {
            return (*wait).min(self.max_delay);
        }
        let exp = self
            .base_delay
            .saturating_mul(1u32 << (attempt.saturating_sub(1)).min(16))
            .min(self.max_delay);
        // Full jitter in [exp/2, exp], so parallel agents do not retry in step.
        let half = exp / 2;
        half + half.mul_f64(jitter())
    }
}

/// A number in [0, 1) without a random-number crate: the low bits of a fresh
/// v4 UUID, which is already random.
fn jitter() -> f64 {
    let bits = uuid::Uuid::new_v4().as_u128() as u64 >> 11;
    bits as f64 / (1u64 << 53) as f64
}

/// Wraps a client with a [`RetryPolicy`].
pub struct Retrying {
    inner: Arc<dyn ModelClient>,
    policy: RetryPolicy,
}

impl Retrying {
    /// Retries `inner`'s failures by `policy`.
    pub fn new(inner: Arc<dyn ModelClient>, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }
}

impl ModelClient for Retrying {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        if request.single_attempt {
            return self.inner.stream(request);
        }
        let inner = self.inner.clone();
        let policy = self.policy;
        let (tx, rx) = futures::channel::mpsc::unbounded();
        // Driven by the consumer: the forwarding future is the stream itself,
        // so dropping the stream drops the request in flight.
        let pump = async move {
            let mut attempt = 1;
            loop {
                let mut stream = inner.stream(request.clone());
                let failure = loop {
                    match stream.next().await {
                        Some(Ok(event)) => {
                            let done = matches!(event, ModelEvent::Completed(_));
                            if tx.unbounded_send(Ok(event)).is_err() || done {
                                return;
                            }
                        }
                        Some(Err(error)) => break error,
                        None => return,
                    }
                };
                if !failure.is_retryable() || attempt >= policy.max_attempts {
                    let error = if failure.is_retryable() && attempt > 1 {
                        ModelError::RetriesExhausted {
                            attempts: attempt,
                            last: Box::new(failure),
                        }
                    } else {
                        failure
                    };
                    let _ = tx.unbounded_send(Err(error));
                    return;
                }
                let delay = policy.delay(attempt, &failure);
                tracing::warn!(attempt, ?delay, error = %failure, "model request failed; retrying");
                let _ = tx.unbounded_send(Ok(ModelEvent::Retrying {
                    attempt,
                    delay,
                    reason: failure.to_string(),
                }));
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
        };
        Box::pin(futures::stream::select(
            rx,
            futures::stream::once(pump).filter_map(|()| async { None }),
        ))
    }
}
