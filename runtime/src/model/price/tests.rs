use std::sync::Arc;

use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;
use crate::model::{ModelResponse, ProviderUsage, ScriptedModel, complete};

fn usage(prompt: u64, cached: u64, completion: u64) -> Usage {
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        cached_tokens: cached,
        ..Usage::default()
    }
}

fn check(price: Price, usage: Usage, expected: &str) {
    assert_eq!(
        price.cost(&usage).to_string(),
        expected,
        "{price:?} {usage:?}"
    );
}

const PRICE: Price = Price {
    input: 2.0,
    cached_input: Some(0.5),
    output: 8.0,
};

#[test]
fn uncached_cached_and_output_tokens_each_have_their_price() {
    // 1M uncached at $2, nothing else.
    check(PRICE, usage(1_000_000, 0, 0), "$2.00");
    // 1000 prompt tokens, 400 of them cached; 500 completion tokens:
    // 600 × 2 + 400 × 0.5 + 500 × 8 = 5400 per million.
    check(PRICE, usage(1000, 400, 500), "$0.0054");
    // Without a cached price, a cached token costs an input token.
    let flat = Price {
        cached_input: None,
        ..PRICE
    };
    check(flat, usage(1000, 400, 500), "$0.0060");
    check(PRICE, usage(10, 0, 1), "$0.000028");
    check(PRICE, usage(0, 0, 0), "$0");
    check(PRICE, usage(0, 0, 1), "$0.0000080");
    check(PRICE, usage(0, 0, 5000), "$0.0400");
}

#[test]
fn a_negative_or_non_finite_price_is_named() {
    let bad = |p: Price| p.invalid();
    assert_eq!(bad(PRICE), None);
    assert_eq!(
        bad(Price {
            input: -1.0,
            ..PRICE
        }),
        Some("input")
    );
    assert_eq!(
        bad(Price {
            cached_input: Some(f64::NAN),
            ..PRICE
        }),
        Some("cached_input")
    );
    assert_eq!(
        bad(Price {
            output: f64::INFINITY,
            ..PRICE
        }),
        Some("output")
    );
}

proptest! {
    /// A cost travels as dollars and comes back the same, to the billionth.
    #[test]
    fn a_cost_survives_the_wire(nanos in 0u64..1_000_000_000_000_000) {
        let json = serde_json::to_string(&Cost(nanos)).unwrap();
        let back: Cost = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(back, Cost(nanos));
    }

    /// Costs add up exactly: a turn's cost is the sum of its requests'.
    #[test]
    fn costs_add_exactly(parts in proptest::collection::vec(0u64..10_000_000, 0..20)) {
        let mut total = Usage::default();
        for p in &parts {
            total.add(Usage { cost: Cost(*p), ..Usage::default() });
        }
        prop_assert_eq!(total.cost, Cost(parts.iter().sum()));
    }
}

/// One scripted answer, `model` named in the request or not.
async fn priced(prices: Prices, model: Option<&str>) -> Option<ProviderUsage> {
    let script = crate::model::Script::from_toml("[[response]]\ntext = \"hi\"\n", "test").unwrap();
    let inner: Arc<dyn ModelClient> = Arc::new(ScriptedModel::new(script, "scripted"));
    let client = Priced::wrap(inner, &Arc::new(prices));
    let mut request = crate::model::tests::request();
    request.model = model.map(Arc::from);
    let response: ModelResponse = complete(client.stream(request)).await.unwrap();
    response.usage
}

#[tokio::test]
async fn the_answering_models_price_is_applied_and_no_price_costs_nothing() {
    let prices = Prices::from([("scripted".to_string(), PRICE)]);
    let with = priced(prices.clone(), None).await.unwrap();
    let expected = PRICE.cost(&Usage::from(with));
    assert!(!expected.is_zero());
    assert_eq!(with.cost, expected);
    // A request naming another model (the guardian's) is priced as that
    // model, here unpriced.
    assert_eq!(priced(prices, Some("other")).await.unwrap().cost, Cost(0));
    assert_eq!(priced(Prices::new(), None).await.unwrap().cost, Cost(0));
}
