//! Prices and money: what a model's tokens cost, in one currency per deployment.
//!
//! Money is an integer count of nano-units (10^-9 of the currency: [`Money`]), never a float,
//! so sums are exact and a run of one token of the cheapest model still costs something. A
//! price is per million tokens, input and output apart; a run's cost is
//! `ceil((prompt × input + completion × output) / 10^6)` nano-units (decision 0038). Prices come
//! from `GC_PRICES` (a JSON file) over [`Prices::shipped`]; every price of a deployment is in
//! the one currency of the table, checked when the table is read.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::error::{DomainError, DomainResult};

/// An amount of money in nano-units (10^-9 of the currency).
pub type Money = u64;

/// Nano-units in one unit of the currency.
pub const NANOS_PER_UNIT: u64 = 1_000_000_000;

/// The largest money limit accepted (a billion units): anything above is a typing mistake, and
/// it keeps every sum far inside the stored 64-bit counts.
pub const MAX_MONEY: Money = 1_000_000_000 * NANOS_PER_UNIT;

/// Parses a decimal string (`"12.5"`, `"0.000150"`): digits, at most one point and at most 9
/// decimals, at most [`MAX_MONEY`]. Never through a float.
pub fn parse_money(raw: &str) -> Option<Money> {
    let raw = raw.trim();
    let (whole, frac) = raw.split_once('.').unwrap_or((raw, ""));
    if whole.is_empty() && frac.is_empty()
        || whole.len() > 12
        || frac.len() > 9
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || (raw.contains('.') && frac.is_empty())
    {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut nanos: u64 = 0;
    for (i, b) in frac.bytes().enumerate() {
        nanos += u64::from(b - b'0') * 10u64.pow(8 - u32::try_from(i).ok()?);
    }
    let total = whole.checked_mul(NANOS_PER_UNIT)?.checked_add(nanos)?;
    (total <= MAX_MONEY).then_some(total)
}

/// The decimal string of an amount: whole units, a point and the decimals without trailing
/// zeros, at least two (`"0.00"`, `"12.50"`, `"0.00000015"`).
pub fn format_money(nanos: Money) -> String {
    let whole = nanos / NANOS_PER_UNIT;
    let frac = format!("{:09}", nanos % NANOS_PER_UNIT);
    let trimmed = frac.trim_end_matches('0');
    let shown = if trimmed.len() < 2 {
        &frac[..2]
    } else {
        trimmed
    };
    format!("{whole}.{shown}")
}

/// Checks a money limit: a decimal string (more than zero, at most [`MAX_MONEY`]) or null.
pub fn money_limit(field: &str, raw: Option<&str>) -> DomainResult<Option<Money>> {
    match raw {
        None => Ok(None),
        Some(s) => match parse_money(s) {
            Some(n) if n > 0 => Ok(Some(n)),
            _ => Err(DomainError::invalid(
                field,
                "must be a decimal string such as \"25.00\" (more than 0, at most 10^9, 9 decimals) or null",
            )),
        },
    }
}

/// One model's price per million tokens, in nano-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    pub input_per_million: Money,
    pub output_per_million: Money,
}

impl Price {
    /// What `prompt` input and `completion` output tokens cost, rounded up to a nano-unit.
    pub fn cost(&self, prompt: u64, completion: u64) -> Money {
        let sum = u128::from(prompt) * u128::from(self.input_per_million)
            + u128::from(completion) * u128::from(self.output_per_million);
        let nanos = sum.div_ceil(1_000_000);
        u64::try_from(nanos)
            .unwrap_or(u64::MAX)
            .min(i64::MAX as u64)
    }
}

/// The price table of a deployment: one currency, a price per model name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prices {
    currency: String,
    models: BTreeMap<String, Price>,
}

/// The shipped prices (USD per million tokens, input then output): OpenAI's list prices of
/// well-known models as of late 2026 (standard tier), and the embedding models at input only.
const SHIPPED: &[(&str, &str, &str)] = &[
    ("gpt-4o", "2.50", "10.00"),
    ("gpt-4o-mini", "0.15", "0.60"),
    ("gpt-4.1", "2.00", "8.00"),
    ("gpt-4.1-mini", "0.40", "1.60"),
    ("gpt-4.1-nano", "0.10", "0.40"),
    ("gpt-4-turbo", "10.00", "30.00"),
    ("gpt-3.5-turbo", "0.50", "1.50"),
    ("o1", "15.00", "60.00"),
    ("o1-mini", "1.10", "4.40"),
    ("o3", "2.00", "8.00"),
    ("o3-mini", "1.10", "4.40"),
    ("o4-mini", "1.10", "4.40"),
    ("gpt-5", "1.25", "10.00"),
    ("gpt-5-mini", "0.25", "2.00"),
    ("gpt-5-nano", "0.05", "0.40"),
    ("text-embedding-3-small", "0.02", "0.00"),
    ("text-embedding-3-large", "0.13", "0.00"),
    ("text-embedding-ada-002", "0.10", "0.00"),
];

/// One entry of a `GC_PRICES` file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceEntry {
    input_per_million: String,
    output_per_million: String,
    currency: String,
}

impl Default for Prices {
    fn default() -> Self {
        Self::shipped()
    }
}

impl Prices {
    /// The shipped table, in USD.
    pub fn shipped() -> Self {
        let models = SHIPPED
            .iter()
            .filter_map(|(m, i, o)| {
                Some((
                    (*m).to_owned(),
                    Price {
                        input_per_million: parse_money(i)?,
                        output_per_million: parse_money(o)?,
                    },
                ))
            })
            .collect();
        Self {
            currency: "USD".into(),
            models,
        }
    }

