//! Opaque list cursors and the shared list query.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use gc_domain::page::PageRequest;
use gc_domain::ErrorCode;
use serde::Deserialize;
use utoipa::IntoParams;
use uuid::Uuid;

use crate::error::ApiError;

/// The cursor is the last id of the previous page, base64url-encoded; clients treat it as
/// opaque.
pub fn encode(id: Uuid) -> String {
    URL_SAFE_NO_PAD.encode(id.as_bytes())
}

pub fn decode(raw: &str) -> Option<Uuid> {
    let bytes = URL_SAFE_NO_PAD.decode(raw).ok()?;
    Uuid::from_slice(&bytes).ok()
}

/// `?limit=&cursor=` of every list route.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// 1 to 200, default 50.
    #[param(minimum = 1, maximum = 200, default = 50)]
    pub limit: Option<u32>,
    /// The `next_cursor` of the previous page (opaque; an empty value means the first page).
    #[param(pattern = "^([A-Za-z0-9_-]{21}[AQgw])?$")]
    pub cursor: Option<String>,
}

impl ListQuery {
    pub fn page(&self) -> Result<PageRequest, ApiError> {
        let before = match self.cursor.as_deref() {
            None | Some("") => None,
            Some(raw) => Some(decode(raw).ok_or_else(|| {
                ApiError::new(
                    ErrorCode::InvalidCursor,
                    "the cursor is not one this service issued",
                )
            })?),
        };
        PageRequest::new(self.limit, before)
            .map_err(|e| ApiError::new(ErrorCode::InvalidQuery, e.to_string()))
    }
}
