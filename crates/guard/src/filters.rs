//! Post-match filters of regex rules: quotation and negation, secret entropy and placeholders,
//! known installers, public addresses, context escalation.

use crate::model::Severity;
use crate::rules::{MatchCtx, Outcome};

/// Shannon entropy of `s` in bits per byte.
pub(crate) fn entropy(s: &str) -> f64 {
    let bytes = s.as_bytes();
    if bytes.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in bytes {
        counts[usize::from(b)] += 1;
    }
    let len = bytes.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / len;
            -p * p.log2()
        })
        .sum()
}

/// Shapes of elided or templated text (`...`, `***`, `<key>`, `{key}`, `$KEY`): never a real
/// secret or key.
const TEMPLATE_MARKERS: &[&str] = &["...", "***", "<", ">", "{", "}", "$"];

/// Words and shapes that mark a value as a placeholder or documentation example (with
/// [`TEMPLATE_MARKERS`]).
const PLACEHOLDER_MARKERS: &[&str] = &[
    "example",
    "sample",
    "placeholder",
    "your",
    "xxxx",
    "dummy",
    "fake",
    "test",
    "changeme",
    "change_me",
    "redacted",
    "replace",
    "insert",
    "here",
    "todo",
    "fixme",
    "secret",
    "password",
    "token",
    "dead",
    "beef",
    "abcdefgh",
    "0123456",
    "1234567",
    "0000000",
    "aaaaaaa",
    "%s",
    "env",
    "none",
    "null",
    "demo",
    "mock",
    "foo",
    "bar",
];

/// True when the value looks like a placeholder rather than a real secret.
pub(crate) fn is_placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    if PLACEHOLDER_MARKERS
        .iter()
        .chain(TEMPLATE_MARKERS)
        .any(|m| lower.contains(m))
    {
        return true;
    }
    if is_known_example(value) || is_sequential(&lower) {
        return true;
    }
    // A run of one repeated character (e.g. "sk-aaaaaaaaaaaaaaaa") is never a real key.
    let mut run = 1;
    let mut prev = None;
    for b in lower.bytes() {
        if Some(b) == prev {
            run += 1;
            if run >= 6 {
                return true;
            }
        } else {
            run = 1;
        }
        prev = Some(b);
    }
    false
}

/// Keys published in vendors' documentation as examples (public, never valid credentials).
const KNOWN_EXAMPLES: &[&str] = &[
    "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "4eC39HqLyjWDarjtT1zdp7dc",
    "TYooMQauvdEDq54NiTphI7jx",
    "BQokikJOvBiI2HlWgH4olfQ2",
    "26PHem9AhJZvU623DfE1x4sd",
    "16C7e42F292c6912E7710c838347Ae178B4a",
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
    "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ",
    "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
];

/// True for a key published in vendor documentation.
pub(crate) fn is_known_example(value: &str) -> bool {
    KNOWN_EXAMPLES.iter().any(|k| value.contains(k))
}

/// True when the value holds an ascending or descending run of six characters (`123456`,
/// `abcdef`, `987654`) or is one short unit repeated: the shapes of hand-made placeholders.
pub(crate) fn is_sequential(lower: &str) -> bool {
    let b = lower.as_bytes();
    let mut up = 1;
    let mut down = 1;
    for w in b.windows(2) {
        let (x, y) = (w[0], w[1]);
        let alnum = x.is_ascii_alphanumeric() && y.is_ascii_alphanumeric();
        up = if alnum && y == x.wrapping_add(1) {
            up + 1
        } else {
            1
        };
        down = if alnum && x == y.wrapping_add(1) {
            down + 1
        } else {
            1
        };
        if up >= 6 || down >= 6 {
            return true;
        }
    }
    // Short ascending or descending runs one after another (`abc123def456ghi789`): a value
    // made mostly of runs of three or more is typed by hand, not generated.
    if b.len() >= 12 {
        let mut covered = 0usize;
        let mut i = 0usize;
        while i < b.len() {
            let mut j = i + 1;
            let step = |x: u8, y: u8| {
                x.is_ascii_alphanumeric()
                    && y.is_ascii_alphanumeric()
                    && (y == x.wrapping_add(1) || x == y.wrapping_add(1))
            };
            while j < b.len() && step(b[j - 1], b[j]) {
                j += 1;
            }
            if j - i >= 3 {
                covered += j - i;
            }
            i = j;
        }
        if covered * 4 >= b.len() * 3 {
            return true;
        }
    }
    // A unit of up to 8 characters repeated over the whole value.
    (1..=8).any(|unit| {
        b.len() >= unit * 3
            && b.iter()
                .enumerate()
                .skip(unit)
                .all(|(i, &c)| b.get(i - unit) == Some(&c))
    })
}

/// The random part of a token (after the last known prefix separator).
fn token_body(value: &str) -> &str {
    for prefix in [
        "github_pat_",
        "sk-ant-",
        "sk-proj-",
        "sk-svcacct-",
        "sk-admin-",
        "sk_live_",
        "rk_live_",
        "sk_test_",
        "rk_test_",
        "duffel_test_",
        "shippo_test_",
    ] {
        if let Some(rest) = value.strip_prefix(prefix) {
            return rest;
        }
    }
    match value.find(['_', '-']) {
        Some(i) if i <= 5 => value.get(i + 1..).unwrap_or(value),
        _ => value,
    }
}

/// Token-shaped secrets: reject placeholders and low-entropy bodies.
pub(crate) fn secret_token(ctx: &MatchCtx<'_>) -> Outcome {
    let value = ctx.value();
    let body = token_body(value);
    if is_placeholder(body) || entropy(body) < 3.0 {
        Outcome::Drop
    } else {
        Outcome::Keep
    }
}

/// A credential written into an HTTP header (`Authorization: Bearer …`, `X-API-Key: …`): kept
/// when the value is a literal that looks random, not a reference (`$TOKEN`, `${{ … }}`,
/// `{token}`, `<token>`, `%s`) or a placeholder. A `Basic` value must decode to `user:password`
/// with a password that is not a placeholder.
pub(crate) fn secret_auth_header(ctx: &MatchCtx<'_>) -> Outcome {
    let value = ctx.value();
    let after = ctx.text.get(ctx.end()..).unwrap_or("");
    // The literal runs on into a reference or a template: not a literal credential.
    if after.starts_with(['$', '{', '<', '%', '`', '(', '['])
        || value.len() < 16
        || is_placeholder(value)
    {
        return Outcome::Drop;
    }
    let scheme = ctx
        .matched()
        .get(
            ..ctx
                .caps
                .get(1)
                .map_or(0, |g| g.start().saturating_sub(ctx.start())),
        )
        .unwrap_or("")
        .to_ascii_lowercase();
    if scheme.trim_end().ends_with("basic") {
        use base64::Engine as _;
        let decoded = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(value.trim_end_matches('='))
            .ok()
            .and_then(|b| String::from_utf8(b).ok());
        if let Some(d) = decoded {
            let Some((user, password)) = d.split_once(':') else {
                return Outcome::Drop;
            };
            let lower = password.to_ascii_lowercase();
            let weak = password.len() < 4
                || is_placeholder(password)
                || is_placeholder(user)
                || lower.contains("pass")
                || lower.contains("pwd");
            return if weak { Outcome::Drop } else { Outcome::Keep };
        }
    }
    let letters = value.bytes().any(|b| b.is_ascii_alphabetic());
    let digits = value.bytes().any(|b| b.is_ascii_digit());
    if !letters || !digits || entropy(value) < 3.2 || is_sequential(&value.to_ascii_lowercase()) {
        return Outcome::Drop;
    }
    Outcome::Keep
}

/// Stripe keys: as `secret_token`; test-mode keys are medium.
pub(crate) fn secret_stripe(ctx: &MatchCtx<'_>) -> Outcome {
    match secret_token(ctx) {
        Outcome::Keep if ctx.value().contains("_test_") => Outcome::Adjust(Severity::Medium),
        o => o,
    }
}

