//! Target parsing: the strict allow-list of contract section 7. Pure; no network.
//!
//! Architecture Invariant: the only address the Guard will ever fetch is
//! `https://github.com/OWNER/REPO` (optionally ending in `/` or `.git`), with OWNER and REPO as
//! GitHub allows them. Any other single token that looks like an address (a scheme, `//`,
//! `user@host:`, a host name, an IP literal, a file path) is refused before any network
//! activity. Everything else is pasted content, except ZIP archives, which are refused too.

/// What the user asked to scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Pasted skill content (the text as given).
    Content(String),
    /// A public GitHub repository.
    Repository { owner: String, repo: String },
}

/// Why a target is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// An address other than `https://github.com/OWNER/REPO` (`target_not_allowed`).
    #[error("only https://github.com/OWNER/REPO addresses are allowed")]
    NotAllowed,
    /// A ZIP archive, raw or base64 (`archive_not_accepted`).
    #[error("archives are not accepted; paste the skill's text or give its GitHub repository")]
    Archive,
    /// Nothing to scan.
    #[error("the target is empty")]
    Empty,
}

const ZIP_MAGICS: &[&[u8]] = &[b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08"];
const ZIP_MAGICS_B64: &[&str] = &["UEsDB", "UEsFBg", "UEsHCA"];

fn is_zip(s: &str) -> bool {
    let t = s.trim_start();
    if ZIP_MAGICS
        .iter()
        .any(|m| s.as_bytes().starts_with(m) || t.as_bytes().starts_with(m))
    {
        return true;
    }
    let b64 = match t.find("base64,") {
        Some(i) if t.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("data:")) => {
            t.get(i + 7..).unwrap_or("")
        }
        _ => t,
    };
    ZIP_MAGICS_B64.iter().any(|m| b64.starts_with(m))
}

/// Parses a scan target.
pub fn parse_target(input: &str) -> Result<Target, TargetError> {
    if is_zip(input) {
        return Err(TargetError::Archive);
    }
    let token = input.trim();
    if token.is_empty() {
        return Err(TargetError::Empty);
    }
    if !token.contains('\n') && starts_with_scheme(token) {
        // One line that starts like an absolute URL: a URL parser would accept it (inner
        // spaces get percent-encoded), so it must be the exact allowed form.
        return github_repository(token).map_or(Err(TargetError::NotAllowed), |(owner, repo)| {
            Ok(Target::Repository { owner, repo })
        });
    }
    if token.chars().any(char::is_whitespace) {
        // Several words or lines: pasted content (addresses inside it are scanned, not fetched).
        return Ok(Target::Content(input.to_string()));
    }
    if let Some((owner, repo)) = github_repository(token) {
        return Ok(Target::Repository { owner, repo });
    }
    if looks_like_address(token) {
        return Err(TargetError::NotAllowed);
    }
    Ok(Target::Content(input.to_string()))
}

fn starts_with_scheme(token: &str) -> bool {
    let Some(i) = token.find(':') else {
        return false;
    };
    let scheme = &token[..i];
    let mut chars = scheme.chars();
    let shaped = chars.next().is_some_and(|c| c.is_alphabetic())
        && chars.all(|c| c.is_alphanumeric() || matches!(c, '+' | '-' | '.'));
    let known = [
        "http",
        "https",
        "ftp",
        "ftps",
        "file",
        "ssh",
        "git",
        "sftp",
        "mailto",
        "data",
        "javascript",
        "mcp",
        "sse",
        "ws",
        "wss",
        "tcp",
        "udp",
        "unix",
        "stdio",
        "smb",
        "ldap",
        "gopher",
        "dict",
    ];
    shaped
        && (token[i + 1..].starts_with("//")
            || known.contains(&scheme.to_ascii_lowercase().as_str()))
}

/// `https://github.com/OWNER/REPO`, `.../REPO/` or `.../REPO.git`, exactly.
fn github_repository(token: &str) -> Option<(String, String)> {
    let rest = token.strip_prefix("https://github.com/")?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (owner, repo) = rest.split_once('/')?;
    let repo = repo.strip_suffix(".git").unwrap_or(repo);
    (valid_owner(owner) && valid_repo(repo)).then(|| (owner.to_string(), repo.to_string()))
}

/// GitHub user and organisation names: 1 to 39 ASCII letters, digits or single inner hyphens.
pub fn valid_owner(owner: &str) -> bool {
    let b = owner.as_bytes();
    !b.is_empty()
        && b.len() <= 39
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        && b.first() != Some(&b'-')
        && b.last() != Some(&b'-')
        && !owner.contains("--")
}

