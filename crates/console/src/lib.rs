//! gc-console: the web console, served by `gc-server` at `/` next to the API.
//!
//! The console is a small set of static files compiled into the binary (`include_bytes!`):
//! one HTML shell, one stylesheet and hand-written JavaScript modules that call the same
//! `/api/v1` routes as every other client, with the session cookie. It holds no state and
//! makes no decision: every refusal comes from the API. See `docs/console.md` and
//! `docs/decisions/0006-console.md`.
//!
//! Routes (all outside `/api/v1`):
//!
//! - `GET /assets/{build}/{file}`: an embedded file. `{build}` is a hash of every asset, so a
//!   URL names one exact content and is cached as immutable; a request for another build (a
//!   page loaded from an older node) gets the current file with `Cache-Control: no-cache`.
//! - `GET /favicon.ico`: the icon.
//! - [`page`] answers `GET` or `HEAD` of the console's own pages with the HTML shell: `/` and
//!   every path the client-side router knows (its `ROUTES` table in `assets/js/app.js`, read
//!   from the embedded file, so the two cannot drift; a deep link reloads). The binary calls
//!   it from its default service for the paths [`is_console_path`] accepts, so explicitly
//!   registered routes always win; every other path is the API's JSON 404, never the page (a
//!   load balancer probing `/healthz` must be able to fail).
//!
//! Every response carries [`CONTENT_SECURITY_POLICY`], `X-Content-Type-Options: nosniff`,
//! `X-Frame-Options: DENY` and a same-origin referrer policy.

use std::sync::OnceLock;

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Compress;
use actix_web::{web, HttpRequest, HttpResponse, HttpResponseBuilder};

/// The policy of every console response: scripts, styles, images and connections from this
/// origin only, no inline script or style, no plugins, no framing, forms post here only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; \
     manifest-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    path: &'static str,
    body: &'static [u8],
    content_type: &'static str,
}

/// The embedded files: `assets!(path: content type, ...; js: module, ...)`, the modules
/// being JavaScript under `js/`.
macro_rules! assets {
    ($($path:literal: $content_type:expr),* ; js: $($module:literal),*) => {
        &[
            $(Asset {
                path: $path,
                body: include_bytes!(concat!("../assets/", $path)),
                content_type: $content_type,
            },)*
            $(Asset {
                path: concat!("js/", $module),
                body: include_bytes!(concat!("../assets/js/", $module)),
                content_type: "text/javascript; charset=utf-8",
            },)*
        ]
    };
}

/// Every file under `assets/` that is served (the shell is served by [`page`]).
const ASSETS: &[Asset] = assets!(
    "app.css": "text/css; charset=utf-8", "favicon.svg": "image/svg+xml";
    js: "app.js", "api.js", "ui.js", "messages.js", "limits.js", "pages/account.js",
        "pages/workspace.js", "pages/records.js", "pages/keys.js", "pages/composer.js",
        "pages/guard.js", "pages/admin.js"
);

/// The HTML shell; `{{build}}` is replaced by [`build_id`].
const SHELL: &str = include_str!("../assets/index.html");

/// FNV-1a (64 bit): a content fingerprint for cache busting, not a security hash.
fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// Fingerprints computed once, on first use: the build id and each asset's `ETag`.
struct Fingerprints {
    build: String,
    etags: Vec<String>,
    shell: String,
}

fn fingerprints() -> &'static Fingerprints {
    static CELL: OnceLock<Fingerprints> = OnceLock::new();
    CELL.get_or_init(|| {
        let mut all = fnv1a(FNV_OFFSET, SHELL.as_bytes());
        let etags = ASSETS
            .iter()
            .map(|a| {
                all = fnv1a(all, a.body);
                format!("\"{:016x}\"", fnv1a(FNV_OFFSET, a.body))
            })
            .collect();
        let build = format!("{all:016x}")[..12].to_owned();
        let shell = SHELL.replace("{{build}}", &build);
        Fingerprints {
            build,
            etags,
            shell,
        }
    })
}