/// Passwords in URLs and `curl -u`: not a placeholder, a variable or a template; some variety.
pub(crate) fn secret_password(ctx: &MatchCtx<'_>) -> Outcome {
    let value = ctx
        .caps
        .get(1)
        .or_else(|| ctx.caps.get(2))
        .map_or("", |m| m.as_str());
    let lower = value.to_ascii_lowercase();
    let templated = value.starts_with('$')
        || value.contains("${")
        || value.contains('%')
        || value.starts_with(':')
        || lower.contains("pass")
        || lower.contains("pwd")
        || lower.contains("user");
    let host = ctx
        .matched()
        .rsplit('@')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let doc_host = [
        "example.com",
        "example.org",
        "example.net",
        "host",
        "hostname",
        "server",
    ]
    .iter()
    .any(|h| host == *h || host.ends_with(&format!(".{h}")))
        || host.starts_with("example.")
        || host.ends_with(".example")
        || host.ends_with(".invalid");
    if templated || doc_host || is_placeholder(value) || entropy(value) < 2.5 {
        Outcome::Drop
    } else {
        Outcome::Keep
    }
}

/// OpenAI keys: as `secret_token`, but leave `sk-ant-` to the Anthropic rule.
pub(crate) fn secret_openai(ctx: &MatchCtx<'_>) -> Outcome {
    if ctx.value().starts_with("sk-ant-") {
        return Outcome::Drop;
    }
    secret_token(ctx)
}

/// Generic assignments: require high entropy and a mix of character classes, reject
/// placeholders, references and identifiers.
pub(crate) fn secret_generic(ctx: &MatchCtx<'_>) -> Outcome {
    let value = ctx.value();
    if is_placeholder(value) {
        return Outcome::Drop;
    }
    if value.len() < 16 {
        // A short literal counts only for a password name, with letters of both cases, a
        // digit and a symbol (a chosen password, not a word or an identifier).
        let name = ctx
            .matched()
            .get(
                ..ctx
                    .caps
                    .get(1)
                    .map_or(0, |m| m.start().saturating_sub(ctx.start())),
            )
            .unwrap_or("")
            .to_ascii_lowercase();
        let password_name = ["password", "passwd", "pwd", "pass"]
            .iter()
            .any(|n| name.contains(n));
        let classes = [
            value.bytes().any(|b| b.is_ascii_lowercase()),
            value.bytes().any(|b| b.is_ascii_uppercase()),
            value.bytes().any(|b| b.is_ascii_digit()),
            value.bytes().any(|b| b.is_ascii_punctuation()),
        ];
        let looks_like_code = value.contains("()") || value.contains('.') && !value.contains('!');
        return if password_name
            && value.len() >= 10
            && classes.iter().all(|&c| c)
            && entropy(value) >= 3.2
            && !looks_like_code
        {
            Outcome::Keep
        } else {
            Outcome::Drop
        };
    }
    if entropy(value) < 3.5 {
        return Outcome::Drop;
    }
    let lower = value.bytes().any(|b| b.is_ascii_lowercase());
    let upper = value.bytes().any(|b| b.is_ascii_uppercase());
    let digit = value.bytes().any(|b| b.is_ascii_digit());
    let classes = usize::from(lower) + usize::from(upper) + usize::from(digit);
    // File paths, URLs and dotted identifiers are references, not secrets.
    let reference = value.contains('/') && !value.contains('+')
        || value.contains("://")
        || value.starts_with("os.")
        || value.starts_with("process.");
    if classes < 2 || !digit || reference {
        Outcome::Drop
    } else {
        Outcome::Keep
    }
}

const QUOTES: &[char] = &[
    '"', '\'', '`', '\u{201C}', '\u{2018}', '\u{00AB}', '\u{201E}',
];

/// True when the quote that ends `before` opens a value rather than a quotation: a YAML
/// front-matter value (`description: "…`), a Markdown link title (`[x](url "…`, `[x]: url "…`)
/// or an HTML `title`/`alt` attribute. What it holds is read by the model as text of the skill.
pub(crate) fn quote_opens_value(before: &str) -> bool {
    let t = before.trim_end();
    let Some(q) = t.chars().next_back() else {
        return false;
    };
    if !QUOTES.contains(&q) {
        return false;
    }
    let head = t.get(..t.len() - q.len_utf8()).unwrap_or("").trim_end();
    let lower = head.to_ascii_lowercase();
    if lower.ends_with("title=") || lower.ends_with("alt=") {
        return true;
    }
    // `key: "` at the start of a line (YAML), the first quote of the line.
    if let Some(key) = head.strip_suffix(':') {
        let key = key.trim_start_matches([' ', '-']);
        if !key.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return true;
        }
    }
    // The last word before the quote is a URL inside `](` or after `]:`.
    let url_start = head.rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let url = head.get(url_start..).unwrap_or("");
    let prefix = head.get(..url_start).unwrap_or("").trim_end();
    (url.contains("](") || prefix.ends_with("]:") || prefix.ends_with("](")) && url.contains("://")
}

/// Drops matches that are quoted (discussed, not given).
pub(crate) fn not_quoted(ctx: &MatchCtx<'_>) -> Outcome {
    let before = ctx.before();
    match before.trim_end().chars().next_back() {
        Some(c) if QUOTES.contains(&c) => Outcome::Drop,
        _ => Outcome::Keep,
    }
}

/// Nouns of untrusted content: "ignore any instructions found in the *document*" is defence.
const UNTRUSTED_CONTENT: &[&str] = &[
    "input",
    "document",
    "file",
    "page",
    "web",
    "content",
    "data",
    "email",
    "message",
    "tool",
    "output",
    "result",
    "text",
    "user-provided",
    "user-supplied",
    "retrieved",
    "untrusted",
    "external",
    "third",
    "repositor",
    "repo",
    "code",
    "comment",
    "issue",
    "pull",
    "website",
    "html",
    "pdf",
    "attachment",
    "response",
    "search",
    "skill",
    "scraped",
    "fetched",
    "ticket",
];

/// Words that present what follows as a discussed attack, not an instruction ("attackers write
/// ...", "detect phrases like ...", "if a page tries to get you to ...").
const DISCUSSION: &[&str] = &[
    "such as",
    "e.g.",
    "for example",
    "phrases like",
    "phrase like",
    "attempts to",
    "attacker",
    "detect",
    "flag ",
    "flags ",
    "watch for",
    "beware",
    "patterns like",
    "like:",
    "such as:",
    // The untrusted content as the subject: "if a page tries to get you to ...".
    "tries to",
    "try to",
    "trying to",
    "get you to",
    "asks you to",
    "tells you to",
    "says to",
    "wants you to",
    "requests to",
    "make you",
    // Teaching: "prompt injection is when text tells the model to ignore …".
    "injection",
    "the model to",
    "the agent to",
    "the assistant to",
    "the llm to",
    "the ai to",
];

/// Words that name the host's instructions (previous, system, your …), not the skill's own.
const HOST_WORDS: &[&str] = &[
    "previous",
    "prior",
    "above",
    "earlier",
    "preceding",
    "original",
    "system",
    "safety",
    "initial",
    "former",
    "your",
    "developer",
    "developer's",
    "operator",
    "operator's",
    "reviewer",
    "reviewer's",
    "admin",
    "administrator",
    "built-in",
];

/// "Explicit requests from the user override any of the rules above": the user's word taking
/// precedence over the skill's rules, not an order to the model. The verb is a third-person
/// `override(s)`/`supersede(s)` whose subject (`before`) names the user, and `rest` names none of
/// the host's instructions (the rules "above" are the skill's own).
pub(crate) fn user_precedence(verb: &str, before: &str, rest: &str) -> bool {
    let verb = verb.trim_start().to_ascii_lowercase();
    if !(verb.starts_with("override") || verb.starts_with("supersede")) {
        return false;
    }
    let subject = last_chars(before, 48).to_ascii_lowercase();
    if !subject.contains("user") || subject.trim_end().ends_with(':') {
        return false;
    }
    let rest = rest.to_ascii_lowercase();
    !rest
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '\'' && c != '-')
        .any(|w| w != "above" && HOST_WORDS.contains(&w))
}

/// Whether `hay` holds one of `words`.
fn holds_any(hay: &str, words: &[&str]) -> bool {
    words.iter().any(|w| hay.contains(w))
}

