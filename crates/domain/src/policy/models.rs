//! Model allow-lists: which models a tenant's runs may name, and what `auto` becomes.
//!
//! A region's list is its default model plus `GC_GATEWAY_<REGION>_MODELS`; when that variable
//! is unset the region allows any model (as before allow-lists). A tenant may narrow it with
//! `allowed_models` (null: the region's list). The caller's list is the region's list (in its
//! order) kept to the tenant's names, or the tenant's list when the region allows any model.
//! A named model outside it is refused (403 `model_not_allowed`) before anything is counted or
//! sent upstream. `auto` (or no model) becomes the region's default model when it is in the
//! list, else the first model of the list (decision 0038); an empty list refuses every run.

use std::collections::HashMap;

use crate::error::{DomainError, DomainResult};
use crate::model::Tenant;
use crate::policy::prices::Prices;
use crate::values::Region;

/// The most names a tenant's list may hold.
pub const MAX_ALLOWED_MODELS: usize = 100;

/// What one region offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionModels {
    /// The model `auto` stands for.
    pub default_model: String,
    /// The models runs may name (the default first); `None`: any model.
    pub allowed: Option<Vec<String>>,
}

/// The deployment's model configuration: each region's models and the price table.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    regions: HashMap<Region, RegionModels>,
    prices: Prices,
}

impl Catalog {
    pub fn new(regions: HashMap<Region, RegionModels>, prices: Prices) -> Self {
        Self { regions, prices }
    }

    pub fn prices(&self) -> &Prices {
        &self.prices
    }

    /// The caller's list: `None` when any model may be named.
    pub fn allowed(&self, tenant: &Tenant) -> Option<Vec<String>> {
        let region = self
            .regions
            .get(&tenant.region)
            .and_then(|r| r.allowed.as_ref());
        match (region, tenant.allowed_models.as_ref()) {
            (None, None) => None,
            (Some(r), None) => Some(r.clone()),
            (None, Some(t)) => Some(t.clone()),
            (Some(r), Some(t)) => Some(r.iter().filter(|m| t.contains(m)).cloned().collect()),
        }
    }

    /// The model a run of `tenant` naming `requested` (`None` or `auto`: the default) goes to:
    /// `Ok(None)` leaves the choice to the region's gateway (no list applies and `auto` was
    /// asked), `Ok(Some(model))` is the model to send. 403 `model_not_allowed` outside the list.
    pub fn resolve(
        &self,
        tenant: &Tenant,
        requested: Option<&str>,
    ) -> DomainResult<Option<String>> {
        let requested = requested.filter(|m| *m != "auto");
        let Some(list) = self.allowed(tenant) else {
            return Ok(requested.map(str::to_owned));
        };
        match requested {
            Some(m) if list.iter().any(|a| a == m) => Ok(Some(m.to_owned())),
            Some(m) => Err(DomainError::ModelNotAllowed(format!(
                "the model `{}` is not allowed for this tenant",
                m.chars().take(200).collect::<String>()
            ))),
            None => {
                let default = self.regions.get(&tenant.region).map(|r| &r.default_model);
                match default.filter(|d| list.contains(d)).or(list.first()) {
                    Some(m) => Ok(Some(m.clone())),
                    None => Err(DomainError::ModelNotAllowed(
                        "no model is allowed for this tenant".into(),
                    )),
                }
            }
        }
    }

    /// The model a run's price is looked up under: the resolved one, else the region's
    /// default (what the gateway sends for `auto`).
    pub fn priced_model(&self, tenant: &Tenant, resolved: Option<&str>) -> Option<String> {
        resolved.map(str::to_owned).or_else(|| {
            self.regions
                .get(&tenant.region)
                .map(|r| r.default_model.clone())
        })
    }

    /// What `GET /models` lists after `auto`: the caller's list, or `configured` (the region's
    /// models) when any model may be named. Without any allowed model, not even `auto`.
    pub fn listed(&self, tenant: &Tenant, configured: Vec<String>) -> Vec<String> {
        let models = self.allowed(tenant).unwrap_or(configured);
        if models.is_empty() {
            return Vec::new();
        }
        let mut out = vec!["auto".to_owned()];
        for m in models {
            if !out.contains(&m) {
                out.push(m);
            }
        }
        out
    }
}

/// A run's model after the allow-list: what to send (`None`: the body as it is) and its price.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelChoice {
    pub model: Option<String>,
    pub price: Option<crate::policy::prices::Price>,
}

impl ModelChoice {
    /// Writes the chosen model into the body (`auto` resolved inside the list).
    pub fn apply(&self, body: &mut serde_json::Map<String, serde_json::Value>) {
        if let Some(m) = &self.model {
            body.insert("model".into(), serde_json::Value::String(m.clone()));
        }
    }
}

