//! What a response cost (LLM8): prices per model from the user's
//! configuration (`[prices."MODEL"]`), applied to each response's usage by
//! [`Priced`], the outermost wrapper of a model client. cadre has no price
//! list of its own: a model without a configured price costs nothing shown.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{ModelClient, ModelEvent, ModelRequest, ModelStream};
use crate::protocol::Usage;

/// Billionths of the unit prices are written in (dollars, as providers
/// price): exact under addition, so a run's total is the sum of its
/// responses' costs whatever the order. On the wire, a number of dollars.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cost(pub u64);

impl Cost {
    /// Nothing, or nothing priced.
    pub fn is_zero(&self) -> bool {
        self.0 == 0
    }

    /// In dollars.
    pub fn dollars(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// `dollars`, rounded to the nearest billionth (negative or not a
    /// number: zero).
    pub fn from_dollars(dollars: f64) -> Self {
        match dollars.is_finite() && dollars > 0.0 {
            true => Cost((dollars * 1e9).round() as u64),
            false => Cost(0),
        }
    }
}

impl std::ops::Add for Cost {
    type Output = Cost;

    /// The sum, saturating.
    fn add(self, other: Cost) -> Cost {
        Cost(self.0.saturating_add(other.0))
    }
}

impl std::fmt::Display for Cost {
    /// `$1.25`, `$0.0123`, `$0.000042`: cents from a dollar up, else at
    /// least four decimals and two significant digits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = self.dollars();
        if d == 0.0 {
            return f.write_str("$0");
        }
        if d >= 1.0 {
            return write!(f, "${d:.2}");
        }
        let decimals = ((-d.log10()).ceil() as usize + 1).clamp(4, 9);
        write!(f, "${d:.decimals$}")
    }
}

impl Serialize for Cost {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.dollars())
    }
}

impl<'de> Deserialize<'de> for Cost {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        f64::deserialize(d).map(Cost::from_dollars)
    }
}

/// One model's prices, in dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// A prompt token the server did not read from its cache.
    pub input: f64,
    /// A prompt token read from the server's prompt cache; `input` when
    /// unset (a server that gives no discount).
    pub cached_input: Option<f64>,
    /// A completion token, reasoning tokens included (they are billed as
    /// output by every provider that reports them).
    pub output: f64,
}

impl Price {
    /// What is wrong with it (a negative or non-finite price), naming the key.
    pub fn invalid(&self) -> Option<&'static str> {
        let bad = |p: f64| !p.is_finite() || p < 0.0;
        if bad(self.input) {
            Some("input")
        } else if self.cached_input.is_some_and(bad) {
            Some("cached_input")
        } else if bad(self.output) {
            Some("output")
        } else {
            None
        }
    }

    /// What `usage` cost: its uncached prompt tokens at `input`, its cached
    /// ones at `cached_input`, every completion token at `output`.
    pub fn cost(&self, usage: &Usage) -> Cost {
        let cached = usage.cached_tokens.min(usage.prompt_tokens);
        let uncached = usage.prompt_tokens - cached;
        let per_million = uncached as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + usage.completion_tokens as f64 * self.output;
        Cost::from_dollars(per_million / 1e6)
    }
}

/// Prices by model name, exactly as the model is named in requests.
pub type Prices = BTreeMap<String, Price>;

/// A client whose completed responses carry their cost, when the model
/// that answered (the request's own model, else the client's) has a price.
pub struct Priced {
    inner: Arc<dyn ModelClient>,
    prices: Arc<Prices>,
}

impl Priced {
    /// `inner`, priced with `prices`; `inner` itself when there are none.
    pub fn wrap(inner: Arc<dyn ModelClient>, prices: &Arc<Prices>) -> Arc<dyn ModelClient> {
        match prices.is_empty() {
            true => inner,
            false => Arc::new(Priced {
                inner,
                prices: prices.clone(),
            }),
        }
    }
}

impl ModelClient for Priced {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let model = request.model.as_deref().unwrap_or(self.inner.model());
        let Some(price) = self.prices.get(model).copied() else {
            return self.inner.stream(request);
        };
        Box::pin(self.inner.stream(request).map(move |event| match event {
            Ok(ModelEvent::Completed(mut response)) => {
                if let Some(usage) = response.usage.as_mut() {
                    usage.cost = price.cost(&Usage::from(*usage));
                }
                Ok(ModelEvent::Completed(response))
            }
            other => other,
        }))
    }
}

#[cfg(test)]
mod tests;