/// Words of an override that name untrusted content: "ignore any *embedded* instructions" is defence.
const DEFENDED: &[&str] = &[
    "embedded",
    "injected",
    "untrusted",
    "external",
    "third-party",
    "malicious",
    "suspicious",
    "conflicting",
    "contained",
    "such",
];

/// What text hidden in an HTML element must ask for to be an injection (set instructions aside,
/// conceal, move data).
const HIDDEN_STRONG: &[&str] = &[
    "ignore ",
    "disregard",
    "exfiltrat",
    "secretly",
    "silently",
    "do not tell",
    "don't tell",
    "without telling",
    "system:",
    "you must",
    "api key",
    "api_key",
    "credentials",
    "~/.",
];

/// Instruction overrides: as `not_quoted_or_negated`, and the defensive forms ("ignore any
/// instructions found in the input", "disregard embedded instructions") are safe.
pub(crate) fn injection_intent(ctx: &MatchCtx<'_>) -> Outcome {
    if not_quoted_or_negated(ctx) == Outcome::Drop {
        return Outcome::Drop;
    }
    let m = ctx.matched().to_ascii_lowercase();
    if holds_any(&m, DEFENDED) {
        return Outcome::Drop;
    }
    // "User instructions ALWAYS override these guidelines": a statement of precedence about the
    // skill's own text (a demonstrative target), not an order to set the host's instructions
    // aside (that names them: previous, system, your, original …).
    if m.starts_with("override") || m.starts_with("supersede") {
        let words: Vec<&str> = m
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '\'')
            .filter(|w| !w.is_empty())
            .collect();
        let own = words
            .iter()
            .any(|w| matches!(*w, "these" | "this" | "those" | "default" | "current"));
        let host = words.iter().any(|w| HOST_WORDS.contains(w));
        let before = ctx.before();
        if (own && !host) || user_precedence(&m, before, &m) {
            return Outcome::Drop;
        }
    }
    let after = ctx.after().to_ascii_lowercase();
    let after = after.trim_start();
    let lead = [
        "found",
        "contained",
        "embedded",
        "that appear",
        "that may appear",
        "that might appear",
        "appearing",
        "inside",
        "within",
        "included in",
        "present in",
        "coming from",
        "provided by",
        "written in",
        "hidden in",
        "placed in",
    ];
    if lead.iter().any(|l| after.starts_with(l)) {
        return Outcome::Drop;
    }
    for prep in ["in ", "from ", "on "] {
        if let Some(rest) = after.strip_prefix(prep) {
            let words: Vec<&str> = rest.split_whitespace().take(4).collect();
            if words
                .iter()
                .any(|w| UNTRUSTED_CONTENT.iter().any(|u| w.starts_with(u)))
            {
                return Outcome::Drop;
            }
        }
    }
    // Discussion of the attack ("attackers write ...", "detect phrases like ...").
    let before = ctx.before().to_ascii_lowercase();
    let tail = last_chars(&before, 48);
    if DISCUSSION.iter().any(|d| tail.contains(d)) {
        return Outcome::Drop;
    }
    Outcome::Keep
}

/// Credential files: uses of a key (`ssh-add`, `ssh -i`, `IdentityFile`, public halves) are
/// low; a line that also reaches the network is high.
pub(crate) fn credential_file(ctx: &MatchCtx<'_>) -> Outcome {
    let line = ctx.line();
    let after = ctx.after();
    if after.starts_with(".pub") {
        return Outcome::Drop;
    }
    // This very path is the identity of a connection or the key loaded into the agent
    // (`ssh -i KEY host`, `rsync -e "ssh -i KEY"`, `ssh-add KEY`): the key authenticates, its
    // contents do not travel, even when the line is a network command. Another mention of a
    // key on the same line is judged on its own.
    let before = ctx.before();
    if key_in_use_position(before) {
        return Outcome::Adjust(Severity::Low);
    }
    if mentions_network(line) {
        return Outcome::Adjust(Severity::High);
    }
    // Documentation that names the file to protect it ("check that `~/.aws/credentials` is
    // not committed", "keep it at mode 600") without anything that reads, shows or moves it.
    if crate::context::is_markdown(ctx.path) && protects(line) && !reads_or_moves(line) {
        return Outcome::Adjust(Severity::Low);
    }
    if holds_any(&line.to_ascii_lowercase(), KEY_USES) {
        return Outcome::Adjust(Severity::Low);
    }
    if reads_back_its_own_keychain_item(ctx.text, line) {
        return Outcome::Adjust(Severity::Low);
    }
    Outcome::Keep
}

/// A keychain read (`security find-generic-password -s SERVICE -a ACCOUNT -w`) of an item the
/// same file stores itself (`security add-generic-password` with the same `-s` and `-a`): the
/// skill loads back the credential the user gave it, the way a CLI reads its own login. A
/// read of an item nothing in the file stores (another application's entry) is kept, and a
/// read on a line that sends is high before this is asked.
fn reads_back_its_own_keychain_item(text: &str, line: &str) -> bool {
    let Some(read) = keychain_command(line, "find") else {
        return false;
    };
    let Some(service) = flag_value(read, "-s") else {
        return false;
    };
    let account = flag_value(read, "-a");
    // A command continued over lines (`security add-generic-password \` then `-s …`) is one.
    let joined = text.replace("\\\n", " ").replace("\\\r\n", " ");
    joined
        .lines()
        .filter_map(|l| keychain_command(l, "add"))
        .any(|add| {
            flag_value(add, "-s") == Some(service)
                && account.is_none_or(|a| flag_value(add, "-a") == Some(a))
        })
}

/// The part of `line` from `security VERB-generic-password` (or `-internet-password`) on.
fn keychain_command<'t>(line: &'t str, verb: &str) -> Option<&'t str> {
    ["-generic-password", "-internet-password"]
        .iter()
        .find_map(|kind| line.find(&format!("{verb}{kind}")))
        .and_then(|at| line.get(at..))
}

/// The word after ` FLAG ` in a command line, quotes and escapes kept (`-s "app-$NAME"`).
fn flag_value<'t>(command: &'t str, flag: &str) -> Option<&'t str> {
    let mut words = command
        .split_whitespace()
        .map(|w| w.trim_end_matches(['\\', ')']));
    words.find(|w| *w == flag)?;
    words
        .next()
        .filter(|w| !w.is_empty() && !w.starts_with('-'))
}

/// Persona and mode switches: as [`not_quoted_or_negated`], and a mode that a device is said to
/// have ("the TV must have developer mode enabled") is a device setting (a phone's, a TV's or
/// an emulator's developer mode), lowered: nothing is said to the model about itself.
pub(crate) fn persona(ctx: &MatchCtx<'_>) -> Outcome {
    let outcome = not_quoted_or_negated(ctx);
    let matched = ctx.matched().to_ascii_lowercase();
    if outcome == Outcome::Drop || !matched.contains(" mode") || matched.contains("you") {
        return outcome;
    }
    let before = ctx.before();
    if a_device_has(before) {
        return Outcome::Adjust(Severity::Low);
    }
    outcome
}

/// True when `before` ends "… <device> [must|should] have|has|with|needs [the]": the mode that
/// follows belongs to the device. A sentence that speaks to "you" is never one.
fn a_device_has(before: &str) -> bool {
    let lower = before.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    if words.contains(&"you") {
        return false;
    }
    let mut tail = words.iter().rev().take(6).copied().peekable();
    // An article before the mode ("has the developer mode") is passed over.
    let _ = tail.next_if(|w| matches!(*w, "the" | "its" | "their"));
    if tail
        .next_if(|w| {
            matches!(
                *w,
                "has" | "have" | "had" | "with" | "needs" | "need" | "requires"
            )
        })
        .is_none()
    {
        return false;
    }
    tail.any(|w| {
        let one = w.strip_suffix('s').filter(|s| s.len() > 1).unwrap_or(w);
        DEVICES.contains(&w) || DEVICES.contains(&one)
    })
}