/// The build id that names the current assets in their URLs.
pub fn build_id() -> &'static str {
    &fingerprints().build
}

/// The client-side router's page patterns (`/memory/:id`), read once from the `ROUTES` table
/// of the embedded `js/app.js`: each entry is a line `['/path', 'access', ...]` between
/// `const ROUTES = [` and `].map(`.
fn page_patterns() -> &'static [String] {
    static CELL: OnceLock<Vec<String>> = OnceLock::new();
    CELL.get_or_init(|| {
        let app = ASSETS
            .iter()
            .find(|a| a.path == "js/app.js")
            .and_then(|a| std::str::from_utf8(a.body).ok())
            .unwrap_or_default();
        app.lines()
            .skip_while(|l| !l.starts_with("const ROUTES = ["))
            .skip(1)
            .take_while(|l| !l.starts_with("]"))
            .filter_map(|l| l.trim_start().strip_prefix("['"))
            .filter_map(|l| l.split('\'').next())
            .filter(|p| p.starts_with('/'))
            .map(str::to_owned)
            .collect()
    })
}

/// Whether `path` matches a router pattern as the router's own regular expression does
/// (`^pattern/?$`, a `:name` segment standing for one non-empty segment).
fn matches_pattern(pattern: &str, path: &str) -> bool {
    let path = if path.len() > 1 {
        path.strip_suffix('/').unwrap_or(path)
    } else {
        path
    };
    if pattern == "/" {
        return path == "/" || path == "//";
    }
    let mut want = pattern.split('/');
    let mut got = path.split('/');
    loop {
        match (want.next(), got.next()) {
            (None, None) => return true,
            (Some(w), Some(g)) if w.starts_with(':') && !g.is_empty() => {}
            (Some(w), Some(g)) if w == g => {}
            _ => return false,
        }
    }
}

/// Whether a path is one of the console's pages: `/` or a path the client-side router shows
/// (so a reloaded deep link gets the shell). Everything else, `/api/**`, `/metrics`,
/// `/healthz`, `/wp-login.php`, is not, and gets a 404.
pub fn is_console_path(path: &str) -> bool {
    page_patterns().iter().any(|p| matches_pattern(p, path))
}

/// Mounts the console's own routes: the assets and the icon.
pub fn config(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::scope("/assets")
            .wrap(Compress::default())
            .route("/{build}/{path:.*}", web::get().to(asset))
            .route("/{build}/{path:.*}", web::head().to(asset)),
    )
    .route("/favicon.ico", web::get().to(favicon))
    .route("/favicon.ico", web::head().to(favicon));
}