    /// A `GC_PRICES` file over the shipped table: a JSON object of model name to
    /// `{input_per_million, output_per_million, currency}` (decimal strings, a 3-letter
    /// currency code). A model named there replaces its shipped price. Every entry must be in
    /// the same currency; when that is not USD, the shipped (USD) prices are not used at all,
    /// so a deployment never adds two currencies. Errors name the entry.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let entries: BTreeMap<String, PriceEntry> =
            serde_json::from_str(text).map_err(|e| format!("GC_PRICES: {e}"))?;
        let mut currency: Option<String> = None;
        let mut models = BTreeMap::new();
        for (model, e) in entries {
            let name = model.trim();
            if name.is_empty() || name.len() > 200 {
                return Err("GC_PRICES: a model name is empty or longer than 200".into());
            }
            let cur = e.currency.trim().to_ascii_uppercase();
            if cur.len() != 3 || !cur.bytes().all(|b| b.is_ascii_uppercase()) {
                return Err(format!(
                    "GC_PRICES: {name}: currency must be a 3-letter code such as USD"
                ));
            }
            match &currency {
                Some(c) if *c != cur => {
                    return Err(format!(
                        "GC_PRICES: {name} is priced in {cur}, other models in {c}: one currency per deployment"
                    ))
                }
                _ => currency = Some(cur),
            }
            let price = |field: &str, raw: &str| {
                parse_money(raw).ok_or_else(|| {
                    format!("GC_PRICES: {name}.{field} must be a decimal string such as \"2.50\"")
                })
            };
            models.insert(
                name.to_owned(),
                Price {
                    input_per_million: price("input_per_million", &e.input_per_million)?,
                    output_per_million: price("output_per_million", &e.output_per_million)?,
                },
            );
        }
        let currency = currency.unwrap_or_else(|| "USD".into());
        let mut out = if currency == "USD" {
            Self::shipped()
        } else {
            Self {
                currency: currency.clone(),
                models: BTreeMap::new(),
            }
        };
        out.models.extend(models);
        Ok(out)
    }

    /// The currency of every price and amount of the deployment.
    pub fn currency(&self) -> &str {
        &self.currency
    }

    /// The price of `model`: its own entry, else the longest entry it extends with `-`
    /// (`gpt-4o-mini-2024-07-18` is priced as `gpt-4o-mini`); `None` when none is known.
    pub fn price(&self, model: &str) -> Option<Price> {
        if let Some(p) = self.models.get(model) {
            return Some(*p);
        }
        let mut end = model.len();
        while let Some(i) = model[..end].rfind('-') {
            if let Some(p) = self.models.get(&model[..i]) {
                return Some(*p);
            }
            end = i;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_parses_and_formats_exactly() {
        assert_eq!(parse_money("12.5"), Some(12_500_000_000));
        assert_eq!(parse_money("0.000000001"), Some(1));
        assert_eq!(parse_money("3"), Some(3 * NANOS_PER_UNIT));
        for bad in [
            "",
            ".",
            "1.",
            "-1",
            "1e3",
            "0.0000000001",
            "1.2.3",
            " ",
            "abc",
        ] {
            assert_eq!(parse_money(bad), None, "{bad:?}");
        }
        assert_eq!(parse_money("1000000001"), None);
        assert_eq!(format_money(0), "0.00");
        assert_eq!(format_money(12_500_000_000), "12.50");
        assert_eq!(format_money(150), "0.00000015");
        assert_eq!(format_money(1), "0.000000001");
        assert_eq!(
            money_limit("x", Some("0")).unwrap_err().code(),
            "validation_failed"
        );
        assert_eq!(money_limit("x", None).unwrap(), None);
    }

    #[test]
    fn costs_round_up_and_prefixes_price_versions() {
        let p = Prices::shipped();
        let mini = p.price("gpt-4o-mini").unwrap();
        // 1 input token at 0.15 per million: 150 nano-units, exact.
        assert_eq!(mini.cost(1, 0), 150);
        assert_eq!(mini.cost(1_000_000, 1_000_000), 750_000_000);
        assert_eq!(p.price("gpt-4o-mini-2024-07-18"), Some(mini));
        assert_eq!(p.price("gpt-4o-2024-08-06"), p.price("gpt-4o"));
        assert_eq!(p.price("claude-3-5-sonnet"), None);
        let odd = Price {
            input_per_million: 1,
            output_per_million: 0,
        };
        assert_eq!(odd.cost(1, 0), 1, "never free");
        assert_eq!(odd.cost(u64::MAX, u64::MAX), 18_446_744_073_710);
    }

    #[test]
    fn a_price_file_overrides_and_keeps_one_currency() {
        let p = Prices::from_json(
            r#"{"m-default": {"input_per_million": "1.00", "output_per_million": "2", "currency": "usd"}}"#,
        )
        .unwrap();
        assert_eq!(p.currency(), "USD");
        assert_eq!(
            p.price("m-default").unwrap().output_per_million,
            2 * NANOS_PER_UNIT
        );
        assert!(p.price("gpt-4o").is_some(), "shipped prices stay under USD");
        let eur = Prices::from_json(
            r#"{"a": {"input_per_million": "1", "output_per_million": "2", "currency": "EUR"}}"#,
        )
        .unwrap();
        assert_eq!(eur.currency(), "EUR");
        assert!(
            eur.price("gpt-4o").is_none(),
            "no USD price in an EUR deployment"
        );
        let mixed = Prices::from_json(
            r#"{"a": {"input_per_million": "1", "output_per_million": "2", "currency": "EUR"},
                "b": {"input_per_million": "1", "output_per_million": "2", "currency": "USD"}}"#,
        );
        assert!(mixed.unwrap_err().contains("one currency"));
        assert!(Prices::from_json(r#"{"a": {"input_per_million": 1.5}}"#).is_err());
    }
}