/// Nouns of the things a mode can be a setting of (a phone's developer mode).
const DEVICES: &[&str] = &[
    "device",
    "phone",
    "tv",
    "television",
    "emulator",
    "simulator",
    "tablet",
    "watch",
    "console",
    "router",
    "handset",
    "android",
    "iphone",
    "ipad",
    "board",
    "browser",
    "headset",
];

/// Words of a line that use a private key rather than read it (`ssh-add`, `ssh -i`,
/// `IdentityFile`, `chmod 600`).
const KEY_USES: &[&str] = &[
    "ssh-add",
    "ssh-keygen",
    "ssh-copy-id",
    "ssh -i",
    "-i ~",
    "-i $home",
    "identityfile",
    "chmod 600",
    "chmod 400",
    "chmod 0600",
    "git_ssh_command",
    "--private-key",
];

/// Words of a line that protect a file rather than use it.
fn protects(line: &str) -> bool {
    const MARKERS: &[&str] = &[
        "not committed",
        "never commit",
        "don't commit",
        "do not commit",
        "gitignore",
        "never share",
        "do not share",
        "don't share",
        "is not",
        "must not",
        "should not",
        "never",
        "mode 600",
        "mode 0600",
        "permissions",
        "rotate",
        "protect",
        "leak",
        "exposed",
        "stored in",
        "located",
        "lives in",
        "scan",
        "audit",
    ];
    let lower = line.to_ascii_lowercase();
    MARKERS.iter().any(|m| lower.contains(m))
}

/// Words of a line that read, show or move a file's contents.
fn reads_or_moves(line: &str) -> bool {
    const VERBS: &[&str] = &[
        "cat",
        "open",
        "read",
        "load",
        "copy",
        "cp",
        "upload",
        "send",
        "base64",
        "tar",
        "zip",
        "type",
        "get-content",
        "less",
        "more",
        "head",
        "tail",
        "include",
        "attach",
        "collect",
        "grab",
        "tell",
        "show",
        "print",
        "paste",
        "summarize",
        "summarise",
        "list",
        "dump",
        "echo",
        "display",
        "output",
        "share",
        "report",
        "post",
        "forward",
        "extract",
        "export",
        "exfiltrate",
        "steal",
        "encode",
        "contents",
        "content",
        "xxd",
        "od",
        "strings",
        "mv",
        "move",
        "archive",
        "backup",
        "sync",
        "email",
        "mail",
        "pass",
    ];
    line.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '-')
        .any(|w| VERBS.contains(&w))
}

/// True when the text before a key path (on its line) makes the path the argument of an
/// identity option (`-i`, `IdentityFile`, `--private-key`, `--key-file`) or of a command that
/// uses a key in place (`ssh-add`, `ssh-keygen`, `chmod`), so the key is used, not read.
fn key_in_use_position(before: &str) -> bool {
    // Drop the start of the path itself (`~/`, `$HOME/`, `"${HOME}/`, `--private-key=~/`).
    let trimmed = before.trim_end_matches(|c: char| !c.is_whitespace());
    let token = before.get(trimmed.len()..).unwrap_or("");
    let option = token
        .split_once('=')
        .map(|(o, _)| o.trim_start_matches(['"', '\'']).to_ascii_lowercase());
    let identity = |w: &str| {
        matches!(
            w,
            "-i" | "identityfile"
                | "--private-key"
                | "--key-file"
                | "--identity-file"
                | "--ssh-key"
                | "-identityfile"
        )
    };
    if option.as_deref().is_some_and(identity) {
        return true;
    }
    let words: Vec<String> = trimmed
        .split_whitespace()
        .rev()
        .take(6)
        .map(|w| {
            w.trim_matches(|c: char| matches!(c, '"' | '\'' | '`' | '(' | ';' | '&' | '|'))
                .to_ascii_lowercase()
        })
        .collect();
    let Some(last) = words.first() else {
        return false;
    };
    if identity(last) {
        return true;
    }
    // `ssh-add [-K|--apple-use-keychain] KEY`, `ssh-keygen -y -f KEY`, `chmod 600 KEY`.
    words
        .iter()
        .find(|w| !(w.starts_with('-') || w.chars().all(|c| c.is_ascii_digit())))
        .is_some_and(|w| matches!(w.as_str(), "ssh-add" | "ssh-keygen" | "chmod"))
}

/// An instruction to read a private directory: a public key (`~/.ssh/id_ed25519.pub`) is not
/// private, and loading a key into the agent or using it (`ssh-add`, `ssh -i`) is low.
/// `--client-secret "<SECRET>"`, `TOKEN=<SECRET>`, `'<admin>'`: a pseudo-tag that is a whole
/// quoted value or the value of an assignment is a placeholder for the user to fill in, not a
/// tag block that opens hidden text (`<IMPORTANT>Before using this tool …`).
pub(crate) fn tag_not_placeholder(ctx: &MatchCtx<'_>) -> Outcome {
    let before = ctx.before();
    let after = ctx.after();
    let prev = before.chars().next_back();
    let next = after.chars().next();
    let quoted = matches!(prev, Some(q @ ('"' | '\'' | '`')) if next == Some(q));
    let assigned = prev == Some('=') && next.is_none_or(|c| c.is_whitespace() || c == ';');
    if quoted || assigned {
        Outcome::Drop
    } else {
        Outcome::Keep
    }
}

pub(crate) fn private_file_instruction(ctx: &MatchCtx<'_>) -> Outcome {
    let after = ctx.after();
    let path: String = after
        .chars()
        .take_while(|c| {
            !c.is_whitespace() && !matches!(c, '`' | '\'' | '"' | ')' | ';' | '|' | ',')
        })
        .collect();
    if path.ends_with(".pub") || path.ends_with("known_hosts") || path.ends_with("config.example") {
        return Outcome::Drop;
    }
    // `cat >> ~/.ssh/config <<EOF`: a write into the SSH client's configuration, not a read.
    let before = ctx.before();
    let matched = ctx.matched();
    let written = matched.contains('>')
        || matched.contains("tee ")
        || before.trim_end().ends_with('>')
        || before.contains("tee ");
    if written && path.ends_with("config") {
        return Outcome::Adjust(Severity::Low);
    }
    // `cat > ~/.config/acme/config.toml <<EOF`, `tee -a ~/.aws/config`: the path is the target of
    // a redirection or of tee, a write and not a read of what is there.
    let lower = matched.to_ascii_lowercase();
    let path_at = [
        "~",
        "$home",
        "${home}",
        "%userprofile%",
        "/home/",
        "/users/",
    ]
    .iter()
    .filter_map(|p| lower.rfind(p))
    .max();
    if let Some(at) = path_at {
        let prefix = lower.get(..at).unwrap_or("").trim_end();
        let prefix = prefix.trim_end_matches(['"', '\'']).trim_end();
        if prefix.ends_with('>')
            || prefix.ends_with("tee")
            || prefix.ends_with("tee -a")
            || prefix.ends_with("tee --append")
        {
            return Outcome::Adjust(Severity::Low);
        }
    }
    // "a skill that instructs the agent to read ~/.ssh is misaligned": the sentence describes
    // what something else tells the agent, it does not tell it.
    let lower_before = before.to_ascii_lowercase();
    let told = lower_before.trim_end();
    let described = ["that ", "which ", "who "].iter().any(|rel| {
        told.rfind(rel).is_some_and(|i| {
            let clause = told.get(i + rel.len()..).unwrap_or("");
            let words: Vec<&str> = clause.split_whitespace().collect();
            words.len() <= 5
                && words.first().is_some_and(|w| {
                    [
                        "instructs",
                        "tells",
                        "asks",
                        "directs",
                        "prompts",
                        "makes",
                        "gets",
                        "wants",
                        "lets",
                    ]
                    .contains(w)
                })
                && words.last() == Some(&"to")
        })
    });
    if described {
        return Outcome::Adjust(Severity::Low);
    }
    credential_file(ctx)
}