/// The security headers of every console response.
fn secured(status: StatusCode) -> HttpResponseBuilder {
    let mut res = HttpResponse::build(status);
    res.insert_header((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header((header::REFERRER_POLICY, "same-origin"))
        .insert_header(("cross-origin-opener-policy", "same-origin"))
        .insert_header(("cross-origin-resource-policy", "same-origin"));
    res
}

fn etag_matches(req: &HttpRequest, etag: &str) -> bool {
    req.headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"))
}

async fn asset(req: HttpRequest, path: web::Path<(String, String)>) -> HttpResponse {
    let (build, file) = path.into_inner();
    let prints = fingerprints();
    let Some((index, found)) = ASSETS.iter().enumerate().find(|(_, a)| a.path == file) else {
        // No body: the API's middleware turns it into the uniform JSON 404.
        return HttpResponse::NotFound().finish();
    };
    let etag = prints.etags.get(index).map_or("\"\"", String::as_str);
    let cache = if build == prints.build {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    serve(&req, found, etag, cache)
}

fn serve(req: &HttpRequest, asset: &Asset, etag: &str, cache: &str) -> HttpResponse {
    let status = if etag_matches(req, etag) {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    };
    let mut res = secured(status);
    res.insert_header((header::CACHE_CONTROL, cache))
        .insert_header((header::ETAG, etag));
    if status == StatusCode::NOT_MODIFIED {
        return res.finish();
    }
    res.insert_header((header::CONTENT_TYPE, asset.content_type));
    if req.method() == Method::HEAD {
        return res.finish();
    }
    res.body(asset.body)
}

async fn favicon(req: HttpRequest) -> HttpResponse {
    let prints = fingerprints();
    match ASSETS.iter().position(|a| a.path == "favicon.svg") {
        Some(i) => serve(
            &req,
            &ASSETS[i],
            prints.etags.get(i).map_or("\"\"", String::as_str),
            "public, max-age=86400",
        ),
        None => HttpResponse::NotFound().finish(),
    }
}

/// The HTML shell for any console path (`GET`/`HEAD`); 405 for other methods. Not cached: it
/// names the current build's assets.
pub async fn page(req: HttpRequest) -> HttpResponse {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return HttpResponse::MethodNotAllowed()
            .insert_header((header::ALLOW, HeaderValue::from_static("GET, HEAD")))
            .finish();
    }
    let mut res = secured(StatusCode::OK);
    res.insert_header((header::CACHE_CONTROL, "no-cache"))
        .insert_header((header::CONTENT_TYPE, "text/html; charset=utf-8"));
    if req.method() == Method::HEAD {
        return res.finish();
    }
    res.body(fingerprints().shell.as_str())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn the_shell_names_the_current_build_and_has_no_inline_script() {
        let shell = &fingerprints().shell;
        assert!(shell.contains(&format!("/assets/{}/js/app.js", build_id())));
        assert!(!shell.contains("{{build}}"));
        // Every <script> has a src: CSP forbids inline code.
        for part in shell.split("<script").skip(1) {
            let tag = part.split('>').next().unwrap_or_default();
            assert!(tag.contains("src="), "inline script: {tag}");
            assert!(part
                .split('>')
                .nth(1)
                .unwrap_or_default()
                .starts_with("</script"));
        }
        assert!(!shell.contains(" style="), "inline style attribute");
    }

    #[test]
    fn every_module_imported_by_another_is_served() {
        for a in ASSETS.iter().filter(|a| a.path.ends_with(".js")) {
            let text = std::str::from_utf8(a.body).unwrap();
            let dir = a.path.rsplit_once('/').map_or("", |(d, _)| d);
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let spec = line.split(['\'', '"']).nth(1).unwrap();
                let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
                for seg in spec.split('/') {
                    match seg {
                        "." => {}
                        ".." => {
                            parts.pop();
                        }
                        s => parts.push(s),
                    }
                }
                let target = parts.join("/");
                assert!(
                    ASSETS.iter().any(|x| x.path == target),
                    "{} imports {spec} ({target}), which is not embedded",
                    a.path
                );
            }
        }
    }

    #[test]
    fn only_the_routers_pages_are_console_paths() {
        let patterns = page_patterns();
        // Patterns of the router (read from app.js), each with a path it serves.
        for (pattern, path) in [
            ("/", "/"),
            ("/signin", "/signin"),
            ("/skills", "/skills"),
            (
                "/memory/:id",
                "/memory/0190f0f0-0000-7000-8000-000000000000",
            ),
            ("/admin/tenants/:id", "/admin/tenants/abc"),
            ("/admin/users", "/admin/users"),
        ] {
            assert!(
                patterns.iter().any(|x| x == pattern),
                "{pattern} not read from app.js: {patterns:?}"
            );
            assert!(is_console_path(path), "{path}");
        }
        // Each path, and whether it is one of the console's pages.
        for (path, page) in [
            ("/skills/", true),
            ("/drafts/agents", true),
            ("/admin", true),
            ("/admin/diagnostics", true),
            ("/api", false),
            ("/api/v1/nope", false),
            ("/api/other", false),
            ("/metrics", false),
            ("/apis", false),
            ("/healthz", false),
            ("/readyz", false),
            ("/nope.php", false),
            ("/index.html", false),
            ("/skills/x", false),
            ("/memory//", false),
            ("/admin/tenants/a/b", false),
            ("/no/such/page", false),
        ] {
            assert_eq!(is_console_path(path), page, "{path}");
        }
    }
}
