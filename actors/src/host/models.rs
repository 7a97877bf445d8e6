//! The model clients a host builds: the roles' (and the guardian's, the
//! verifier's, steps') clients, one per distinct choice, and the request
//! slots every client of one endpoint shares (W9).

use std::collections::BTreeMap;
use std::sync::Arc;

use cadre_runtime::agent::{ModelSource, ModelSourceError};
use cadre_runtime::config::RoleConfig;
use cadre_runtime::model::providers::{Providers, ServerChoice, choose_server};
use cadre_runtime::model::{
    ModelClient, OpenAiClient, Priced, Prices, ResponseLimits, RetryPolicy, Retrying,
};
use tokio::sync::Semaphore;

/// Model clients for roles (and the guardian, the verifier, steps): a
/// choice naming a provider, a server or parameters of its own gets a
/// client for it (`model::providers::choose_server`), one per distinct
/// choice; the others share the host's.
pub(super) struct RoleModels {
    pub(super) default: Arc<dyn ModelClient>,
    /// The session's server, when it talks to one.
    pub(super) session: Option<ServerChoice>,
    pub(super) providers: Providers,
    pub(super) retry: RetryPolicy,
    pub(super) limits: ResponseLimits,
    pub(super) endpoints: Endpoints,
    /// Prices per model: every client built is priced by the model that
    /// answers.
    pub(super) prices: Arc<Prices>,
    /// The clients built, by their choice's identity: agents of one role
    /// share a client (its tool lists' JSON, a parameter a server refused).
    pub(super) built: std::sync::Mutex<BTreeMap<String, Arc<dyn ModelClient>>>,
}

impl ModelSource for RoleModels {
    fn client(&self, role: &RoleConfig) -> Result<Arc<dyn ModelClient>, ModelSourceError> {
        if !role.own_client() {
            return Ok(self.default.clone());
        }
        let chosen = choose_server(
            self.session.as_ref(),
            role.provider.as_deref(),
            role.base_url.as_deref(),
            role.model.as_deref(),
            &role.params(),
            &self.providers,
        )?;
        let Some(server) = chosen else {
            return Ok(self.default.clone());
        };
        let mut built = self
            .built
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(client) = built.get(&server.identity()) {
            return Ok(client.clone());
        }
        let client = server_client(&server, self.limits, self.retry, &self.endpoints)?;
        let client = Priced::wrap(client, &self.prices);
        built.insert(server.identity(), client.clone());
        Ok(client)
    }
}

/// A retrying client for `server`, limited with its endpoint's slots.
pub(super) fn server_client(
    server: &ServerChoice,
    limits: ResponseLimits,
    retry: RetryPolicy,
    endpoints: &Endpoints,
) -> Result<Arc<dyn ModelClient>, cadre_runtime::model::ModelError> {
    let client = OpenAiClient::new(server.config(limits))?;
    let client = endpoints.limit(&server.base_url, &server.model, Arc::new(client));
    Ok(Arc::new(Retrying::new(client, retry)))
}

/// The slots of each endpoint, by (base URL, model).
type Slots = BTreeMap<(String, String), Arc<Semaphore>>;

/// One request limiter per model endpoint (W9): every client this host
/// builds for the same base URL and model shares its slots.
#[derive(Clone, Default)]
pub(super) struct Endpoints {
    max: Option<u32>,
    slots: Arc<std::sync::Mutex<Slots>>,
}

impl Endpoints {
    pub(super) fn new(max: Option<u32>) -> Self {
        Self {
            max,
            slots: Arc::default(),
        }
    }

    /// `client`, limited with the endpoint's shared slots when there is a limit.
    fn limit(
        &self,
        base_url: &str,
        model: &str,
        client: Arc<dyn ModelClient>,
    ) -> Arc<dyn ModelClient> {
        let Some(max) = self.max else {
            return client;
        };
        let slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry((base_url.to_string(), model.to_string()))
            .or_insert_with(|| Arc::new(Semaphore::new(max as usize)))
            .clone();
        Arc::new(Limited {
            inner: client,
            slots,
        })
    }
}

/// A client whose requests wait for a slot of their endpoint, held until
/// the response stream ends (or is dropped). A retry waits for a slot again,
/// so a backoff holds none.
struct Limited {
    inner: Arc<dyn ModelClient>,
    slots: Arc<Semaphore>,
}

impl ModelClient for Limited {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn stream(
        &self,
        request: cadre_runtime::model::ModelRequest,
    ) -> cadre_runtime::model::ModelStream {
        use futures::StreamExt;
        let (inner, slots) = (self.inner.clone(), self.slots.clone());
        let mut request = Some(request);
        Box::pin(
            futures::stream::once(async move { slots.acquire_owned().await.ok() }).flat_map(
                move |permit| {
                    let stream = match request.take() {
                        Some(request) => inner.stream(request),
                        None => Box::pin(futures::stream::empty()),
                    };
                    stream.map(move |item| {
                        let _held = &permit;
                        item
                    })
                },
            ),
        )
    }
}