/// Private key blocks: the whole body must look like key material (real OpenSSH keys start
/// with long `AAAA` runs, so the repeated-run check of tokens does not apply).
pub(crate) fn private_key_block(ctx: &MatchCtx<'_>) -> Outcome {
    let from = ctx.caps.get(1).map_or(ctx.start(), |m| m.start());
    let rest = ctx.text.get(from..).unwrap_or("");
    let rest = rest.get(..rest.len().min(16 * 1024)).map_or(rest, |r| r);
    let body_end = rest.find("-----END").unwrap_or(rest.len());
    let body: String = rest
        .get(..body_end)
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let lower = body.to_ascii_lowercase();
    let marked = [
        "example",
        "placeholder",
        "xxxx",
        "redacted",
        "insert",
        "replace",
        "truncated",
    ]
    .iter()
    .chain(TEMPLATE_MARKERS)
    .any(|m| lower.contains(m));
    if marked || body.len() < 40 || entropy(&body) < 3.5 {
        Outcome::Drop
    } else {
        Outcome::Keep
    }
}

/// The last `n` characters of `s` (a slice, no copy).
pub(crate) fn last_chars(s: &str, n: usize) -> &str {
    let start = s
        .char_indices()
        .rev()
        .nth(n.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    if n == 0 {
        return "";
    }
    s.get(start..).unwrap_or(s)
}

/// The match sits inside a quotation on its line (an opening `"` or `“` before it, closed
/// after it) that the words before the quotation present as a discussed attack (`Common
/// payloads tell the model: "Ignore … and reveal the system prompt."`).
fn quoted_as_discussion(before: &str, after: &str) -> bool {
    let open = match (before.rfind('"'), before.rfind('“')) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let Some(open) = open else {
        return false;
    };
    let straight_open = before.matches('"').count() % 2 == 1;
    let curly_open = before.rfind('“') > before.rfind('”');
    let closed = after.contains('"') || after.contains('”');
    if !(straight_open || curly_open) || !closed {
        return false;
    }
    let lead = before.get(..open).unwrap_or("");
    if quote_opens_value(&format!("{lead}\"")) {
        return false;
    }
    let lead = last_chars(lead, 48).to_ascii_lowercase();
    DISCUSSION.iter().any(|d| lead.contains(d)) || lead.contains("payload")
}

/// Drops matches that are quoted (discussed, not given) or negated ("never ignore ...").
pub(crate) fn not_quoted_or_negated(ctx: &MatchCtx<'_>) -> Outcome {
    let start = ctx.start();
    let before = ctx.text.get(ctx.line_start..start).unwrap_or("");
    if let Some(c) = before.trim_end().chars().next_back() {
        if QUOTES.contains(&c) && !quote_opens_value(before) {
            return Outcome::Drop;
        }
    }
    if quoted_as_discussion(before, ctx.after()) {
        return Outcome::Drop;
    }
    let tail = last_chars(before, 24).to_ascii_lowercase();
    let negated = tail
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '\'')
        .any(|w| {
            matches!(
                w,
                "never"
                    | "not"
                    | "don't"
                    | "dont"
                    | "cannot"
                    | "can't"
                    | "won't"
                    | "shouldn't"
                    | "mustn't"
                    | "no"
            )
        });
    if negated {
        Outcome::Drop
    } else {
        Outcome::Keep
    }
}

/// Instructions to put data into a URL: as `not_quoted_or_negated`, except that a URL written
/// as code (`` `https://…?q=` followed by the summary``) is still an instruction.
pub(crate) fn data_into_url(ctx: &MatchCtx<'_>) -> Outcome {
    if !ctx.matched().starts_with("http") {
        return not_quoted_or_negated(ctx);
    }
    let before = ctx.before().to_ascii_lowercase();
    let negated = before
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '\'')
        .rev()
        .take(6)
        .any(|w| matches!(w, "never" | "not" | "don't" | "dont" | "cannot" | "can't"));
    if negated {
        Outcome::Drop
    } else {
        Outcome::Keep
    }
}

/// Data named before an open URL: as `data_into_url`; a `<placeholder>` that only names the
/// resource (`/guide/<version>`) is a link pattern, not data.
pub(crate) fn data_before_url(ctx: &MatchCtx<'_>) -> Outcome {
    let m = ctx.matched();
    if let Some(inner) = m
        .strip_suffix('>')
        .and_then(|r| r.rsplit_once('<'))
        .map(|(_, inner)| inner.replace(' ', "_"))
    {
        if names_a_resource(&inner) {
            return Outcome::Drop;
        }
    }
    // An instruction moves the data: a sentence that only shows what such a URL looks like
    // ("a password reset link looks like https://…?token=") is description.
    let from = ctx.start().saturating_sub(80).max(ctx.line_start);
    let from = (from..=ctx.start())
        .find(|&i| ctx.text.is_char_boundary(i))
        .unwrap_or(ctx.start());
    let sentence = ctx
        .text
        .get(from..ctx.end())
        .unwrap_or("")
        .to_ascii_lowercase();
    let moves = [
        "send", "add", "append", "put", "include", "visit", "open", "load", "fetch", "request",
        "render", "navigate", "call", "post", "submit", "go to", "encode", "attach", "embed",
        "insert", "display", "show", "output", "upload", "paste", "click",
    ]
    .iter()
    .any(|v| {
        sentence
            .split(|c: char| !c.is_ascii_alphabetic() && c != ' ')
            .any(|part| {
                part.split(' ').any(|w| w.starts_with(v)) || part.contains(v) && v.contains(' ')
            })
    });
    if !moves {
        return Outcome::Drop;
    }
    data_into_url(ctx)
}

/// `eval`/`exec` called as a method (`df.eval(x)`, `regex.exec(s)`) is not Python/JS eval.
pub(crate) fn not_method_call(ctx: &MatchCtx<'_>) -> Outcome {
    let before = ctx.text.get(..ctx.start()).unwrap_or("");
    match before.chars().next_back() {
        Some('.') | Some(':') | Some('$') => Outcome::Drop,
        _ => Outcome::Keep,
    }
}

/// Hosts of well-known installers whose `curl | sh` is reported as low instead of high.
const KNOWN_INSTALLERS: &[&str] = &[
    "sh.rustup.rs",
    "static.rust-lang.org",
    "get.docker.com",
    "raw.githubusercontent.com/homebrew/",
    "install.python-poetry.org",
    "astral.sh",
    "bun.sh",
    "deno.land",
    "get.pnpm.io",
    "raw.githubusercontent.com/nvm-sh/",
    "ollama.com",
    "get.sdkman.io",
    "cli.github.com",
    "sh.vector.dev",
    "nixos.org",
    "install.determinate.systems",
    "get.helm.sh",
    "raw.githubusercontent.com/helm/",
    "get.volta.sh",
    "install.julialang.org",
    "foundry.paradigm.xyz",
    "get.pulumi.com",
    "cli.doppler.com",
    "fnm.vercel.app",
    "get.k3s.io",
    "mise.run",
    "starship.rs",
    "pyenv.run",
    "get.scoop.sh",
    "tailscale.com",
    "get.trunk.io",
    "dot.net",
    "aka.ms",
    "fly.io",
    "railway.com",
    "claude.ai",
    "opencode.ai",
    "get.jetify.com",
    "sh.brew.sh",
    "install.pulumi.com",
    "get.rvm.io",
    "raw.githubusercontent.com/rust-lang/",
    "raw.githubusercontent.com/pyenv/",
    "raw.githubusercontent.com/ohmyzsh/",
    "cdn.jsdelivr.net/gh/j178/prek",
    "setup.pnpm.io",
    "get.bun.sh",
    "install.duckdb.org",
    "go.dev",
    "dl.google.com",
    "downloads.nordcdn.com",
    "cli.coderabbit.ai",
    "deb.nodesource.com",
    "rpm.nodesource.com",
];

