//! A small W3C WebDriver client for the console's browser tests: it starts Debian's
//! `chromedriver` on a free loopback port, opens headless Chromium, and offers the few
//! commands the tests use (navigate, find, click, type, read text, run a script, read the
//! browser console, take a screenshot).
//!
//! Written on `reqwest` (already a dependency) rather than taking `fantoccini`/`thirtyfour`:
//! `fantoccini` depends on Mozilla's `webdriver` crate, which is MPL-2.0 (outside the licences
//! this workspace accepts), and `thirtyfour` needs a newer Rust and pulls in a WebSocket stack,
//! zip and web-pki roots. The protocol subset below is about 200 lines.
//!
//! When `chromedriver` or `chromium` is missing, [`Browser::start`] prints a loud SKIPPED line
//! and returns `None`, unless `GC_REQUIRE_BROWSER=1`, in which case it panics (CI sets it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use gc_persistence::testing::TempDirGuard;
use serde_json::{json, Value};

/// The W3C key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// How long the `wait_*` helpers poll before failing.
pub const WAIT: Duration = Duration::from_secs(20);

/// A headless Chromium driven through chromedriver; both end when this is dropped.
pub struct Browser {
    http: reqwest::Client,
    session: String,
    driver_url: String,
    driver: Child,
    _profile: TempDirGuard,
}

