//! What every handler shares: the store, the password hasher and the HTTP settings.

use std::sync::Arc;

use gc_domain::accounts::{AccountPolicy, PasswordHasher};
use gc_domain::ports::Store;
use gc_domain::DomainResult;
use ipnet::IpNet;
use tokio::sync::Semaphore;

use crate::error::ApiError;
use crate::gateway::{Gateways, RunRecorder};
use crate::guard::GuardService;

/// HTTP-facing settings, built once from configuration by the binary.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// `scheme://host[:port]` of the service as browsers see it; cookie writes must carry it
    /// as `Origin`.
    pub public_origin: String,
    pub signup_open: bool,
    pub chat_completions: bool,
    /// Proxies whose `X-Forwarded-For` is believed for the client IP.
    pub trusted_proxies: Vec<IpNet>,
    /// Largest accepted request body.
    pub body_limit: usize,
}

impl HttpSettings {
    pub fn secure_cookies(&self) -> bool {
        self.public_origin.starts_with("https://")
    }
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            public_origin: "http://127.0.0.1:8080".into(),
            signup_open: true,
            chat_completions: false,
            trusted_proxies: Vec::new(),
            body_limit: 1024 * 1024,
        }
    }
}

/// Shared application state.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub hasher: Arc<dyn PasswordHasher>,
    /// Bounds concurrent bcrypt work so it never takes every core from the event loop.
    pub hash_permits: Arc<Semaphore>,
    pub policy: AccountPolicy,
    pub http: HttpSettings,
    pub gateways: Arc<Gateways>,
    /// Queue of activity lines written off the request path (runs, scans).
    pub recorder: RunRecorder,
    pub guard: Arc<GuardService>,
}

impl AppState {
    pub fn new(
        store: Arc<dyn Store>,
        hasher: Arc<dyn PasswordHasher>,
        policy: AccountPolicy,
        http: HttpSettings,
        gateways: Arc<Gateways>,
        recorder: RunRecorder,
        guard: Arc<GuardService>,
    ) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self {
            store,
            hasher,
            hash_permits: Arc::new(Semaphore::new(cores.saturating_sub(1).max(1))),
            policy,
            http,
            gateways,
            recorder,
            guard,
        }
    }

    /// Runs synchronous storage work on the blocking pool.
    pub async fn db<T, F>(&self, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Store) -> DomainResult<T> + Send + 'static,
    {
        let store = Arc::clone(&self.store);
        Ok(actix_web::web::block(move || work(store.as_ref())).await??)
    }

    /// Runs work that hashes or verifies a password on the blocking pool, a bounded number at
    /// a time.
    pub async fn with_hasher<T, F>(&self, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Store, &dyn PasswordHasher) -> DomainResult<T> + Send + 'static,
    {
        let _permit = Arc::clone(&self.hash_permits)
            .acquire_owned()
            .await
            .map_err(|_| {
                ApiError::from(gc_domain::DomainError::Unavailable {
                    retry_after_secs: 1,
                })
            })?;
        let store = Arc::clone(&self.store);
        let hasher = Arc::clone(&self.hasher);
        Ok(actix_web::web::block(move || work(store.as_ref(), hasher.as_ref())).await??)
    }
}