/// A release asset of a GitHub project named like a vendor installer (`…-installer.sh`,
/// `install.sh`, `install.ps1`), the way cargo-dist, prek, uv and others publish them.
fn github_release_installer(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("github.com/") else {
        return false;
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let file = parts.last().copied().unwrap_or("");
    parts.len() >= 5
        && parts.get(2) == Some(&"releases")
        && (parts.get(3) == Some(&"download") || parts.get(3) == Some(&"latest"))
        && (file.ends_with("-installer.sh")
            || file.ends_with("-installer.ps1")
            || file == "install.sh"
            || file == "install.ps1")
}

/// A project's own install script at a conventional place of its GitHub repository
/// (`raw.githubusercontent.com/OWNER/REPO/REF/install.sh`, `…/scripts/install.sh`,
/// `github.com/OWNER/REPO/raw/REF/install.sh`), the way most command-line tools document their
/// installation. As with release installers, the script is reported as low, not hidden.
fn github_repository_installer(url: &str) -> bool {
    let parts: Vec<&str> = if let Some(rest) = url.strip_prefix("raw.githubusercontent.com/") {
        rest.split('/').collect()
    } else if let Some(rest) = url.strip_prefix("github.com/") {
        let p: Vec<&str> = rest.split('/').collect();
        if p.get(2) != Some(&"raw") {
            return false;
        }
        p.iter()
            .enumerate()
            .filter(|(i, _)| *i != 2)
            .map(|(_, s)| *s)
            .collect()
    } else {
        return false;
    };
    // OWNER / REPO / REF / [one or two folders /] FILE
    let file = parts.last().copied().unwrap_or("");
    let file = file.split(['?', '#']).next().unwrap_or(file);
    let installer_name = matches!(file, "install.sh" | "installer.sh" | "install" | "get.sh")
        || file.ends_with("-installer.sh")
        || file.ends_with("-install.sh");
    (4..=6).contains(&parts.len())
        && parts.iter().all(|p| !p.is_empty() && *p != "..")
        && installer_name
}

/// Reports `curl | sh` from a well-known installer as low.
pub(crate) fn known_installer(ctx: &MatchCtx<'_>) -> Outcome {
    let mut m = ctx.matched().to_ascii_lowercase();
    if !m.contains("://") {
        // `sh -c "$(curl ...` ends at the command: the URL is in the rest of the substitution.
        let rest = ctx.after();
        let rest = rest.split(')').next().unwrap_or(rest);
        m.push_str(&rest.to_ascii_lowercase());
    }
    if installer_url(&m) {
        Outcome::Adjust(Severity::Low)
    } else {
        Outcome::Keep
    }
}

/// Whether the one URL of lowercase text `m` is a well-known vendor installer.
pub(crate) fn installer_url(m: &str) -> bool {
    let Some(i) = m.find("https://") else {
        return false;
    };
    let rest = m.get(i + "https://".len()..).unwrap_or("");
    let url_end = rest
        .find(|c: char| c.is_whitespace() || c == '\'' || c == '"' || c == '|' || c == ')')
        .unwrap_or(rest.len());
    let url = rest.get(..url_end).unwrap_or("");
    // Only one URL may be involved, or the installer could front for another download.
    if rest.get(url_end..).is_some_and(|r| r.contains("://")) {
        return false;
    }
    let host_end = url.find(['/', ':', '?', '#']).unwrap_or(url.len());
    let host = url.get(..host_end).unwrap_or("");
    let known = KNOWN_INSTALLERS.iter().any(|k| {
        if k.contains('/') {
            url.starts_with(k)
        } else {
            host == *k || host.ends_with(&format!(".{k}"))
        }
    });
    known || github_release_installer(url) || github_repository_installer(url)
}

/// Words a URL template names its resource with (`{owner}/{repo}/pull/{number}`,
/// `?version={version}`): filled in, they say which page to open, not what the user said.
const RESOURCE_WORDS: &[&str] = &[
    "owner",
    "org",
    "organization",
    "organisation",
    "user",
    "username",
    "login",
    "repo",
    "repository",
    "project",
    "number",
    "num",
    "id",
    "issue",
    "pr",
    "pull",
    "branch",
    "tag",
    "ref",
    "sha",
    "commit",
    "version",
    "ver",
    "release",
    "slug",
    "page",
    "lang",
    "locale",
    "language",
    "year",
    "month",
    "day",
    "date",
    "package",
    "pkg",
    "crate",
    "module",
    "team",
    "workspace",
    "namespace",
    "ns",
    "region",
    "zone",
    "service",
    "app",
    "major",
    "minor",
    "patch",
    "build",
    "run",
    "job",
    "workflow",
    "milestone",
    "label",
    "discussion",
    "gist",
    "os",
    "arch",
    "platform",
    "target",
    "ext",
    "format",
    "width",
    "height",
    "size",
    "host",
    "port",
    "name",
    "site",
    "baseurl",
    "base",
    "url",
    "static",
    "asset",
    "assets",
    "image",
    "img",
    "icon",
    "logo",
    "theme",
    "color",
    "colour",
    "style",
    "account",
    "tenant",
    "instance",
    "subdomain",
    "domain",
    "server",
    "cluster",
    "bucket",
    "container",
    "database",
    "db",
    "table",
    "dataset",
    "index",
    "collection",
    "model",
    "endpoint",
    "api",
    "uid",
    "userid",
    "pid",
    "github",
    "gitlab",
    "path",
    "file",
    "filename",
    "dir",
    "folder",
    "query",
    "term",
    "search",
    "keyword",
    "keywords",
    "topic",
    "category",
    "chart",
    "sort",
    "order",
    "limit",
    "offset",
];

/// The placeholder names of a URL: `{name}`, `{{ name }}`, `${name}`, `$name`, `<name>`,
/// `%7Bname%7D`, `[NAME]`; `None` stands for a nameless one (`%s`, `{}`).
fn url_placeholders(url: &str) -> Vec<Option<String>> {
    let name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let mut out = Vec::new();
    let lower = url.to_ascii_lowercase();
    let mut rest = lower.as_str();
    while let Some(i) = rest.find(['{', '$', '<', '[', '%']) {
        let tail = rest.get(i..).unwrap_or("");
        let (open_len, close): (usize, &[&str]) = if tail.starts_with("%7b") {
            (3, &["%7d"])
        } else if tail.starts_with("%s") {
            out.push(None);
            (2, &[])
        } else if tail.starts_with('%') {
            // `%USER_QUESTION%`, not a percent-encoded byte (`%E2%80`).
            let name: String = tail
                .get(1..)
                .unwrap_or("")
                .chars()
                .take_while(|c| c.is_ascii_alphabetic() || *c == '_')
                .collect();
            if name.len() >= 4
                && tail
                    .get(1 + name.len()..)
                    .is_some_and(|r| r.starts_with('%'))
            {
                out.push(Some(name.clone()));
                rest = tail.get(2 + name.len()..).unwrap_or("");
                continue;
            }
            (1, &[])
        } else if tail.starts_with("${") {
            (2, &["}"])
        } else if tail.starts_with('$') {
            (1, &[""])
        } else if tail.starts_with('<') {
            (1, &[">"])
        } else if tail.starts_with('[') {
            (1, &["]"])
        } else {
            (1, &["}"])
        };
        let inner = tail.get(open_len..).unwrap_or("");
        let inner = inner.trim_start_matches(['{', ' ']);
        let name: String = inner.chars().take_while(|&c| name_char(c)).collect();
        let after = inner
            .get(name.len()..)
            .unwrap_or("")
            .trim_start_matches(' ');
        if let Some(c) = close.first() {
            if c.is_empty() || after.starts_with(c) {
                out.push(if name.is_empty() { None } else { Some(name) });
            }
        }
        rest = tail.get(open_len.max(1)..).unwrap_or("");
    }
    out
}

/// True when a placeholder name is made only of resource words (`repo`, `issue_number`,
/// `packageName`).
fn names_a_resource(name: &str) -> bool {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    for c in name.chars() {
        if matches!(c, '_' | '-' | '.') {
            words.push(std::mem::take(&mut word));
        } else {
            word.push(c.to_ascii_lowercase());
        }
    }
    words.push(word);
    words.retain(|w| !w.is_empty());
    !words.is_empty()
        && words.iter().all(|w| RESOURCE_WORDS.contains(&w.as_str()))
        // `{name}` alone may be the user's name; `{repo_name}` is a resource.
        && words.iter().any(|w| w != "name")
}

/// Markdown/HTML image and link beacons: a URL template whose every placeholder names the
/// resource (`https://github.com/{owner}/{repo}/pull/{number}`) is a link pattern, reported as
/// low; a placeholder for anything else (conversation, secrets, `%s`) keeps the rule's
/// severity.
pub(crate) fn data_placeholders(ctx: &MatchCtx<'_>) -> Outcome {
    let m = ctx.matched();
    let url_at = m.find("](").map_or(0, |i| i + 2);
    let from = m
        .get(url_at..)
        .and_then(|t| t.find("http"))
        .map_or(ctx.start(), |i| ctx.start() + url_at + i);
    let rest = ctx.text.get(from..ctx.line_end).unwrap_or("");
    // The URL ends at a space, a quote or `)`, except inside a `{{ name }}` template.
    let mut depth = 0usize;
    let mut url_end = rest.len();
    for (i, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            c if depth == 0 && (c.is_whitespace() || matches!(c, ')' | '"' | '\'' | '`')) => {
                url_end = i;
                break;
            }
            _ => {}
        }
    }
    let url = rest.get(..url_end).unwrap_or("");
    let names = url_placeholders(url);
    if !names.is_empty()
        && names
            .iter()
            .all(|n| n.as_deref().is_some_and(names_a_resource))
    {
        Outcome::Adjust(Severity::Low)
    } else {
        Outcome::Keep
    }
}