/// The allow-list check of a run (one call, in `runs::prepare_for`): the body's `model`
/// resolved for `tenant` ([`Catalog::resolve`]) and the price of the model it goes to.
pub fn choose<E>(
    catalog: &Catalog,
    tenant: &Tenant,
    body: Option<&Result<serde_json::Value, E>>,
) -> DomainResult<ModelChoice> {
    let requested = body
        .and_then(|b| b.as_ref().ok())
        .and_then(|b| b.get("model"))
        .and_then(serde_json::Value::as_str);
    let model = catalog.resolve(tenant, requested)?;
    let price = catalog
        .priced_model(tenant, model.as_deref())
        .and_then(|m| catalog.prices().price(&m));
    Ok(ModelChoice { model, price })
}

/// Checks a tenant's `allowed_models`: null, or at most [`MAX_ALLOWED_MODELS`] distinct names
/// (1 to 200 characters, not `auto`), kept in the order given.
pub fn allowed_models(field: &str, raw: Option<Vec<String>>) -> DomainResult<Option<Vec<String>>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    if raw.len() > MAX_ALLOWED_MODELS {
        return Err(DomainError::invalid(
            field,
            format!("may hold at most {MAX_ALLOWED_MODELS} models"),
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(raw.len());
    for m in raw {
        let m = m.trim().to_owned();
        if m.is_empty() || m.len() > 200 || m == "auto" || m.chars().any(char::is_control) {
            return Err(DomainError::invalid(
                field,
                "each entry must be a model name (1 to 200 characters, not auto)",
            ));
        }
        if !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog(region_list: Option<&[&str]>) -> Catalog {
        let mut regions = HashMap::new();
        regions.insert(
            Region::Aihk,
            RegionModels {
                default_model: "m-default".into(),
                allowed: region_list.map(|l| l.iter().map(|s| (*s).to_owned()).collect()),
            },
        );
        Catalog::new(regions, Prices::shipped())
    }

    fn tenant(list: Option<&[&str]>) -> Tenant {
        let mut t = crate::policy::access::tests::tenant(crate::model::Status::Active);
        t.allowed_models = list.map(|l| l.iter().map(|s| (*s).to_owned()).collect());
        t
    }

    #[test]
    fn without_lists_any_model_goes_and_auto_is_left_to_the_gateway() {
        let c = catalog(None);
        let t = tenant(None);
        assert_eq!(
            c.resolve(&t, Some("anything")).unwrap().as_deref(),
            Some("anything")
        );
        assert_eq!(c.resolve(&t, Some("auto")).unwrap(), None);
        assert_eq!(c.resolve(&t, None).unwrap(), None);
        assert_eq!(
            c.listed(&t, vec!["m-default".into()]),
            vec!["auto", "m-default"]
        );
    }

    #[test]
    fn the_region_list_and_the_tenant_list_intersect() {
        let c = catalog(Some(&["m-default", "m-large", "m-small"]));
        let t = tenant(None);
        assert!(c.resolve(&t, Some("m-large")).is_ok());
        let e = c.resolve(&t, Some("claude-3-5-sonnet")).unwrap_err();
        assert_eq!(e.code(), "model_not_allowed");
        let t = tenant(Some(&["m-small", "m-large", "other"]));
        assert_eq!(c.allowed(&t).unwrap(), vec!["m-large", "m-small"]);
        assert_eq!(
            c.resolve(&t, Some("other")).unwrap_err().code(),
            "model_not_allowed"
        );
        assert_eq!(
            c.resolve(&t, Some("m-default")).unwrap_err().code(),
            "model_not_allowed"
        );
        // The default is not the tenant's: `auto` is the first model of the list.
        assert_eq!(
            c.resolve(&t, Some("auto")).unwrap().as_deref(),
            Some("m-large")
        );
        assert_eq!(c.listed(&t, vec![]), vec!["auto", "m-large", "m-small"]);
        // The default is allowed: `auto` is the default.
        let t = tenant(Some(&["m-small", "m-default"]));
        assert_eq!(c.resolve(&t, None).unwrap().as_deref(), Some("m-default"));
        // Nothing in common: every run is refused and nothing is listed.
        let t = tenant(Some(&["other"]));
        assert_eq!(c.resolve(&t, None).unwrap_err().code(), "model_not_allowed");
        assert!(c.listed(&t, vec!["m-default".into()]).is_empty());
        // A tenant list alone, under a region that allows anything.
        let c = catalog(None);
        let t = tenant(Some(&["x", "m-default"]));
        assert_eq!(c.resolve(&t, None).unwrap().as_deref(), Some("m-default"));
        assert_eq!(
            c.resolve(&t, Some("y")).unwrap_err().code(),
            "model_not_allowed"
        );
    }

    #[test]
    fn tenant_lists_are_checked() {
        let ok = allowed_models(
            "allowed_models",
            Some(vec![" a ".into(), "b".into(), "a".into()]),
        );
        assert_eq!(ok.unwrap().unwrap(), vec!["a", "b"]);
        assert_eq!(allowed_models("f", None).unwrap(), None);
        for bad in [
            vec!["auto".to_owned()],
            vec![String::new()],
            vec!["x".repeat(201)],
        ] {
            assert_eq!(
                allowed_models("f", Some(bad)).unwrap_err().code(),
                "validation_failed"
            );
        }
        let many = (0..=MAX_ALLOWED_MODELS).map(|i| format!("m{i}")).collect();
        assert!(allowed_models("f", Some(many)).is_err());
    }
}