/// GitHub repository names: 1 to 100 ASCII letters, digits, `.`, `_` or `-`, not `.` or `..`.
pub fn valid_repo(repo: &str) -> bool {
    let b = repo.as_bytes();
    !b.is_empty()
        && b.len() <= 100
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
        && repo != "."
        && repo != ".."
}

fn looks_like_address(token: &str) -> bool {
    let lower = token.to_lowercase();
    // Any scheme (http:, ssh:, file:, mcp:, sse:, data:, javascript: ...), also after look-alike
    // or full-width characters: a colon after a leading word is enough.
    if let Some(i) = lower.find(':') {
        let scheme = &lower[..i];
        if !scheme.is_empty() && !scheme.contains('/') && !scheme.contains('@') {
            return true;
        }
    }
    if lower.contains("://") || lower.contains(":\\") || lower.contains('\u{ff1a}') {
        return true;
    }
    // Scheme-relative, UNC and file paths.
    if lower.starts_with("//")
        || lower.starts_with("\\\\")
        || lower.starts_with('/')
        || lower.starts_with("~/")
        || lower.starts_with("./")
        || lower.starts_with("../")
    {
        return true;
    }
    // user@host:path (scp-like git remotes) and user@host.
    if let Some(at) = lower.find('@') {
        let after = &lower[at + 1..];
        if after.contains(':') || after.contains('.') {
            return true;
        }
    }
    // A host name, IP literal or host:port at the start of the token.
    let host_end = lower.find(['/', '?', '#']).unwrap_or(lower.len());
    let host = &lower[..host_end];
    if host.starts_with('[') {
        return true;
    }
    let host_no_port = host.rsplit_once(':').map_or(host, |(h, _)| h);
    if host_no_port == "localhost" || host_no_port.ends_with(".localhost") {
        return true;
    }
    let labels: Vec<&str> = host_no_port.split('.').collect();
    if labels.len() >= 2 {
        let tld = labels.last().copied().unwrap_or("");
        let all_digits = labels
            .iter()
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()));
        let tld_ok = tld.len() >= 2 && tld.chars().all(|c| c.is_alphabetic() || c == '-')
            || tld.starts_with("xn--");
        let labels_ok = labels
            .iter()
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_alphanumeric() || c == '-'));
        if all_digits || (tld_ok && labels_ok) {
            return true;
        }
    }
    // Decimal or hex encoded IPv4 (http://2130706433, 0x7f000001) without a scheme.
    if host_no_port.starts_with("0x")
        && host_no_port.len() > 2
        && host_no_port[2..].bytes().all(|b| b.is_ascii_hexdigit())
    {
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(o: &str, r: &str) -> Result<Target, TargetError> {
        Ok(Target::Repository {
            owner: o.into(),
            repo: r.into(),
        })
    }

    #[test]
    fn accepts_exact_github_repositories() {
        assert_eq!(
            parse_target("https://github.com/acme/tool"),
            repo("acme", "tool")
        );
        assert_eq!(
            parse_target("https://github.com/acme/tool/"),
            repo("acme", "tool")
        );
        assert_eq!(
            parse_target("https://github.com/acme/tool.git"),
            repo("acme", "tool")
        );
        assert_eq!(
            parse_target("  https://github.com/a-b/c.d_e-f\n"),
            repo("a-b", "c.d_e-f")
        );
        assert_eq!(
            parse_target("https://github.com/Org9/.github"),
            repo("Org9", ".github")
        );
        let long_owner = "a".repeat(39);
        assert_eq!(
            parse_target(&format!("https://github.com/{long_owner}/r")),
            repo(&long_owner, "r")
        );
    }

    #[test]
    fn refuses_hostile_addresses() {
        let hostile = [
            // Other hosts and look-alikes.
            "https://gitlab.com/acme/tool",
            "https://github.io/acme/tool",
            "https://www.github.com/acme/tool",
            "https://api.github.com/repos/acme/tool",
            "https://raw.githubusercontent.com/acme/tool/main/SKILL.md",
            "https://codeload.github.com/acme/tool/tar.gz/main",
            "https://gist.github.com/acme/123",
            "https://github.com.evil.com/acme/tool",
            "https://evil.com/github.com/acme/tool",
            "https://githubb.com/acme/tool",
            "https://gіthub.com/acme/tool",
            "https://xn--gthub-n4a.com/acme/tool",
            "https://github.com./acme/tool",
            "https://GITHUB.COM/acme/tool",
            "HTTPS://github.com/acme/tool",
            "ｈｔｔｐｓ://github.com/acme/tool",
            // Credentials, ports.
            "https://user@github.com/acme/tool",
            "https://user:pass@github.com/acme/tool",
            "https://github.com@evil.com/acme/tool",
            "https://github.com:443/acme/tool",
            "https://github.com:8080/acme/tool",
            "https://github.com\\@evil.com/acme/tool",
            // Paths, query, fragment, encodings.
            "https://github.com/acme",
            "https://github.com/acme/",
            "https://github.com/acme/tool/tree/main",
            "https://github.com/acme/tool/blob/main/SKILL.md",
            "https://github.com/acme/tool/archive/refs/heads/main.zip",
            "https://github.com/acme/tool/releases/download/v1/x.exe",
            "https://github.com/acme/tool//",
            "https://github.com//acme/tool",
            "https://github.com/acme/tool?ref=dev",
            "https://github.com/acme/tool#readme",
            "https://github.com/acme/%2e%2e",
            "https://github.com/acme/..",
            "https://github.com/../acme/tool",
            "https://github.com/-acme/tool",
            "https://github.com/acme-/tool",
            "https://github.com/ac--me/tool",
            "https://github.com/ac_me/tool",
            "https://github.com/acme/to ol",
            &format!("https://github.com/{}/tool", "a".repeat(40)),
            &format!("https://github.com/acme/{}", "r".repeat(101)),
            // Other schemes.
            "http://github.com/acme/tool",
            "ssh://git@github.com/acme/tool.git",
            "git://github.com/acme/tool.git",
            "git+https://github.com/acme/tool",
            "git@github.com:acme/tool.git",
            "github.com:acme/tool",
            "file:///etc/passwd",
            "file://localhost/etc/passwd",
            "ftp://example.com/skill.md",
            "data:text/plain,hello",
            "javascript:alert(1)",
            "mcp://tools.example.com/sse",
            "sse://tools.example.com/events",
            "ws://127.0.0.1:9000/mcp",
            "wss://mcp.example.com/sse",
            "https://mcp.example.com/sse",
            "https://example.com/mcp",
            "http://localhost:3000/sse",
            "stdio:npx",
            "https://github.com/acme/tool extra words",
            "file:///etc/passwd please",
            // Host names and IP literals without a scheme.
            "github.com/acme/tool",
            "www.github.com/acme/tool",
            "evil.example.com",
            "localhost",
            "localhost:8080",
            "127.0.0.1",
            "127.0.0.1:80/x",
            "169.254.169.254/latest/meta-data",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::1]/",
            "[::1]:22",
            "http://2130706433/",
            "http://0x7f000001/",
            "0x7f000001",
            "http://0177.0.0.1/",
            "//github.com/acme/tool",
            "\\\\server\\share\\skill.md",
            "/etc/passwd",
            "~/.ssh/id_rsa",
            "./SKILL.md",
            "../secrets",
            "C:\\Users\\me\\SKILL.md",
            "user@evil.com",
        ];
        for h in hostile {
            assert_eq!(
                parse_target(h),
                Err(TargetError::NotAllowed),
                "{h:?} must be refused"
            );
        }
    }

    #[test]
    fn refuses_archives() {
        assert_eq!(
            parse_target("PK\u{3}\u{4}\u{14}\u{0}rest"),
            Err(TargetError::Archive)
        );
        assert_eq!(parse_target("UEsDBBQAAAAIAA=="), Err(TargetError::Archive));
        assert_eq!(
            parse_target("\n  UEsDBBQAAAAIAA=="),
            Err(TargetError::Archive)
        );
        assert_eq!(
            parse_target("data:application/zip;base64,UEsDBBQAAAA"),
            Err(TargetError::Archive)
        );
        assert_eq!(parse_target("PK\u{5}\u{6}"), Err(TargetError::Archive));
    }

    #[test]
    fn everything_else_is_content() {
        for c in [
            "---\nname: x\ndescription: y\n---\nbody",
            "Use https://evil.example.com in this text",
            "hello",
            "owner/repo",
            "ls -la",
            "PKZIP is a format",
        ] {
            assert_eq!(parse_target(c), Ok(Target::Content(c.to_string())), "{c:?}");
        }
        assert_eq!(parse_target("   "), Err(TargetError::Empty));
    }
}