/// The words of an identifier, lowercased (`GITHUB_TOKEN`, `openaiApiKey`, `gh-pat`).
fn identifier_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            words.push(std::mem::take(&mut word));
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower {
            words.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        word.push(c.to_ascii_lowercase());
    }
    words.push(word);
    words.retain(|w| !w.is_empty());
    words
}

/// Words that make a name a credential's.
const CREDENTIAL_WORDS: &[&str] = &[
    "token",
    "tokens",
    "secret",
    "secrets",
    "key",
    "apikey",
    "password",
    "passwd",
    "pwd",
    "credential",
    "credentials",
    "creds",
    "pat",
];

/// Words of a credential's name that do not name its service.
const GENERIC_CREDENTIAL_WORDS: &[&str] = &[
    "api",
    "access",
    "client",
    "auth",
    "private",
    "bot",
    "app",
    "id",
    "user",
    "personal",
    "env",
    "prod",
    "production",
    "dev",
    "live",
    "test",
    "my",
    "account",
    "service",
    "bearer",
    "oauth",
    "refresh",
    "session",
    "signing",
    "webhook",
    "the",
    "default",
    "admin",
    "master",
    "root",
    "read",
    "write",
    "org",
    "team",
    "project",
    "workspace",
    "cloud",
    "http",
    "https",
    "url",
    "v1",
    "v2",
    "value",
    "data",
    "new",
    "old",
    "local",
    "global",
    "shared",
    "public",
    "publishable",
];

/// Short names and the host names of their services.
const SERVICE_ALIASES: &[(&str, &[&str])] = &[
    ("gh", &["github"]),
    ("hf", &["huggingface", "hf.co"]),
    ("aws", &["amazonaws", "aws"]),
    ("gcp", &["google"]),
    ("gcloud", &["google"]),
    ("google", &["google"]),
    ("az", &["azure", "microsoft", "windows.net"]),
    ("azure", &["azure", "microsoft", "windows.net"]),
    ("jira", &["atlassian"]),
    ("confluence", &["atlassian"]),
    ("bitbucket", &["bitbucket", "atlassian"]),
    ("dd", &["datadog"]),
    ("cf", &["cloudflare"]),
    ("hubspot", &["hubapi", "hubspot"]),
    ("npm", &["npmjs", "npm"]),
    ("tg", &["telegram"]),
    ("telegram", &["telegram", "t.me"]),
    ("twitter", &["twitter", "x.com"]),
    ("claude", &["anthropic"]),
    ("gemini", &["google"]),
    ("ms", &["microsoft", "azure"]),
    ("teams", &["microsoft", "office"]),
];

fn is_credential_name(name: &str) -> bool {
    identifier_words(name)
        .iter()
        .any(|w| CREDENTIAL_WORDS.contains(&w.as_str()))
}

/// The first capture group that took part in the match.
fn first_group<'a>(ctx: &MatchCtx<'a>) -> Option<regex::Match<'a>> {
    ctx.caps.iter().skip(1).flatten().next()
}

/// DNS names built from a variable: only a credential's name counts.
pub(crate) fn secret_named_variable(ctx: &MatchCtx<'_>) -> Outcome {
    match first_group(ctx) {
        Some(g) if is_credential_name(g.as_str()) => Outcome::Keep,
        _ => Outcome::Drop,
    }
}

/// A credential named after a service, put into the body or query of a request: kept when the
/// request goes to a host that does not carry the service's name (a credential sent to its own
/// service is authentication). Names without a service (`API_KEY`), requests to a host held in
/// a variable and credentials in headers are left alone.
pub(crate) fn secret_to_other_host(ctx: &MatchCtx<'_>) -> Outcome {
    let Some(g) = first_group(ctx) else {
        return Outcome::Drop;
    };
    let name = g.as_str();
    if !is_credential_name(name) {
        return Outcome::Drop;
    }
    // A raw socket carrying a credential is never authentication.
    if ctx.matched().contains(".send") && !ctx.matched().contains("://") {
        return Outcome::Keep;
    }
    let line = ctx.line();
    let lower = line.to_ascii_lowercase();
    let at = g.start().saturating_sub(ctx.line_start);
    let before = lower.get(..at).unwrap_or("");
    // `headers={…}` or `auth=` between the body keyword and the credential: authentication.
    let body_at = [
        "json", "data", "params", "files", "body", "fields", "form", "qs", "?", "&",
    ]
    .iter()
    .filter_map(|k| before.rfind(k))
    .max();
    let header_at = [
        "headers",
        "auth=",
        "authorization",
        "-h ",
        "--header",
        "-u ",
    ]
    .iter()
    .filter_map(|k| before.rfind(k))
    .max();
    if header_at.is_some_and(|h| body_at.is_none_or(|b| h > b)) {
        return Outcome::Drop;
    }
    let Some(host) = first_public_host(&lower) else {
        return Outcome::Drop;
    };
    match belongs_to_host(name, host) {
        Some(false) => Outcome::Keep,
        _ => Outcome::Drop,
    }
}

/// The host of the first URL of a (lowercased) line, unless it is local or private.
fn first_public_host(lower: &str) -> Option<&str> {
    let i = lower.find("://")?;
    let rest = lower.get(i + 3..).unwrap_or("");
    let host_end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-'))
        .unwrap_or(rest.len());
    let host = rest.get(..host_end).unwrap_or("");
    let local = host.is_empty()
        || host == "localhost"
        || host.starts_with("127.")
        || host.starts_with("10.")
        || host.starts_with("192.168.");
    (!local).then_some(host)
}

/// Whether a credential's name carries the name of `host`'s service (`TAVILY_API_KEY` and
/// `api.tavily.com`); `None` when the name names no service (`API_KEY`).
fn belongs_to_host(name: &str, host: &str) -> Option<bool> {
    let services: Vec<String> = identifier_words(name)
        .into_iter()
        .filter(|w| {
            !CREDENTIAL_WORDS.contains(&w.as_str())
                && !GENERIC_CREDENTIAL_WORDS.contains(&w.as_str())
                && !w.chars().all(|c| c.is_ascii_digit())
        })
        .collect();
    if services.is_empty() {
        return None;
    }
    Some(services.iter().any(|w| {
        w.len() >= 3 && host.contains(w.as_str())
            || SERVICE_ALIASES
                .iter()
                .filter(|(alias, _)| alias == w)
                .any(|(_, hosts)| hosts.iter().any(|h| host.contains(h)))
    }))
}

/// A secret in a request body: a credential read from the environment under its service's
/// name and sent to that service's host (`json={"api_key": os.environ["TAVILY_API_KEY"]}` to
/// api.tavily.com) is authentication, reported as low.
pub(crate) fn secret_post(ctx: &MatchCtx<'_>) -> Outcome {
    let line = ctx.line();
    let lower = line.to_ascii_lowercase();
    let Some(host) = first_public_host(&lower) else {
        return Outcome::Keep;
    };
    let own = env_reads(line)
        .filter(|n| is_credential_name(n))
        .any(|n| belongs_to_host(n, host) == Some(true));
    if own {
        Outcome::Adjust(Severity::Low)
    } else {
        Outcome::Keep
    }
}