fn find_binary(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path).chain([
        PathBuf::from("/usr/bin"),
        PathBuf::from("/usr/lib/chromium"),
    ]) {
        for name in names {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// Whether a missing browser must fail the test run (`GC_REQUIRE_BROWSER=1`).
pub fn browser_required() -> bool {
    std::env::var("GC_REQUIRE_BROWSER").is_ok_and(|v| v.trim() == "1")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Browser {
    /// Starts chromedriver and a headless Chromium; `None` (after a loud line) when they are
    /// not installed and `GC_REQUIRE_BROWSER` is not `1`.
    pub async fn start(test: &str) -> Option<Self> {
        let driver = find_binary(&["chromedriver"]);
        let chromium = find_binary(&["chromium", "chromium-browser", "google-chrome"]);
        let (Some(driver), Some(chromium)) = (driver, chromium) else {
            let line = format!(
                "browser test {test}: chromedriver or chromium is not installed \
                 (apt-get install chromium chromium-driver)"
            );
            if browser_required() {
                panic!("{line}, and GC_REQUIRE_BROWSER=1");
            }
            eprintln!("\n!!!!!!!! SKIPPED: {line} !!!!!!!!\n");
            return None;
        };
        let port = free_port();
        let child = Command::new(&driver)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let driver_url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = http
                .get(format!("{driver_url}/status"))
                .send()
                .await
                .ok()
                .filter(|r| r.status().is_success());
            if ready.is_some() {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = TempDirGuard::new("gc-chromium").unwrap();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.display().to_string(),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1280,1000", "--no-first-run", "--disable-extensions",
                         "--disable-background-networking", "--disable-sync", "--metrics-recording-only",
                         format!("--user-data-dir={}", profile.path().display())],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
            "timeouts": {"implicit": 0, "pageLoad": 30000, "script": 30000},
        }}});
        let mut browser = Self {
            http,
            session: String::new(),
            driver_url,
            driver: child,
            _profile: profile,
        };
        let created = browser
            .raw(reqwest::Method::POST, "/session", Some(caps))
            .await;
        browser.session = created
            .get("sessionId")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        Some(browser)
    }

    async fn raw(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut rb = self
            .http
            .request(method, format!("{}{path}", self.driver_url));
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let res = rb.send().await.expect("chromedriver request");
        let v: Value = res.json().await.expect("chromedriver JSON");
        v["value"].clone()
    }

    /// A session command; `Err` carries WebDriver's error (e.g. "no such element").
    async fn cmd(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        let v = self
            .raw(method, &format!("/session/{}{path}", self.session), body)
            .await;
        match v.get("error").and_then(Value::as_str) {
            Some(e) => Err(format!(
                "{e}: {}",
                v["message"].as_str().unwrap_or_default()
            )),
            None => Ok(v),
        }
    }

    pub async fn goto(&self, url: &str) {
        self.cmd(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await
            .unwrap();
    }

    pub async fn current_url(&self) -> String {
        self.cmd(reqwest::Method::GET, "/url", None)
            .await
            .unwrap()
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Runs a script (`arguments[i]` are `args`) and returns its result.
    pub async fn exec(&self, script: &str, args: Value) -> Value {
        self.cmd(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
        .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    async fn find(&self, css: &str) -> Result<String, String> {
        let v = self
            .cmd(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await?;
        v.get(ELEMENT)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("no element id in {v}"))
    }

    /// Polls `what` until it gives `Some`, or panics after [`WAIT`].
    async fn poll<T, F, Fut>(&self, what: &str, mut f: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, String>>,
    {
        let deadline = Instant::now() + WAIT;
        loop {
            match f().await {
                Ok(v) => return v,
                Err(e) if Instant::now() > deadline => {
                    let body = self.text("body").await;
                    panic!("timed out waiting for {what}: {e}\n--- page text ---\n{body}");
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Waits until an element matching `css` is displayed.
    pub async fn wait_for(&self, css: &str) {
        let script = "const e = document.querySelector(arguments[0]); return !!(e && e.getClientRects().length);";
        self.poll(css, || async {
            match self.exec(script, json!([css])).await {
                Value::Bool(true) => Ok(()),
                _ => Err("not displayed".into()),
            }
        })
        .await;
    }

    /// Waits until the first element matching `css` has text containing `needle`; returns it.
    pub async fn wait_text(&self, css: &str, needle: &str) -> String {
        self.poll(&format!("{css} to contain {needle:?}"), || async {
            let t = self.text(css).await;
            if t.contains(needle) {
                Ok(t)
            } else {
                Err(format!("text is {t:?}"))
            }
        })
        .await
    }

    /// The visible text of the first element matching `css` ("" when there is none).
    pub async fn text(&self, css: &str) -> String {
        let script = "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';";
        self.exec(script, json!([css]))
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Whether an element matching `css` exists and is disabled (itself or by a fieldset).
    pub async fn is_disabled(&self, css: &str) -> bool {
        let script = "const e = document.querySelector(arguments[0]); return !!(e && e.matches(':disabled'));";
        self.exec(script, json!([css])).await == Value::Bool(true)
    }

    /// Clicks the first element matching `css`, waiting until it can be clicked.
    pub async fn click(&self, css: &str) {
        self.poll(&format!("{css} to be clickable"), || async {
            let id = self.find(css).await?;
            self.cmd(
                reqwest::Method::POST,
                &format!("/element/{id}/click"),
                Some(json!({})),
            )
            .await
            .map(|_| ())
        })
        .await;
    }

    /// Clicks the first visible, enabled button whose text is `label`.
    pub async fn click_button(&self, label: &str) {
        let script = "const b = [...document.querySelectorAll('button')].find(b => b.innerText.trim() === arguments[0] && b.getClientRects().length && !b.disabled); if (b) { b.setAttribute('data-test-target', '1'); return true; } return false;";
        self.poll(&format!("a button {label:?}"), || async {
            match self.exec(script, json!([label])).await {
                Value::Bool(true) => Ok(()),
                _ => Err("not found".into()),
            }
        })
        .await;
        self.click("[data-test-target]").await;
        self.exec(
            "document.querySelectorAll('[data-test-target]').forEach(e => e.removeAttribute('data-test-target'))",
            json!([]),
        )
        .await;
    }

    /// Replaces the value of the field matching `css` by typing `text`.
    pub async fn fill(&self, css: &str, text: &str) {
        self.poll(&format!("{css} to take text"), || async {
            let id = self.find(css).await?;
            self.cmd(
                reqwest::Method::POST,
                &format!("/element/{id}/clear"),
                Some(json!({})),
            )
            .await?;
            self.cmd(
                reqwest::Method::POST,
                &format!("/element/{id}/value"),
                Some(json!({"text": text})),
            )
            .await
            .map(|_| ())
        })
        .await;
    }

    /// Fills the field whose label text starts with `label`.
    pub async fn fill_labelled(&self, label: &str, text: &str) {
        let id = self.labelled(label).await;
        self.fill(&format!("#{id}"), text).await;
    }

    /// The id of the control whose `<label>` text starts with `label`.
    pub async fn labelled(&self, label: &str) -> String {
        let script = "const l = [...document.querySelectorAll('label[for]')].find(l => l.innerText.trim().startsWith(arguments[0]) && l.getClientRects().length); return l ? l.htmlFor : null;";
        self.poll(&format!("a field labelled {label:?}"), || async {
            match self.exec(script, json!([label])).await {
                Value::String(id) => Ok(id),
                _ => Err("no such label".into()),
            }
        })
        .await
    }

    /// Selects the option with this value in the `<select>` labelled `label`.
    pub async fn select_labelled(&self, label: &str, value: &str) {
        let id = self.labelled(label).await;
        self.exec(
            "const s = document.getElementById(arguments[0]); s.value = arguments[1]; s.dispatchEvent(new Event('change', {bubbles: true}));",
            json!([id, value]),
        )
        .await;
    }

    /// The browser console's entries since the last call.
    pub async fn console_entries(&self) -> Vec<Value> {
        self.cmd(
            reqwest::Method::POST,
            "/se/log",
            Some(json!({"type": "browser"})),
        )
        .await
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
    }

    /// Asserts the browser console has no error since the last check, except Chromium's
    /// "Failed to load resource" lines for API answers the test expected (401 before sign-in,
    /// 403 and 409 refusals the page shows): an API refusal is data, not a page error. Asset
    /// failures, script exceptions and CSP violations all fail.
    pub async fn assert_no_console_errors(&self, page: &str) {
        let errors: Vec<Value> = self
            .console_entries()
            .await
            .into_iter()
            .filter(|e| e["level"] == "SEVERE")
            .filter(|e| {
                let m = e["message"].as_str().unwrap_or_default();
                !(m.contains("/api/v1/") && m.contains("Failed to load resource"))
            })
            .collect();
        assert!(
            errors.is_empty(),
            "browser console errors on {page}: {errors:#?}"
        );
    }

    /// Saves a PNG screenshot of the page.
    pub async fn screenshot(&self, path: &Path) {
        let v = self
            .cmd(reqwest::Method::GET, "/screenshot", None)
            .await
            .unwrap();
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .unwrap();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }

    /// Sets the window size (phone-width checks, screenshots).
    pub async fn resize(&self, width: u32, height: u32) {
        self.cmd(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )
        .await
        .unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ends Chromium (best effort, without an async runtime), then the driver we started.
        if !self.session.is_empty() {
            let url = format!("{}/session/{}", self.driver_url, self.session);
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                if let Ok(rt) = rt {
                    rt.block_on(async {
                        let _ = reqwest::Client::new()
                            .delete(url)
                            .timeout(Duration::from_secs(10))
                            .send()
                            .await;
                    });
                }
            })
            .join();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