/// Names read from the environment on a line: `os.environ["X"]`, `os.getenv("X")`,
/// `process.env.X`, `$X`, `${X}`.
fn env_reads(line: &str) -> impl Iterator<Item = &str> {
    let mut names = Vec::new();
    for opener in [
        "os.environ[\"",
        "os.environ['",
        "os.environ.get(\"",
        "os.environ.get('",
        "os.getenv(\"",
        "os.getenv('",
        "process.env.",
        "process.env[\"",
        "process.env['",
        "${",
        "$",
    ] {
        let mut from = 0;
        while let Some(i) = line.get(from..).and_then(|l| l.find(opener)) {
            let at = from + i + opener.len();
            let rest = line.get(at..).unwrap_or("");
            let n = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            if n > 0 {
                names.push(rest.get(..n).unwrap_or(""));
            }
            from = at;
        }
    }
    names.into_iter()
}

/// Chat webhooks: a Telegram bot or Discord webhook whose token is a variable or placeholder
/// is the user's own configured bot, reported as low; a hard-coded one is someone's sink.
pub(crate) fn webhook_endpoint(ctx: &MatchCtx<'_>) -> Outcome {
    let m = ctx.matched().to_ascii_lowercase();
    if !(m.ends_with("/bot") || m.ends_with("/api/webhooks/")) {
        return Outcome::Keep;
    }
    let after = ctx.after();
    // A webhook given as a variable, or only the prefix a URL is checked against
    // (`url.startsWith('https://discord.com/api/webhooks/')`): no webhook of the skill's own.
    let templated = [
        "$", "{", "<", "%", "\" +", "' +", "\"+", "'+", "'", "\"", "`",
    ]
    .iter()
    .any(|p| after.starts_with(p));
    if templated {
        Outcome::Adjust(Severity::Low)
    } else {
        Outcome::Keep
    }
}

/// Keeps only public IPv4 literals/// Keeps only public IPv4 literals (loopback, private, link-local and unspecified are fine).
pub(crate) fn public_ip(ctx: &MatchCtx<'_>) -> Outcome {
    let host = ctx.value();
    let addr: Option<std::net::Ipv4Addr> =
        if let Some(hex) = host.strip_prefix("0x").or_else(|| host.strip_prefix("0X")) {
            u32::from_str_radix(hex, 16)
                .ok()
                .map(std::net::Ipv4Addr::from)
        } else if host.contains('.') {
            host.parse().ok()
        } else {
            host.parse::<u32>().ok().map(std::net::Ipv4Addr::from)
        };
    let Some(addr) = addr else {
        return Outcome::Drop;
    };
    let o = addr.octets();
    let shared = o[0] == 100 && (64..128).contains(&o[1]);
    if addr.is_loopback()
        || addr.is_private()
        || addr.is_link_local()
        || addr.is_unspecified()
        || addr.is_broadcast()
        || shared
    {
        Outcome::Drop
    } else {
        Outcome::Keep
    }
}

const NETWORK_WORDS: &[&str] = &[
    "curl",
    "wget",
    "http://",
    "https://",
    "requests.",
    "urlopen",
    "fetch(",
    "axios",
    "httpx",
    "socket",
    "| nc",
    "|nc",
    "ncat",
    "scp ",
    "rsync ",
    "upload",
    "/dev/tcp",
];

fn mentions_network(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    NETWORK_WORDS.iter().any(|w| lower.contains(w))
}

/// Escalates to high when the same line also reaches the network.
pub(crate) fn escalate_if_network(ctx: &MatchCtx<'_>) -> Outcome {
    if mentions_network(ctx.line()) {
        Outcome::Adjust(Severity::High)
    } else {
        Outcome::Keep
    }
}

/// Environment iteration counts only in code that also names secrets and reaches the network.
pub(crate) fn env_harvest_context(ctx: &MatchCtx<'_>) -> Outcome {
    let text = ctx.text;
    let upper_secretish = [
        "\"KEY\"",
        "\"SECRET\"",
        "\"TOKEN\"",
        "\"PASSWORD\"",
        "'KEY'",
        "'SECRET'",
        "'TOKEN'",
        "'PASSWORD'",
        "CREDENTIAL",
    ]
    .iter()
    .any(|w| text.contains(w));
    let network = [
        "requests.post",
        "requests.put",
        "urlopen",
        "http.client",
        "socket.",
        "fetch(",
        "axios.post",
        "httpx.post",
    ]
    .iter()
    .any(|w| text.contains(w));
    if upper_secretish && network {
        Outcome::Keep
    } else {
        Outcome::Drop
    }
}

/// An HTML comment counts when it addresses the model and asks for an action.
pub(crate) fn hidden_comment(ctx: &MatchCtx<'_>) -> Outcome {
    let inner = ctx.value().to_ascii_lowercase();
    if inner.len() < 12 {
        return Outcome::Drop;
    }
    let words: Vec<&str> = inner
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .collect();
    let has = |list: &[&str]| words.iter().any(|w| list.contains(w));
    let addressed = has(&[
        "ai",
        "assistant",
        "agent",
        "llm",
        "claude",
        "gpt",
        "model",
        "chatbot",
    ]) || inner.contains("you must")
        || inner.contains("you should")
        || inner.contains("you will")
        || inner.contains("you are");
    let action = has(&[
        "ignore",
        "disregard",
        "execute",
        "run",
        "send",
        "upload",
        "exfiltrate",
        "read",
        "fetch",
        "curl",
        "wget",
        "tell",
        "mention",
        "reveal",
        "delete",
        "instructions",
        "instruction",
        "credentials",
        "password",
        "secret",
        "token",
        "download",
        "install",
        "forward",
        "email",
    ]);
    if addressed && action {
        Outcome::Keep
    } else {
        Outcome::Drop
    }
}

/// Text hidden in an HTML element: kept when it addresses the model and asks for an action
/// (as for comments), or asks to set instructions aside, conceal or move data.
pub(crate) fn hidden_html(ctx: &MatchCtx<'_>) -> Outcome {
    if hidden_comment(ctx) == Outcome::Keep {
        return Outcome::Keep;
    }
    if holds_any(&ctx.value().to_ascii_lowercase(), HIDDEN_STRONG) {
        Outcome::Keep
    } else {
        Outcome::Drop
    }
}

/// Decode-and-follow: dropped when discussed ("attackers ask the model to decode … and follow
/// it", "for example", "detect"), negated ("never decode and run …") or quoted.
pub(crate) fn decode_and_follow(ctx: &MatchCtx<'_>) -> Outcome {
    let before = ctx.before().to_ascii_lowercase();
    let discussed = [
        "such as",
        "e.g.",
        "for example",
        "example",
        "attacker",
        "attack",
        "detect",
        "flag ",
        "flags ",
        "pattern",
        "technique",
        "payloads like",
        "phrases like",
    ]
    .iter()
    .any(|w| before.contains(w));
    let negated = ["never ", "do not ", "don't ", "dont ", "not ", "refuse to "]
        .iter()
        .any(|w| before.trim_end().ends_with(w.trim_end()) || before.contains(w));
    if discussed || negated || before.trim_end().ends_with(QUOTES) {
        Outcome::Drop
    } else {
        Outcome::Keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropy_of_uniform_and_constant() {
        assert_eq!(entropy(""), 0.0);
        assert_eq!(entropy("aaaa"), 0.0);
        assert!((entropy("abcd") - 2.0).abs() < 1e-9);
    }

    #[test]
    fn placeholders() {
        assert!(is_placeholder("AKIAIOSFODNN7EXAMPLE"));
        assert!(is_placeholder("your-api-key-here"));
        assert!(is_placeholder("xxxxxxxxxxxxxxxx"));
        assert!(is_placeholder("${OPENAI_API_KEY}"));
        assert!(!is_placeholder("q8Zr2LmN4vTx9KpW"));
        assert!(is_sequential("abc123def456ghi789jkl012mno345"));
        assert!(is_sequential("1234567890abcdef"));
        assert!(!is_sequential("q8zr2lmn4vtx9kpwb7c1"));
    }
}
