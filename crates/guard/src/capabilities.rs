//! The capability inventory of a skill, and verdicts from combinations (issue 29).
//!
//! Every text file of a skill is read for *capability facts*: what it executes, what
//! sensitive data it reads, where it sends data, what it downloads, what it persists and what
//! supply chain it changes. Each fact knows whether its file **runs** (SKILL.md, scripts,
//! install hooks, entry points) or is only **carried** (tests, fixtures, documentation, CI
//! configuration, locale data, container builds). Manifests are parsed: a `package.json`'s
//! install scripts (`preinstall`, `install`, `postinstall`, `prepare`...) run at install time,
//! as does the whole of a `setup.py` and a hatch build hook; an agent settings file grants
//! permissions and hooks. Files that SKILL.md or an install hook invokes run too.
//!
//! The facts are lexical (one Aho-Corasick pass over each file, a regex on the lines where a
//! family's words occur) and bounded: at most [`MAX_FACTS_PER_FILE`] per file and
//! [`MAX_FACTS`] per scan. At the end of a scan the facts of the files that run are combined
//! across files into findings (`combo.*`): reads secrets + sends = exfiltration, downloads a
//! file + runs it = remote code, install-time code that downloads, sends, reads secrets or
//! persists, persistence next to remote or dynamic code, supply-chain changes that outlive
//! the command, broad agent permissions. Facts of carried files are listed in the inventory
//! but combine into nothing; the line rules still report them, one step lower ([`carried`]).

use crate::model::{Capability, Category, Finding, Inventory, Role, Severity};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use regex::Regex;
use std::collections::HashSet;
use std::sync::OnceLock;

/// At most this many facts from one file.
pub(crate) const MAX_FACTS_PER_FILE: usize = 48;
/// At most this many facts in one scan.
pub(crate) const MAX_FACTS: usize = 2_000;
/// At most this many items in each list of the inventory.
pub(crate) const MAX_ITEMS_PER_KIND: usize = 40;

/// The family of a fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Executes,
    Reads,
    Sends,
    Downloads,
    Persists,
    SupplyChain,
    /// Decoded, decompressed or decrypted data that runs, strings built from codes, long
    /// encoded blobs in code (`code`, decision 0034).
    Obfuscates,
}

/// One capability fact.
#[derive(Debug, Clone)]
pub(crate) struct Fact {
    pub kind: Kind,
    /// Short label ("pipes into a shell", "npm postinstall hook").
    pub what: &'static str,
    /// The line, trimmed and shortened (secrets redacted by the caller's excerpt function).
    pub detail: String,
    pub path: Option<String>,
    pub line: u32,
    pub runs: bool,
    /// Why it runs or is carried.
    pub why: &'static str,
    /// Runs at install time (an install hook, `setup.py`, a build hook).
    pub install: bool,
    /// Executes code that is not fixed in the file (eval, a shell string, a pipe to a shell,
    /// a downloaded or assembled command).
    pub dynamic: bool,
    /// Persistent, machine-wide changes (config set, a written config file) for supply chain;
    /// broad grants for agent settings.
    pub strong: bool,
    /// Names this fact's line writes or binds (a download's output file or variable).
    pub target: Option<String>,
}

/// Where facts are found: the file, whether it runs and why, and whether at install time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Site<'p> {
    pub path: Option<&'p str>,
    pub runs: bool,
    pub why: &'static str,
    pub install: bool,
}

impl Site<'_> {
    /// A file that runs at install time, for `why`.
    fn install<'p>(path: Option<&'p str>, why: &'static str) -> Site<'p> {
        Site {
            path,
            runs: true,
            why,
            install: true,
        }
    }

    /// A fact found here at `line`: neither dynamic nor strong, with no target (struct update
    /// syntax sets them).
    pub(crate) fn fact(&self, kind: Kind, what: &'static str, detail: String, line: u32) -> Fact {
        Fact {
            kind,
            what,
            detail,
            path: self.path.map(str::to_string),
            line,
            runs: self.runs,
            why: self.why,
            install: self.install,
            dynamic: false,
            strong: false,
            target: None,
        }
    }
}

/// A family pattern: the words that gate it and the regex run on the gated lines.
struct Pat {
    kind: Kind,
    words: &'static [&'static str],
    re: &'static str,
    what: &'static str,
}

const PATS: &[Pat] = &[
    // --- executes ---
    Pat {
        kind: Kind::Executes,
        words: &[
            "| sh",
            "|sh",
            "| bash",
            "|bash",
            "| zsh",
            "| sudo",
            "| python",
            "|python",
            "| node",
            "| perl",
            "| ruby",
            "| iex",
            "| invoke-expression",
            "| pwsh",
            "| powershell",
            "| /bin/",
            "|/bin/",
            "| /usr/bin/",
        ],
        re: r"(?i)\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:/(?:usr/)?bin/)?(?:ba|z|k|da)?sh\b(?:\s+-s?\s*)?(?:$|[;&|)\s])|\|\s*(?:sudo\s+)?(?:python3?|node|perl|ruby|php)(?:\s+-)?\s*(?:$|[;&|)])|\|\s*(?:iex|invoke-expression|pwsh|powershell)\b",
        what: "pipes into an interpreter",
    },
    Pat {
        kind: Kind::Executes,
        words: &[
            "eval",
            "exec(",
            "exec (",
            "new function",
            "execfile",
            "runpy",
            "compile(",
        ],
        re: r#"(?i)\beval\s*[\(`"'$]|\beval\s+[\w$"]|\bexec\s*\(|\bnew\s+function\s*\(|\bexecfile\s*\(|\brunpy\.run_|\bcompile\s*\(.*['"]exec['"]"#,
        what: "evaluates code",
    },
    Pat {
        kind: Kind::Executes,
        words: &[
            "sh -c",
            "bash -c",
            "zsh -c",
            "python -c",
            "python3 -c",
            "node -e",
            "perl -e",
            "ruby -e",
            "powershell",
            "pwsh",
            "invoke-expression",
            "iex",
        ],
        re: r"(?i)\b(?:ba|z)?sh\s+-c\b|\bpython3?\s+-c\b|\bnode\s+-e\b|\b(?:perl|ruby)\s+-e\b|\b(?:powershell|pwsh)(?:\.exe)?\b.*\s-(?:e|enc|encodedcommand|c|command)\b|\binvoke-expression\b|\biex\s*[\($]",
        what: "runs a command string",
    },
    Pat {
        kind: Kind::Executes,
        words: &["chmod"],
        re: r"(?i)\bchmod\s+(?:-\w+\s+)*(?:[ugoa]*\+x|0?7[0-7]{2})\b",
        what: "makes a file executable",
    },
    Pat {
        kind: Kind::Executes,
        words: &[
            "subprocess",
            "os.system",
            "os.popen",
            "child_process",
            "execsync",
            "execfilesync",
            "spawn(",
            "spawnsync",
            "getruntime",
            "start-process",
            "pty.spawn",
            "os.exec",
            "__import__",
            "getattr(",
        ],
        re: r"(?i)\bsubprocess\.\w+|\bos\.(?:system|popen|exec[lv]p?e?)\s*\(|child_process|\bexec(?:file)?sync\s*\(|\bspawn(?:sync)?\s*\(|getruntime\(\)\.exec|\bstart-process\b|\bpty\.spawn|__import__\s*\(|\bgetattr\s*\(\s*(?:os|subprocess|builtins|__builtins__)\b",
        what: "starts a process",
    },
    Pat {
        kind: Kind::Executes,
        words: &[
            "bash ", " sh ", "`sh ", "source ", "python ", "python3 ", "node ", "./",
            // `sh /tmp/x.sh` at the start of a line has no space before `sh`.
            "sh /", "sh $", "sh ~", "sh \"",
        ],
        re: r"(?i)(?:^|[;&|(]\s*|\bthen\s+|\bdo\s+)(?:sudo\s+)?(?:(?:ba)?sh|source|\.|python3?|node)\s+[\w./~$-]*[\w$}]\.(?:sh|py|js|mjs|cjs|ps1)\b|(?:^|[;&|]\s*)\./[\w.-]+",
        what: "runs a script",
    },
    // --- downloads ---
    Pat {
        kind: Kind::Downloads,
        words: &[
            "curl",
            "wget",
            "invoke-webrequest",
            "iwr ",
            "invoke-restmethod",
            "irm ",
            "urlretrieve",
            "downloadstring",
            "downloadfile",
            "git clone",
            "certutil",
            "bitsadmin",
            "aiohttp",
            "require('http",
            "require(\"http",
        ],
        re: r"(?i)require\(\s*['\x22]https?['\x22]\s*\)\s*\.\s*(?:get|request)\b|\b(?:curl|wget)\b|\binvoke-webrequest\b|\biwr\b|\binvoke-restmethod\b|\birm\b|\burlopen\s*\(|\burlretrieve\s*\(|\brequests\.get\s*\(|\bhttpx\.get\s*\(|\bfetch\s*\(|\bhttps?\.get\s*\(|\baxios\.get\s*\(|downloadstring|downloadfile|\bgit\s+clone\b|\bcertutil\b.*-urlcache|\bbitsadmin\b.*/transfer|aiohttp\.\w+\(\)\.get",
        what: "downloads",
    },
    Pat {
        kind: Kind::Downloads,
        words: &[
            "git+",
            "npx ",
            "bunx ",
            "npm install",
            "npm i ",
            "pnpm add",
            "yarn add",
            "pip install",
            "pip3 install",
            "uvx ",
            "pipx ",
        ],
        re: r#"(?i)\b(?:pip3?|uv\s+pip|pipx\s+install|pipx\s+run\s+--spec|uvx\s+--from)\b[^\n|;&]*?\s['"]?(?:git\+|https?://\S+\.(?:tar\.gz|zip|whl)\b)|\b(?:npx|bunx|npm\s+(?:install|i|exec)|pnpm\s+(?:add|dlx)|yarn\s+(?:add|dlx))\b[^\n|;&]*?\s['"]?(?:github:|gitlab:|bitbucket:|git\+|https?://)"#,
        what: "installs a package from a URL",
    },
    // --- sends ---
    Pat {
        kind: Kind::Sends,
        words: &[
            "requests.post",
            "requests.put",
            "requests.patch",
            "httpx.post",
            "axios.post",
            "axios.put",
            "method",
            "-d ",
            "-d'",
            "-d\"",
            "--data",
            "-f ",
            "--form",
            "-t ",
            "--upload-file",
            "-x post",
            "-xpost",
            "-x put",
            "--request",
            "--post-",
        ],
        re: r#"(?i)\brequests\.(?:post|put|patch)\s*\(|\bhttpx\.(?:post|put)\s*\(|\baxios\.(?:post|put)\s*\(|\bmethod\s*[:=]\s*['"](?:post|put)['"]|\bcurl\b.*(?:\s-d\s|\s-d['"]|\s--data(?:-\w+)?\b|\s-F\s|\s--form\b|\s-T\s|\s--upload-file\b|\s-X\s*(?:POST|PUT)\b|\s--request\s+(?:POST|PUT)\b)|\bwget\b.*--post-(?:data|file)|-method\s+(?:post|put)\b"#,
        what: "sends over HTTP",
    },
    Pat {
        kind: Kind::Sends,
        words: &[
            "nc ",
            "ncat",
            "netcat",
            "/dev/tcp",
            "/dev/udp",
            "socket",
            "net.connect",
            "createconnection",
            "websocket",
            "sendto(",
        ],
        re: r"(?i)(?:^|[|;&]\s*|\s)(?:nc|ncat|netcat)\s+(?:-[\w]+\s+)*[\w.$-]+\s+\d{2,5}\b|/dev/(?:tcp|udp)/|\bsocket\.(?:socket|create_connection)\s*\(|\.connect\s*\(\s*\(|\bnet\.(?:connect|createconnection|socket)\b|\bnew\s+websocket\s*\(|\.sendto\s*\(",
        what: "opens a socket",
    },
    Pat {
        kind: Kind::Sends,
        words: &[
            "scp ",
            "rsync ",
            "git push",
            "smtplib",
            "sendmail",
            "nodemailer",
            "ftplib",
            "api.telegram.org",
            "discord",
            "hooks.slack.com",
            "sendbeacon",
            "uploadstring",
            "uploadfile",
            "send-mailmessage",
            "gh gist",
            "aws s3",
            "gsutil",
            "az storage",
            "rclone",
            "| ssh",
            "|ssh",
            "ssh ",
        ],
        re: r"(?i)\|\s*ssh\s|\bssh\s[^<|\n]*[^<]<\s*[^<\s(]|\bgh\s+gist\s+(?:create|edit)\b|\baws\s+s3\s+(?:cp|sync|mv)\b|\bgsutil\s+(?:-m\s+)?(?:cp|rsync|mv)\b|\baz\s+storage\s+(?:blob|file)\s+upload|\brclone\s+(?:copy|sync|move)\b|\bscp\s+\S|\brsync\s+.*\s\S*@?[\w.-]+:\S*|\bgit\s+push\b|\bsmtplib\b|\bsendmail\b|\bnodemailer\b|\bsend-mailmessage\b|\bftplib\b|api\.telegram\.org|discord(?:app)?\.com/api/webhooks|hooks\.slack\.com|\bsendbeacon\s*\(|\.upload(?:string|file)\s*\(",
        what: "sends over another channel",
    },
    Pat {
        kind: Kind::Sends,
        words: &[
            "nslookup",
            "dig ",
            "gethostbyname",
            "dns.resolve",
            "dns.lookup",
            "resolver.",
            "host ",
            "drill ",
            "resolvectl",
            "ping ",
            "ping6 ",
            "traceroute",
        ],
        re: r"(?i)(?:^\s*|[;&|(]\s*|\$\(\s*)(?:ping6?|traceroute6?)\s+.*\$(?:\{[^}\s]{1,40}\}|\w+)\.|\b(?:nslookup|dig)\s+.*\$|\bgethostbyname\s*\(.*[+%{]|\bdns\.(?:resolve\w*|lookup)\s*\(.*[+`$]|\bresolver\.(?:resolve|query)\s*\(.*[+{%`$]|(?:^|[;&|(]\s*|\$\(\s*)(?-i:host|drill|resolvectl\s+query)\s+.*\$",
        what: "sends through DNS lookups",
    },
    Pat {
        kind: Kind::Sends,
        words: &["urlencode", "curl", "wget"],
        re: r#"(?i)(?:\burlopen|\brequests\.get|\bhttpx\.get|\bfetch|\bhttps?\.get|\baxios\.get)\s*\(\s*f?["'`][^"'`]*\?[^"'`]*(?:\{|["'`]\s*\+)|\burlopen\s*\(.*\burlencode\b|\b(?:curl|wget)\b[^|;]*https?://[^\s"']*\?[^\s"']*\$[({\w]"#,
        what: "sends data in a URL",
    },
    // --- reads sensitive data ---
    Pat {
        kind: Kind::Reads,
        words: &[
            ".ssh",
            "id_rsa",
            "id_ed25519",
            "id_ecdsa",
            ".aws/",
            ".config/gcloud",
            ".azure/",
            ".kube/config",
            ".docker/config",
            ".netrc",
            ".pypirc",
            ".git-credentials",
            "gh/hosts",
            "/etc/shadow",
            "/etc/passwd",
            "/etc/sudoers",
            "_history",
            "'.aws'",
            "\".aws\"",
        ],
        re: r#"(?i)['"]\.aws['"]\s*[/,+]\s*['"]/?credentials\b|(?:~|\$home|\$\{home\}|\bhome\b|/)?/?\.ssh(?:/[\w.*-]*)?|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/(?:credentials|config)|\.config/gcloud|\.azure/|\.kube/config|\.docker/config\.json|\.netrc\b|\.pypirc\b|\.git-credentials|\.config/gh/hosts|/etc/(?:shadow|passwd|sudoers)\b|\.(?:bash|zsh)_history"#,
        what: "reads a credential store",
    },
    Pat {
        kind: Kind::Reads,
        words: &[
            "auth token",
            "\"auth\", \"token\"",
            "'auth', 'token'",
            "\"auth\",\"token\"",
            "print-access-token",
            "configure get",
            "export-credentials",
            "get-access-token",
            "credential fill",
            "op read",
        ],
        re: r#"(?i)\bgh["',\s(]+auth["',\s]+token\b|\bgcloud\b.*\bprint-access-token\b|\baws\s+configure\s+(?:get\s+aws_(?:secret_access_key|access_key_id|session_token)|export-credentials)\b|\baz\s+account\s+get-access-token\b|\bgit\s+credential\s+fill\b|\bop\s+read\s+['"]?op://"#,
        what: "reads a credential from a command-line tool",
    },
    Pat {
        kind: Kind::Reads,
        words: &[
            "environ",
            "getenv",
            "process.env",
            "$env:",
            "token",
            "secret",
            "password",
            "passwd",
            "api_key",
            "apikey",
            "access_key",
            "private_key",
            "credential",
        ],
        re: r#"(?i)(?:\bos\.environ(?:\.get)?\s*[\[(]\s*['"]|\bos\.getenv\s*\(\s*['"]|\bprocess\.env\.|\bprocess\.env\[\s*['"`]|\$env:|\$\{?)(?-i:[A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)[A-Z0-9_]*)\b"#,
        what: "reads a secret from the environment",
    },
    Pat {
        kind: Kind::Reads,
        words: &["read -", "read  -"],
        re: r"(?:^|[;&|({]\s*|\bthen\s+|\bdo\s+|\belse\s+)read\s+(?:[^;&|\n]*\s)?-[a-rt-zA-Z]*s[a-zA-Z]*\b",
        what: PASSWORD_PROMPT,
    },
    Pat {
        kind: Kind::Reads,
        words: &["[sudo]", "password"],
        re: r#"(?i)\b(?:read|printf|echo|write-host|read-host)\b.*(?:\[sudo\]\s+password|\b(?:login|system|macos|mac|administrator|admin|keychain|account)\s+password\b|\bpassword\s+for\s+(?:%s|\$\{?user\b|\$\(whoami\)))"#,
        what: "imitates a system password prompt",
    },
    Pat {
        kind: Kind::Reads,
        words: &["/proc/"],
        re: r"(?i)/proc/(?:self|\d+|\$\w+|\{\w*\}|\*)/(?:environ|cmdline|maps|mem)\b",
        what: "reads process memory or environment",
    },
    Pat {
        kind: Kind::Reads,
        words: &[
            "login data",
            "cookies",
            "local state",
            "logins.json",
            "key4.db",
            "keychain",
            "find-generic-password",
            "find-internet-password",
            "secret-tool",
            ".gnupg",
            "wallet",
            ".kdbx",
            "metamask",
            "electrum",
            "exodus",
        ],
        re: r"(?i)login data|\bcookies(?:\.sqlite)?\b.*(?:chrome|chromium|firefox|mozilla|brave|edge|safari)|(?:chrome|chromium|firefox|mozilla|brave|edge|safari)\b.*\bcookies\b|local state|logins\.json|key4\.db|\bkeychain\b|find-(?:generic|internet)-password|\bsecret-tool\s+lookup|\.gnupg\b|wallet\.dat|\bwallets?/|\.kdbx\b|metamask|electrum|exodus/",
        what: "reads browser or wallet data",
    },
    Pat {
        kind: Kind::Reads,
        words: &["env", "printenv", "environ", "process.env", "env:"],
        re: r"(?i)(?:^|[;&(]\s*|\$\(\s*|`)(?:env|printenv|export\s+-p)\s*(?:$|[|>;&)`])|\|\s*env\s*(?:$|\|)|\bos\.environ\b(\s*(?:\.get\b|\[|\.setdefault|\.pop|\.copy|\.update|\.__setitem__)|)|\bprocess\.env\b(\s*(?:\.\w|\[|\?\.)|)|\b(?:get-childitem|gci|dir|ls)\s+env:|\[environment\]::getenvironmentvariables",
        what: "dumps the environment",
    },
    Pat {
        kind: Kind::Reads,
        words: &[
            "find ", "glob", "*.pem", "*.key", "*.p12", "*.pfx", "*.kdbx", "*.ppk", "*.env", "**/",
        ],
        re: r#"(?i)\bfind\s+(?:/|~|\$home|\$\{home\})\S*\s.*-i?name\s+['"]?\*?\.?(?:pem|key|p12|pfx|kdbx|env|ppk|ovpn|id_rsa|wallet|json)\b|\b(?:r?glob|glob\.glob|glob\.sync|globsync|fast-?glob)\w*\s*\(.*(?:\.pem|\.key\b|\.env\b|id_rsa|\.ssh|wallet|\.kdbx|\.aws)|['"](?:~|/|\*\*)[^'"]*\*\.(?:pem|p12|pfx|kdbx|ppk|key)['"]"#,
        what: "searches for secrets by pattern",
    },
    // --- persists ---
    Pat {
        kind: Kind::Persists,
        words: &[
            ".bashrc",
            ".bash_profile",
            ".bash_login",
            ".zshrc",
            ".zprofile",
            ".zshenv",
            ".profile",
            "config.fish",
            "/etc/profile",
            "rc.local",
            "$profile",
            "powershell_profile",
        ],
        re: r"(?i)\.(?:bashrc|bash_profile|bash_login|zshrc|zprofile|zshenv|profile)\b|config/fish/config\.fish|/etc/profile|/etc/bash\.bashrc|\brc\.local\b|\$profile\b|powershell_profile",
        what: "writes a shell start-up file",
    },
    Pat {
        kind: Kind::Persists,
        words: &[
            "crontab",
            "/etc/cron",
            "cron.d",
            "/var/spool/cron",
            "systemctl",
            "systemd/user",
            "/etc/systemd",
            "launchagents",
            "launchdaemons",
            "launchctl",
            "autostart",
            "currentversion\\run",
            "schtasks",
            "scheduledtask",
            "\\startup\\",
            "folderopen",
        ],
        re: r#"(?i)\bcrontab\b|/etc/cron|\bcron\.d/|/var/spool/cron|\bsystemctl["',\s]+(?:--user["',\s]+)?enable\b|"runon"\s*:\s*"folderopen"|\.config/systemd/user|/etc/systemd/system/|launchagents|launchdaemons|\blaunchctl\s+(?:load|bootstrap|submit)\b|\.config/autostart|currentversion\\+run|\bschtasks\s+/create|\b(?:register|new)-scheduledtask|\\startup\\"#,
        what: "schedules itself or starts at login",
    },
    Pat {
        kind: Kind::Persists,
        words: &[
            ".git/hooks",
            "hookspath",
            "sitecustomize",
            "usercustomize",
            "site-packages",
            "getsitepackages",
            "getusersitepackages",
            "pythonstartup",
            "ld.so.preload",
            "authorized_keys",
            "core.fsmonitor",
            "core.pager",
            "core.sshcommand",
            "credential.helper",
            "alias.",
        ],
        re: r"(?i)\.git/hooks/|core\.hookspath|\bgit\s+config\s+(?:--global\s+|--system\s+)?(?:core\.(?:fsmonitor|pager|sshcommand)|credential\.helper|alias\.\S+\s+['\x22]?!)|\b(?:site|user)customize\.py\b|site-packages\S*\.pth\b|getu?s?e?r?sitepackages.*\.pth|\.pth\b.*getu?s?e?r?sitepackages|\bpythonstartup\b|/etc/ld\.so\.preload|\bauthorized_keys\b",
        what: "installs a hook or start-up file",
    },
    Pat {
        kind: Kind::Persists,
        words: &[
            "dangerously",
            "bypasspermissions",
            ".claude/settings",
            ".cursor/",
            ".codex/",
            "mcp.json",
            "allowedtools",
            "allowed-tools",
            "autoapprove",
            "auto_approve",
        ],
        re: r"(?i)dangerously-?skip-?permissions|bypasspermissions|\.claude/settings(?:\.local)?\.json|\.cursor/(?:rules|mcp\.json)|\.codex/config|\bmcp\.json\b|\b(?:autoapprove|auto_approve)\b",
        what: "changes agent settings or permissions",
    },
    Pat {
        kind: Kind::Persists,
        words: &[
            ".local/bin/",
            "/usr/local/bin/",
            "~/bin/",
            "home/bin/",
            "home}/bin/",
        ],
        re: r#"(?i)(?:\.local/bin|/usr/local/bin|~/bin|home\}?/bin)/(?:sudo|su|ssh|scp|git|gpg|python3?|pip3?|node|npm|npx|curl|wget|ls|cd|docker|kubectl|aws|gh|passwd|login|bash|sh|zsh)["'\s]*(?:$|[\s;>|&)"'])"#,
        what: "puts a command on the PATH under the name of a common tool",
    },
    Pat {
        kind: Kind::Persists,
        words: &[
            "claude.md",
            "agents.md",
            "gemini.md",
            ".cursorrules",
            "copilot-instructions",
        ],
        re: r"(?i)(?:~|\$home|\$\{home\}|\.claude|\.codex|\.gemini|\.config)/(?:[\w.-]+/)*(?:claude|agents|gemini)\.md\b|\.cursorrules\b|copilot-instructions\.md\b",
        what: "changes the agent's standing instructions",
    },
    // --- supply chain ---
    Pat {
        kind: Kind::SupplyChain,
        words: &[
            "index-url",
            "trusted-host",
            "pip config",
            "npm config",
            "yarn config",
            "pnpm config",
            "registry",
            "pip.conf",
            "pip.ini",
            ".npmrc",
            ".yarnrc",
            "uv.toml",
            "goproxy",
            "gonosum",
            "goinsecure",
            "gosumdb",
            "goflags",
            "sources.list",
            "apt-key",
            "insteadof",
            "index_url",
            "trusted_host",
            "strict-ssl",
            "gem sources",
            "cargo/config",
            "[[index]]",
            "[[tool.uv.index]]",
            "poetry source",
            "bundle config",
            "ssl_verify_mode",
            "certificates.",
            "sslverify",
            "tls_reject_unauthorized",
            "httpsverify",
            "git_ssl_no_verify",
            "conda config",
            "update-ca-certificates",
            "add-trusted-cert",
            "ca-certificates",
        ],
        re: r"(?i)\bpoetry\s+source\s+add\b|\bpoetry\s+config\s+certificates\.\S+\.cert\s+false|\bbundle\s+config\s+(?:set\s+)?(?:--global\s+|--local\s+)?(?:mirror\.|ssl_verify_mode)|\bssl_verify_mode\s*[:=]?\s*0\b|\bhttp\.sslverify\s+false\b|\bnode_tls_reject_unauthorized\s*=\s*['\x22]?0|\bpythonhttpsverify\s*=\s*['\x22]?0|\bgit_ssl_no_verify\s*=|\bconda\s+config\s+--(?:add|prepend)\s+channels\b|\bupdate-ca-certificates\b|\badd-trusted-cert\b|/usr/(?:local/)?share/ca-certificates/|\bpip3?\s+config\s+set\b|\b(?:npm|yarn|pnpm)\s+config\s+set\b|--(?:extra-)?index-url\b|--trusted-host\b|\b(?:pip|uv)_(?:extra_)?index_url\b|\bpip_trusted_host\b|\bnpm_config_registry\b|--registry[=\s]|^\s*@?[\w-]*:?registry\s*=|strict-ssl\s*[=\s]\s*false|\bgoproxy\s*=|\bgo(?:nosumdb|nosumcheck|insecure|sumdb=off|flags=-insecure)\b|sources\.list|\bapt-key\s+add\b|\burl\.\S+\.insteadof\b|\bgem\s+sources\s+(?:-a|--add)\b|^\s*(?:extra-)?index-url\s*=|^\s*trusted-host\s*=|^\s*\[\[(?:tool\.uv\.)?index\]\]|(?:pip\.conf|pip\.ini|\.npmrc|\.yarnrc|uv\.toml|\.cargo/config)\b",
        what: "changes where packages come from",
    },
];

/// What a credential read from a secret-named environment variable is called.
const ENV_SECRET: &str = "reads a secret from the environment";

/// What a hidden prompt (`read -s`) is called: a password typed by the user, sent to its own
/// service like a credential from the environment.
const PASSWORD_PROMPT: &str = "prompts for a password without echo";

/// Channels no credential is sent through to its own service.
const COVERT_SENDS: &[&str] = &["opens a socket", DNS_SEND];

/// What a DNS lookup built from data is called.
const DNS_SEND: &str = "sends through DNS lookups";

/// What a credential read from a provider's command-line tool is called.
const CLI_CREDENTIAL: &str = "reads a credential from a command-line tool";

/// A pipe into an interpreter spelled by the variables of a Makefile or a configuration file.
const EXPANDED_PIPE: &str =
    "pipes into an interpreter (spelled by the variables of a Makefile or a configuration file)";

/// What a package installed from a URL or a repository is called.
const PACKAGE_FROM_URL: &str = "installs a package from a URL";

/// Agent hooks whose commands neither download, send, read secrets nor run dynamic code:
/// listed, not combined.
const FIXED_HOOKS: &str = "registers agent hooks that run fixed commands";

/// Code hosts whose packages are common to install from their repositories.
const KNOWN_FORGES: &[&str] = &[
    "github.com/",
    "github:",
    "gitlab.com/",
    "gitlab:",
    "bitbucket.org/",
    "bitbucket:",
    "codeberg.org/",
    "huggingface.co/",
];

/// Hosts of the providers whose CLIs hand out tokens, and local hosts: a token sent there goes
/// back to the service it belongs to.
const FIRST_PARTY_HOSTS: &[&str] = &[
    "github.com",
    "githubusercontent.com",
    "gitlab.com",
    "googleapis.com",
    "google.com",
    "amazonaws.com",
    "aws.amazon.com",
    "azure.com",
    "microsoft.com",
    "windows.net",
    "microsoftonline.com",
    "1password.com",
    "localhost",
    "127.0.0.1",
];

/// Whether `text` names an `http(s)://` host that is not a first-party host
/// ([`FIRST_PARTY_HOSTS`], or a subdomain of one).
fn names_foreign_host(text: &str) -> bool {
    text.match_indices("://").take(256).any(|(i, _)| {
        let scheme = text.get(i.saturating_sub(5)..i).unwrap_or("");
        if !scheme.ends_with("http") && !scheme.ends_with("https") {
            return false;
        }
        let rest = text.get(i + 3..).unwrap_or("");
        let host: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
            .collect::<String>()
            .to_ascii_lowercase();
        // A host from a variable (`https://$HOST`, `https://{host}`) is not known here.
        !host.is_empty()
            && host.contains('.')
            && !FIRST_PARTY_HOSTS
                .iter()
                .any(|h| host == *h || host.ends_with(&format!(".{h}")))
    })
}

/// A write on the line: redirection, `tee`, an open for writing, a write call.
const WRITE_MARKERS: &[&str] = &[
    ">>",
    "> ",
    ">~",
    ">$",
    ">/",
    ">\"",
    "tee ",
    "'a'",
    "\"a\"",
    "'w'",
    "\"w\"",
    "'a+'",
    "'w+'",
    "appendfile",
    "writefile",
    "write_text",
    "write_bytes",
    ".write(",
    "add-content",
    "set-content",
    "out-file",
    "sed -i",
    "cp ",
    "mv ",
    "ln -s",
    "install -",
    "copyfile",
    "copy(",
    "symlink",
    "mode=\"a\"",
    "mode='a'",
    "echo ",
    "printf ",
    "cat <<",
    "cat >",
    "crontab -",
    "| crontab",
    "config --global",
    "config --system",
];

/// Whether lowercase `hay` holds the write marker `w`. A marker that starts with a letter must
/// start a word: `cp ` in `codex mcp list` and `tee ` in `committee ` are no copy or tee.
fn has_marker(hay: &str, w: &str) -> bool {
    if !w.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return hay.contains(w);
    }
    hay.match_indices(w).any(|(i, _)| {
        !hay.as_bytes()
            .get(i.wrapping_sub(1))
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
    })
}

/// Whether `text` names a systemd unit (`sync.service`, `daily.timer`, a drop-in
/// `x.service.d/`).
fn names_systemd_unit(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    [
        ".service", ".timer", ".socket", ".path", ".mount", ".target",
    ]
    .iter()
    .any(|u| lower.contains(u))
}

/// Whether the match `line[start..end]` is a value compared, not set: a shell `case` arm's
/// label (`bypassPermissions)`, `"a"|b)`), or the right side of `==`/`!=`, or of `=` in a
/// `[ … ]` test.
fn compared_value(line: &str, start: usize, end: usize) -> bool {
    let before = line.get(..start).unwrap_or("");
    let after = line.get(end..).unwrap_or("");
    let after = after.trim_start_matches(['"', '\'']);
    // A case arm: `)` right after, and before it nothing, `(`, or other labels and `|`.
    if after.starts_with(')') {
        let prior = before.trim_end().trim_end_matches(['"', '\'']).trim_end();
        let prior = prior.trim_start().trim_start_matches('(');
        let labels = prior.strip_suffix('|').map(|l| {
            l.split('|').all(|p| {
                let p = p.trim();
                !p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_-.*?\"'[]".contains(c))
            })
        });
        if prior.trim().is_empty() || labels == Some(true) {
            return true;
        }
    }
    let b = before.trim_end().trim_end_matches(['"', '\'']).trim_end();
    if b.ends_with("==") || b.ends_with("!=") {
        return true;
    }
    b.ends_with(" =")
        && (b.contains("[ ") || b.contains("test "))
        && after.trim_start().starts_with(']')
}

/// Package managers whose `install` (`add`, `-S`) takes the names of OS packages.
const OS_PACKAGE_MANAGERS: &[&str] = &[
    "apt-get",
    "apt",
    "aptitude",
    "dnf",
    "yum",
    "zypper",
    "brew",
    "apk",
    "pacman",
    "port",
    "choco",
    "winget",
    "scoop",
    "snap",
    "pkg",
    "emerge",
    "xbps-install",
    "nix-env",
];

/// Whether the match `line[start..end]` (a download tool's name, `wget`) is an argument of a
/// package install (`$SUDO apt-get install -y \` … `wget \`): the package is named, nothing is
/// fetched from a URL of the skill. The command is read across the `\` continuations that
/// lead to `line` (at `ls` in `text`).
fn package_argument(text: &str, ls: usize, line: &str, start: usize, end: usize) -> bool {
    // The word itself: a bare name (`wget`, `wget \`), not `wget -qO- URL` on its own.
    let after = line.get(end..).unwrap_or("");
    if !(after.is_empty()
        || after.starts_with([' ', '\t', '\\', '\r'])
        || after.starts_with(['"', '\'']))
    {
        return false;
    }
    let mut command = line.get(..start).unwrap_or("").to_string();
    let mut at = ls;
    for _ in 0..128 {
        let Some(prev_end) = at.checked_sub(1) else {
            break;
        };
        let prev_start = text
            .get(..prev_end)
            .and_then(|t| t.rfind('\n'))
            .map_or(0, |i| i + 1);
        let prev = text.get(prev_start..prev_end).unwrap_or("").trim_end();
        let Some(body) = prev.strip_suffix('\\') else {
            break;
        };
        command = format!("{body} {command}");
        at = prev_start;
    }
    // The simple command the word belongs to.
    let command = command
        .rsplit([';', '|', '&', '(', '`'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    if command.contains("://") {
        return false;
    }
    let words: Vec<&str> = command.split_whitespace().collect();
    let Some(verb) = words
        .iter()
        .position(|w| matches!(*w, "install" | "add") || w.starts_with("-s") && w.len() <= 5)
    else {
        return false;
    };
    words.get(..verb).is_some_and(|ws| {
        ws.iter().any(|w| {
            let w = w.rsplit('/').next().unwrap_or(w);
            OS_PACKAGE_MANAGERS.contains(&w) || w.starts_with('$')
        })
    })
}

/// Tracks, line by line, whether a shell script is inside a quoted string: a line that starts
/// inside a multi-line `"…"` or `'…'` continues the string, it runs nothing. Follows `$(…)`
/// (whose quotes nest), backslash escapes and comments; heredoc bodies keep their reading.
#[derive(Default)]
struct ShellQuotes {
    /// Open contexts: `"`, `'` or `(` for a command substitution.
    stack: Vec<u8>,
    /// The word that ends the heredoc being read.
    heredoc: Option<String>,
}

impl ShellQuotes {
    /// Whether `line` starts inside a quoted string; then follows its quotes.
    fn starts_inside(&mut self, line: &str) -> bool {
        if let Some(end) = &self.heredoc {
            if line.trim() == end.as_str() {
                self.heredoc = None;
            }
            return false;
        }
        let inside = matches!(self.stack.last(), Some(b'"' | b'\''));
        let b = line.as_bytes();
        let at = |i: usize| b.get(i).copied().unwrap_or(0);
        let mut pending: Option<String> = None;
        let mut i = 0;
        while i < b.len() {
            let c = at(i);
            match self.stack.last().copied() {
                Some(b'\'') => {
                    if c == b'\'' {
                        self.stack.pop();
                    }
                }
                Some(b'"') => match c {
                    b'\\' => i += 1,
                    b'"' => {
                        self.stack.pop();
                    }
                    b'$' if at(i + 1) == b'(' => {
                        self.stack.push(b'(');
                        i += 1;
                    }
                    _ => {}
                },
                top => match c {
                    b'\\' => i += 1,
                    b'\'' | b'"' => self.stack.push(c),
                    b'#' if i == 0 || at(i - 1).is_ascii_whitespace() => break,
                    b'$' if at(i + 1) == b'(' => {
                        self.stack.push(b'(');
                        i += 1;
                    }
                    b'(' if top == Some(b'(') => self.stack.push(b'('),
                    b')' if top == Some(b'(') => {
                        self.stack.pop();
                    }
                    b'<' if at(i + 1) == b'<' && at(i + 2) != b'<' => {
                        let rest = line.get(i + 2..).unwrap_or("");
                        let rest = rest.trim_start_matches('-').trim_start();
                        let rest = rest.trim_start_matches(['"', '\'', '\\']);
                        let word: String = rest
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        if !word.is_empty() {
                            pending = Some(word);
                        }
                        i += 1;
                    }
                    _ => {}
                },
            }
            i += 1;
        }
        if self.stack.len() > 64 {
            self.stack.clear();
        }
        if pending.is_some() {
            self.heredoc = pending;
        }
        inside
    }
}

/// Whether a file is a shell script: a shell extension, or a `#!` line naming a shell.
fn is_shell_script(name: &str, text: &str) -> bool {
    [".sh", ".bash", ".zsh", ".ksh"]
        .iter()
        .any(|e| name.ends_with(e))
        || text.lines().next().is_some_and(|l| {
            l.starts_with("#!")
                && ["sh", "bash", "zsh", "ksh", "dash"]
                    .iter()
                    .any(|s| l.split([' ', '/']).any(|w| w == *s))
        })
}

/// Commands and calls that write a registry value.
pub(crate) const REGISTRY_WRITES: &[&str] = &[
    "set-itemproperty",
    "new-itemproperty",
    "sp ",
    "reg add",
    "reg.exe add",
    "reg import",
    "setvalue",
    "regwrite",
    "new-item",
    "createkey",
];

/// Whether a file writes anything at all (a redirection, an open for writing, a copy, a
/// property dump, a service loaded): without a write, a path of a start-up folder is read.
fn writes_anything(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    WRITE_MARKERS
        .iter()
        .filter(|w| **w != "echo " && **w != "printf ")
        .any(|w| has_marker(&lower, w))
        || [
            "plistlib.dump",
            "launchctl",
            "systemctl",
            "'wb'",
            "\"wb\"",
            "mkdir",
        ]
        .iter()
        .any(|w| lower.contains(w))
}

/// Hosts whose package indexes are well known (a one-off `--index-url` to them is ordinary).
const KNOWN_INDEXES: &[&str] = &[
    "pypi.org",
    "files.pythonhosted.org",
    "download.pytorch.org",
    "pypi.nvidia.com",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "npm.pkg.github.com",
    "data.pyg.org",
    "storage.googleapis.com/jax-releases",
    "proxy.golang.org",
    "wheels.myst.ai",
];

pub(crate) struct Compiled {
    pub(crate) words: AhoCorasick,
    /// Per word: the patterns it gates.
    word_pats: Vec<Vec<usize>>,
    res: Vec<Regex>,
    target: Regex,
    referenced: Regex,
}

/// The calls that fetch a URL in code: words of both the downloads and the sends-in-a-URL
/// patterns ([`shared_words`]).
const HTTP_GETS: &[&str] = &[
    "urlopen",
    "requests.get",
    "httpx.get",
    "fetch(",
    "http.get",
    "https.get",
    "axios.get",
];

/// Words that gate a pattern besides its own: a GET in code both downloads and, with data
/// in its query, sends.
fn shared_words(p: &Pat) -> &'static [&'static str] {
    match p.what {
        "downloads" | "sends data in a URL" => HTTP_GETS,
        _ => &[],
    }
}

pub(crate) fn compiled() -> Option<&'static Compiled> {
    static C: OnceLock<Option<Compiled>> = OnceLock::new();
    C.get_or_init(|| {
        let mut words: Vec<&'static str> = Vec::new();
        let mut word_pats: Vec<Vec<usize>> = Vec::new();
        let mut res = Vec::new();
        for (i, p) in PATS.iter().enumerate() {
            for w in p.words.iter().chain(shared_words(p)) {
                match words.iter().position(|x| x == w) {
                    Some(k) => {
                        if let Some(list) = word_pats.get_mut(k) {
                            list.push(i);
                        }
                    }
                    None => {
                        words.push(w);
                        word_pats.push(vec![i]);
                    }
                }
            }
            res.push(Regex::new(&format!("(?m){}", p.re)).ok()?);
        }
        let words = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&words)
            .ok()?;
        Some(Compiled {
            words,
            word_pats,
            res,
            target: Regex::new(
                r#"(?i)(?:\s-o\s*|\s--output[=\s]|\s-O\s+|-outfile\s+|>\s*)['"]?([\w./~$-]+)|\burlretrieve\s*\([^,]+,\s*['"]?([\w./~$-]+)|^\s*(?:const|let|var|my)?\s*\$?([A-Za-z_]\w*)\s*:?=[^=]"#,
            )
            .ok()?,
            referenced: Regex::new(r"(?:^|[\s`'(=/])((?:[\w.-]+/)*[\w.-]+\.(?:sh|py|js|mjs|cjs|ts|ps1|rb|pl|bash))\b")
                .ok()?,
        })
    })
    .as_ref()
}

/// Whether a file runs or is carried, and why.
/// A file's lowercase name, and where its facts sit (whether it runs and why, whether at
/// install time).
fn file_role(path: Option<&str>) -> (String, Site<'_>) {
    let (runs, why) = role(path);
    let lower_name = path
        .map(|p| p.rsplit('/').next().unwrap_or(p).to_ascii_lowercase())
        .unwrap_or_default();
    let install = is_install_file(&lower_name);
    let site = Site {
        path,
        runs,
        why,
        install,
    };
    (lower_name, site)
}

pub(crate) fn role(path: Option<&str>) -> (bool, &'static str) {
    let Some(path) = path else {
        return (true, "the pasted skill");
    };
    let lower = path.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    let dirs: Vec<&str> = lower.split('/').collect();
    let dirs = dirs.get(..dirs.len().saturating_sub(1)).unwrap_or(&[]);
    if name == "skill.md" {
        return (true, "SKILL.md (instructions the agent follows)");
    }
    for d in dirs {
        let why = match *d {
            "test" | "tests" | "__tests__" | "spec" | "specs" | "testing" => "a test file",
            "fixtures" | "fixture" | "testdata" | "test_data" | "__fixtures__" | "__mocks__" => {
                "test data"
            }
            "docs" | "doc" | "documentation" | "references" | "reference" | "examples"
            | "example" | "samples" | "sample" => "documentation or reference material",
            ".github" | ".gitlab" | ".circleci" | ".buildkite" | ".azure-pipelines" => {
                "CI configuration"
            }
            "locale" | "locales" | "i18n" | "l10n" | "translations" => "locale data",
            _ => continue,
        };
        return (false, why);
    }
    if name.starts_with("test_")
        || name.ends_with("_test.py")
        || name.ends_with("_test.go")
        || name.contains(".test.")
        || name.contains(".spec.")
        || name == "conftest.py"
    {
        return (false, "a test file");
    }
    if matches!(
        name,
        ".gitlab-ci.yml" | ".travis.yml" | "azure-pipelines.yml" | "jenkinsfile" | "appveyor.yml"
    ) {
        return (false, "CI configuration");
    }
    if name == "dockerfile" || name.ends_with(".dockerfile") || name.starts_with("dockerfile.") {
        return (false, CONTAINER_BUILD);
    }
    if name.ends_with(".po") || name.ends_with(".pot") || name.ends_with(".mo") {
        return (false, "locale data");
    }
    // `pip install -r requirements.txt` reads its options (indexes, trusted hosts) too.
    if (name.starts_with("requirements") || name.starts_with("constraints"))
        && (name.ends_with(".txt") || name.ends_with(".in"))
    {
        return (true, "a package manifest (read by pip install)");
    }
    if name.ends_with(".md") || name.ends_with(".rst") || name.ends_with(".txt") {
        return (false, "documentation");
    }
    if is_install_file(name) {
        return (true, "runs at install time");
    }
    (true, "a script or configuration of the skill")
}

/// Files whose whole code runs at install or build time.
fn is_install_file(name: &str) -> bool {
    matches!(
        name,
        "setup.py"
            | "hatch_build.py"
            | "build.rs"
            | "install.js"
            | "preinstall.js"
            | "postinstall.js"
    ) || name.ends_with(".pth")
}

/// Whether findings in `path` are weighed down one step (tests, fixtures, documentation
/// folders, CI, locale, container builds), with the reason.
pub(crate) fn carried(path: Option<&str>) -> Option<&'static str> {
    let (runs, why) = role(path);
    // A loose Markdown file at the top is read by the agent as much as SKILL.md is: it keeps
    // its weight; Markdown in docs/ or references/ has its folder's reason.
    if runs || why == "documentation" {
        None
    } else {
        Some(why)
    }
}

/// Lowers the findings of a carried file one step (never below `low`, never hidden), with the
/// reason in the message. Secrets, hidden text, look-alikes, skill metadata and coverage keep
/// their weight: they are real wherever they sit.
pub(crate) fn weigh(path: Option<&str>, findings: &mut [Finding]) {
    let Some(why) = carried(path) else { return };
    for f in findings {
        let Some(def) = crate::rules::RULES.iter().find(|r| r.id == f.rule_id) else {
            continue;
        };
        if matches!(
            def.category,
            Category::Secret
                | Category::HiddenText
                | Category::Homoglyph
                | Category::Skill
                | Category::Coverage
        ) || f.severity <= Severity::Low
        {
            continue;
        }
        // One step lower, and at most medium: what a skill only carries does not run on the
        // user's machine, but it is still shown.
        let lower = match f.severity {
            Severity::Critical | Severity::High => Severity::Medium,
            _ => Severity::Low,
        };
        f.message = format!(
            "{} Weighed as {lower} instead of {}: the file is {why}, carried by the skill rather than run by it.",
            f.message.trim_end(),
            f.severity
        );
        f.severity = lower;
    }
}

/// The facts of one text file (`path` as given to the scan). `excerpt` shortens and redacts
/// a line for display.
pub(crate) fn extract(
    path: Option<&str>,
    text: &str,
    excerpt: &dyn Fn(&str) -> String,
    out: &mut Vec<Fact>,
    referenced: &mut HashSet<(String, bool)>,
) {
    let Some(c) = compiled() else { return };
    let (lower_name, site) = file_role(path);
    let Site { runs, install, .. } = site;
    // A Makefile's recipes are read with its variables expanded (`$(FETCH) $(URL) | $(SHELL)`).
    let expanded;
    let original = text;
    // A configuration or task file whose values are substituted into its own templates
    // (`template: "{get} {hub} | {sh}"`, a justfile's `{{getter}} {{url}} | {{runner}}`, a
    // Taskfile's `{{.FETCH}}`) is read with them substituted.
    let text = if is_makefile_name(&lower_name) && text.contains('$') {
        expanded = expand_make(text);
        expanded.as_str()
    } else if is_template_config(&lower_name) {
        match expand_config(text) {
            Some(e) => {
                expanded = e;
                expanded.as_str()
            }
            None => text,
        }
    } else {
        text
    };
    let before = out.len();
    let mut add = |out: &mut Vec<Fact>, fact: Fact| {
        if out.len() - before < MAX_FACTS_PER_FILE && out.len() < MAX_FACTS {
            out.push(fact);
        }
    };
    // Manifests first.
    if lower_name == "package.json" {
        package_json(path, text, excerpt, &mut add, out, referenced);
    } else if lower_name == "settings.json" || lower_name == "settings.local.json" {
        agent_settings(site, text, excerpt, &mut add, out, referenced);
    } else if MCP_CONFIGS.contains(&lower_name.as_str()) {
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
            mcp_servers(site, &value, text, excerpt, &mut add, out);
        }
    } else if lower_name == "devcontainer.json" || lower_name == ".devcontainer.json" {
        devcontainer(site, text, excerpt, &mut add, out, referenced);
    } else if lower_name == "pyproject.toml" && runs {
        pyproject(path, text, &mut add, out, referenced);
    } else if lower_name == "setup.py" && runs && text.contains("cmdclass") {
        let line = line_of(text, "cmdclass");
        let detail = excerpt(
            text.lines()
                .nth(line.saturating_sub(1) as usize)
                .unwrap_or("cmdclass"),
        );
        let what = "custom install command (setup.py cmdclass)";
        let setup = Site::install(path, "runs at install time (setup.py)");
        add(out, setup.fact(Kind::Executes, what, detail, line));
    }
    let is_skill_md = lower_name == "skill.md" || path.is_none();
    // Lines with a family word, and the patterns they gate.
    let bytes = text.as_bytes();
    let mut last: Option<(usize, usize, Vec<usize>)> = None;
    let mut lines: Vec<(usize, usize, Vec<usize>)> = Vec::new();
    for m in c.words.find_overlapping_iter(text) {
        let Some(pats) = c.word_pats.get(m.pattern().as_usize()) else {
            continue;
        };
        let (ls, le) = crate::scanner::line_bounds(text, m.start());
        match &mut last {
            Some((s, _, list)) if *s == ls => {
                for p in pats {
                    if !list.contains(p) {
                        list.push(*p);
                    }
                }
            }
            _ => {
                if let Some(done) = last.take() {
                    lines.push(done);
                }
                last = Some((ls, le, pats.clone()));
            }
        }
        if lines.len() > 4 * MAX_FACTS_PER_FILE {
            break;
        }
    }
    if let Some(done) = last.take() {
        lines.push(done);
    }
    // Commands assembled from variables: a line whose command word is a variable.
    let mut assembled: Vec<(usize, usize)> = Vec::new();
    // In PowerShell a line that starts with a variable passes or assigns its value
    // (`$issues | Format-Table`); a command held by a variable is run by `&`, read by the
    // code pass.
    let powershell = [".ps1", ".psm1", ".psd1"]
        .iter()
        .any(|e| lower_name.ends_with(e));
    if (!is_markdown_name(&lower_name) || is_skill_md) && !powershell {
        let mut pos = 0;
        // In a shell script, a line that continues a multi-line quoted string is text.
        let mut quotes = is_shell_script(&lower_name, text).then(ShellQuotes::default);
        while pos < bytes.len() && assembled.len() < 8 {
            let le = memchr::memchr(b'\n', bytes.get(pos..).unwrap_or(&[]))
                .map_or(bytes.len(), |i| pos + i);
            if let Some(line) = text.get(pos..le) {
                let in_string = quotes.as_mut().is_some_and(|q| q.starts_inside(line));
                if !in_string && variable_command(line) {
                    assembled.push((pos, le));
                }
            }
            pos = le + 1;
        }
    }
    let mut split_words: Vec<(usize, usize, String)> = Vec::new();
    if is_script_name(&lower_name) && text.len() <= 1024 * 1024 {
        split_words = assembled_words(text);
    }
    let mut line_no = 1u32;
    let mut counted = 0usize;
    let mut number = |at: usize| {
        if at >= counted {
            let n = memchr::memchr_iter(b'\n', bytes.get(counted..at).unwrap_or(&[])).count();
            line_no = line_no.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
            counted = at;
        }
        line_no
    };
    let mut all: Vec<(usize, usize, Vec<usize>)> = lines;
    for (s, e) in assembled {
        all.push((s, e, vec![usize::MAX]));
    }
    for (s, e, _) in &split_words {
        all.push((*s, *e, vec![usize::MAX - 1]));
    }
    all.sort_by_key(|l| l.0);
    // In Markdown, capabilities come from code: fenced blocks and `code spans`, not prose
    // ("do not edit their crontab yourself").
    let fences = if is_markdown_name(&lower_name) || is_skill_md {
        crate::context::fenced(text)
    } else {
        Vec::new()
    };
    let markdown = is_markdown_name(&lower_name);
    // Lists of examples in a document about security, and container builds quoted in fences
    // (their commands change the image, not the machine).
    let (example_lists, containers) = if markdown {
        (crate::context::example_lists(text), container_fences(text))
    } else {
        (Vec::new(), Vec::new())
    };
    let mut foreign: Option<bool> = None;
    let mut file_writes: Option<bool> = None;
    let mut names_unit: Option<bool> = None;
    for (ls, le, pats) in all {
        if out.len() - before >= MAX_FACTS_PER_FILE || out.len() >= MAX_FACTS {
            break;
        }
        let Some(full) = text.get(ls..le) else {
            continue;
        };
        if full.len() > 4096 {
            continue;
        }
        let n = number(ls);
        if is_skill_md || install {
            for cap in c.referenced.captures_iter(full) {
                if let Some(m) = cap.get(1) {
                    referenced.insert((m.as_str().trim_start_matches("./").to_string(), install));
                }
            }
        }
        let spans;
        let line: &str = if markdown && !fences.iter().any(|&(a, b)| ls >= a && ls < b) {
            spans = code_spans(full);
            // Teaching material quoting an attack in its prose (issue 29, `context`).
            if spans.is_empty()
                || example_lists.iter().any(|&(a, b)| ls >= a && ls < b)
                || crate::context::prose_example_line(text, ls)
            {
                continue;
            }
            &spans
        } else {
            full
        };
        let container = containers.iter().any(|&(a, b)| ls >= a && ls < b);
        let site = if container {
            Site {
                runs: false,
                why: CONTAINER_BUILD,
                install: false,
                ..site
            }
        } else {
            site
        };
        for p in pats {
            if p == usize::MAX - 1 {
                let word = split_words
                    .iter()
                    .find(|w| w.0 == ls)
                    .map_or(String::new(), |w| w.2.clone());
                let fetches = word.starts_with("curl") || word.starts_with("wget");
                let kind = if fetches {
                    Kind::Downloads
                } else {
                    Kind::Executes
                };
                let what = "assembles a command word from pieces";
                let detail = format!("{} (spells `{word}`)", excerpt(line));
                let fact = site.fact(kind, what, detail, n);
                add(
                    out,
                    Fact {
                        dynamic: true,
                        strong: true,
                        ..fact
                    },
                );
                continue;
            }
            if p == usize::MAX {
                let what = "runs a command assembled from variables";
                let fact = site.fact(Kind::Executes, what, excerpt(line), n);
                add(
                    out,
                    Fact {
                        dynamic: true,
                        ..fact
                    },
                );
                continue;
            }
            let (Some(pat), Some(re)) = (PATS.get(p), c.res.get(p)) else {
                continue;
            };
            // The fast search first; groups only for the patterns that have them.
            // A value compared (`bypassPermissions)` as a `case` arm, `[[ $m == "…" ]]`) is
            // not set, and a tool installed as an OS package (`apt-get install -y wget`) is not
            // a download: the next match of the line, if any, is the one read.
            let agent_pat = pat.kind == Kind::Persists && pat.what.starts_with("changes agent");
            let Some(m) = re.find_iter(line).take(16).find(|m| {
                !(agent_pat && compared_value(line, m.start(), m.end())
                    || pat.kind == Kind::Downloads
                        && package_argument(text, ls, line, m.start(), m.end()))
            }) else {
                continue;
            };
            if re.captures_len() > 1 {
                // `os.environ.get(...)`, `process.env.X`: a named variable, not a dump.
                // Any group of the pattern (`os.environ` and `process.env` have one each).
                let named = re.captures_at(line, m.start()).is_some_and(|c| {
                    c.iter()
                        .skip(1)
                        .any(|g| g.is_some_and(|g| !g.as_str().is_empty()))
                });
                if named {
                    continue;
                }
            }
            let before_match = line.get(..m.start()).unwrap_or("");
            let lower_line = line.to_ascii_lowercase();
            // A redirection to the null device discards output, it writes no file
            // (`cat .claude/settings.json 2>/dev/null` reads the settings).
            let writes = {
                let kept = lower_line
                    .replace("&>/dev/null", "")
                    .replace(">/dev/null", "")
                    .replace("> /dev/null", "")
                    .replace(">$null", "")
                    .replace("> $null", "")
                    .replace(">nul", "")
                    .replace("> nul", "");
                // `echo` and `printf` write only what a redirection or `tee` sends to a file
                // (`|| echo "No existing settings"` prints).
                let prints = |w: &str| w == "echo " || w == "printf ";
                WRITE_MARKERS
                    .iter()
                    .any(|w| !prints(w) && has_marker(&kept, w))
                    || (WRITE_MARKERS
                        .iter()
                        .any(|w| prints(w) && has_marker(&kept, w))
                        && (kept.contains('>') || kept.contains("tee")))
            };
            match pat.kind {
                Kind::Reads => {
                    // `cat > ~/.ssh/config`, `echo ... >> ~/.ssh/authorized_keys`: a write.
                    let t = before_match.trim_end();
                    if t.ends_with('>') || t.contains("tee ") || before_match.contains("{...") {
                        continue;
                    }
                    // `{...}` elides in prose; `...process.env` spreads the whole environment.
                    if before_match.trim_end().ends_with("...")
                        && !m.as_str().to_ascii_lowercase().starts_with("process.env")
                    {
                        continue;
                    }
                    // A key used (`ssh -i`, `ssh-add`, IdentityFile) is not read; public keys,
                    // known hosts and the client configuration are not secrets.
                    let used = [
                        "ssh-add",
                        "ssh -i",
                        "-i $home/.ssh",
                        "-i ~/.ssh",
                        "-i \"$home/.ssh",
                        "identityfile",
                        "ssh-keygen",
                        "ssh-copy-id",
                        "git_ssh_command",
                    ]
                    .iter()
                    .any(|w| lower_line.contains(w));
                    let m_lower = m.as_str().to_ascii_lowercase();
                    let harmless = m_lower.ends_with(".pub")
                        || m_lower.ends_with("known_hosts")
                        || m_lower.ends_with("/config")
                        || m_lower.ends_with("/");
                    if used || harmless {
                        continue;
                    }
                }
                Kind::Persists => {
                    let agent = pat.what.starts_with("changes agent");
                    // `crontab -l` lists and `crontab -e` is the user's own editor.
                    // `crontab -l | grep …` reads it; `crontab -l | … | crontab -` writes it back.
                    let listing = (lower_line.contains("crontab -l")
                        && !lower_line.contains("| crontab")
                        && !lower_line.contains("|crontab"))
                        || lower_line.contains("crontab -e");
                    let start_up = lower_line.contains("customize")
                        || lower_line.contains(".pth")
                        || lower_line.contains("pythonstartup")
                        || lower_line.contains("ld.so.preload");
                    // A registry Run key is a start-up entry only where it is written; a
                    // login or unit folder only in a file that writes something (a script
                    // that lists `~/Library/LaunchAgents` changes nothing).
                    let m_lower = m.as_str().to_ascii_lowercase();
                    let run_key_read = m_lower.contains("currentversion")
                        && !REGISTRY_WRITES.iter().any(|w| lower_line.contains(w));
                    let folder_only = (m_lower.contains("launchagents")
                        || m_lower.contains("launchdaemons")
                        || m_lower.contains("autostart")
                        || m_lower.contains("systemd/"))
                        && !writes
                        && !*file_writes.get_or_insert_with(|| writes_anything(text));
                    // A unit folder (`~/.config/systemd/user/`) starts something at login only
                    // with a unit in it: a file that names no unit keeps other files there.
                    let no_unit = m_lower.contains("systemd/")
                        && !*names_unit.get_or_insert_with(|| names_systemd_unit(text));
                    if listing
                        || run_key_read
                        || folder_only
                        || no_unit
                        || (!agent
                            && pat.what != "schedules itself or starts at login"
                            && !start_up
                            && !writes)
                        || (agent
                            && !writes
                            && !lower_line.contains("dangerously")
                            && !lower_line.contains("bypasspermissions"))
                    {
                        continue;
                    }
                }
                // A curl that posts is a send, counted by its own pattern.
                Kind::Downloads if lower_line.contains("curl") && sends_with_curl(&lower_line) => {
                    continue;
                }
                _ => {}
            }
            let dynamic = pat.kind == Kind::Executes
                && (matches!(
                    pat.what,
                    "pipes into an interpreter" | "evaluates code" | "runs a command string"
                ) || lower_line.contains("shell=true")
                    || lower_line.contains("os.system")
                    || lower_line.contains("os.popen")
                    || lower_line.contains("__import__")
                    || lower_line.contains("getattr")
                    || ((lower_line.contains("execsync") || lower_line.contains("exec("))
                        && (line.contains('+') || line.contains("${"))));
            let strong = match pat.kind {
                Kind::SupplyChain => {
                    let verify_off = [
                        "trusted-host",
                        "trusted_host",
                        "strict-ssl",
                        "insteadof",
                        "sslverify",
                        "ssl_verify_mode",
                        "reject_unauthorized",
                        "httpsverify",
                        "ssl_no_verify",
                        "cert false",
                        "ca-certificates",
                        "add-trusted-cert",
                    ];
                    lower_line.contains("config set")
                        || (writes && !lower_line.contains("install"))
                        || verify_off.iter().any(|w| lower_line.contains(w))
                        // A source whose host is not a well-known index (any manager).
                        || lower_line.contains("://")
                            && !KNOWN_INDEXES.iter().any(|h| lower_line.contains(h))
                }
                Kind::Persists => pat.what.starts_with("changes agent"),
                _ => false,
            };
            let target = match pat.kind {
                Kind::Downloads => c.target.captures(line).and_then(|t| {
                    (1..=3)
                        .filter_map(|i| t.get(i))
                        .next()
                        .map(|g| base_name(g.as_str()))
                        .filter(|s| s.len() >= 2 && s != "-" && s != "dev/null" && s != "null")
                }),
                _ => None,
            };
            // A token taken from a provider's own CLI is sensitive when the file also names a
            // host that is not that provider's (checked once per file).
            let strong = if pat.what == CLI_CREDENTIAL {
                *foreign.get_or_insert_with(|| names_foreign_host(text))
            } else {
                strong
            };
            // A pipe that only Makefile variables spell: the line rules never saw it.
            let what = if pat.what == "pipes into an interpreter"
                && !std::ptr::eq(text, original)
                && original.lines().nth(n.saturating_sub(1) as usize) != Some(full)
            {
                EXPANDED_PIPE
            } else {
                pat.what
            };
            let fact = site.fact(pat.kind, what, excerpt(line), n);
            add(
                out,
                Fact {
                    dynamic,
                    strong,
                    target,
                    ..fact
                },
            );
        }
    }
    if let Some((line, shown)) = encoded_dns_lookup(text) {
        add(out, site.fact(Kind::Sends, DNS_SEND, excerpt(shown), line));
    }
}

/// A DNS lookup (`getaddrinfo`, `gethostbyname`, `dns.lookup`, `dns.promises.resolve*`, a
/// resolver's `resolve`/`query`) of a name held by a variable, in a code file that also
/// encodes data as hex, base32 or base64: a name spelled from encoded data carries it off
/// through the resolver. A lookup of a configured host name (no encoding) is not. Gives the
/// lookup's line and text.
fn encoded_dns_lookup(text: &str) -> Option<(u32, &str)> {
    const ENCODES: &[&str] = &[
        ".hex()",
        "hexlify(",
        "b32encode(",
        "b64encode(",
        "urlsafe_b64encode(",
        "toString('hex')",
        "toString(\"hex\")",
        "toString('base64')",
        "toString(\"base64\")",
        "toString('base64url')",
        "btoa(",
    ];
    if text.len() > 1024 * 1024 || !ENCODES.iter().any(|e| text.contains(e)) {
        return None;
    }
    static RE: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let re = RE
        .get_or_init(|| {
            regex::Regex::new(
                r"\b(?:getaddrinfo|gethostbyname(?:_ex)?|dns\.(?:promises\.)?(?:lookup|resolve\w*)|[rR]esolver\(\)\.(?:resolve|query)|resolver\.(?:resolve|query))\s*\(\s*[A-Za-z_][\w.]*\s*[,)]",
            )
            .ok()
        })
        .as_ref()?;
    let m = re.find(text)?;
    let (ls, le) = crate::scanner::line_bounds(text, m.start());
    let line = u32::try_from(text.get(..ls)?.matches('\n').count() + 1).ok()?;
    Some((line, text.get(ls..le)?))
}

/// The facts of one file read as code (`code`, decision 0034): shell, Python and JavaScript
/// parsed, PowerShell by a text pass; appended to `out` within the scan's caps.
pub(crate) fn code_facts(
    path: Option<&str>,
    text: &str,
    excerpt: &dyn Fn(&str) -> String,
    out: &mut Vec<Fact>,
    spent: &mut std::time::Duration,
) -> crate::code::Outcome {
    let (
        _,
        Site {
            runs, why, install, ..
        },
    ) = file_role(path);
    let before = out.len();
    let mut facts = Vec::new();
    let left = crate::code::MAX_SCAN_CODE_TIME.saturating_sub(*spent);
    let started = std::time::Instant::now();
    let outcome = crate::code::analyze(path, text, runs, why, install, excerpt, &mut facts, left);
    *spent += started.elapsed();
    let room = MAX_FACTS
        .saturating_sub(out.len())
        .min(MAX_FACTS_PER_FILE.saturating_sub(out.len() - before));
    out.extend(facts.into_iter().take(room));
    outcome
}

/// Configuration and task files whose values may be substituted into their own templates.
fn is_template_config(name: &str) -> bool {
    matches!(
        name,
        "justfile" | ".justfile" | "taskfile.yml" | "taskfile.yaml"
    ) || [".yaml", ".yml", ".json", ".toml", ".just"]
        .iter()
        .any(|e| name.ends_with(e))
}

/// The file with its own values substituted into its templates (`{name}`, `{{name}}`,
/// `{{.NAME}}`, `${name}`), three rounds deep; `None` when no template names a value of
/// the file. Values are quoted scalars of a line (`name: "v"`, `"name": "v"`, `name = "v"`,
/// `name := "v"`), or a justfile's sum of quoted strings and names (`"cu" + "rl"`), at most
/// 256 of 512 bytes each, single lines, so line numbers stay those of the file.
pub(crate) fn expand_config(text: &str) -> Option<String> {
    static RES: OnceLock<Option<(Regex, Regex)>> = OnceLock::new();
    if text.len() > 1024 * 1024
        || !(text.contains("{{") || text.contains("${") || text.contains("{"))
    {
        return None;
    }
    let (def, place) = RES
        .get_or_init(|| {
            Some((
                Regex::new(r#"(?m)^[ \t-]*["']?([A-Za-z_][A-Za-z0-9_.-]*)["']?[ \t]*(?::=|:|=)[ \t]*((?:"[^"\n]*"|'[^'\n]*'|[A-Za-z_][A-Za-z0-9_.]*)(?:[ \t]*\+[ \t]*(?:"[^"\n]*"|'[^'\n]*'|[A-Za-z_][A-Za-z0-9_.]*))*)[ \t]*,?[ \t]*$"#).ok()?,
                Regex::new(r"\{\{\s*\.?([A-Za-z_][A-Za-z0-9_-]*)\s*\}\}|\$\{([A-Za-z_][A-Za-z0-9_-]*)\}|\{([A-Za-z_][A-Za-z0-9_-]*)\}").ok()?,
            ))
        })
        .as_ref()?;
    if !place.is_match(text) {
        return None;
    }
    // Definitions: each a list of terms, a quoted literal or a name.
    let mut defs: std::collections::HashMap<String, Vec<(bool, String)>> =
        std::collections::HashMap::new();
    for c in def.captures_iter(text).take(256) {
        let (Some(name), Some(rhs)) = (c.get(1), c.get(2)) else {
            continue;
        };
        let mut terms = Vec::new();
        let mut rest = rhs.as_str().trim();
        while !rest.is_empty() && terms.len() < 17 {
            let (term, after) = match rest.chars().next() {
                Some(q @ ('"' | '\'')) => {
                    let body = rest.get(1..).unwrap_or("");
                    let end = body.find(q).unwrap_or(body.len());
                    (
                        (true, body.get(..end).unwrap_or("").to_string()),
                        body.get(end + 1..).unwrap_or(""),
                    )
                }
                _ => {
                    let end = rest
                        .find(|c: char| c == '+' || c.is_whitespace())
                        .unwrap_or(rest.len());
                    (
                        (false, rest.get(..end).unwrap_or("").to_string()),
                        rest.get(end..).unwrap_or(""),
                    )
                }
            };
            terms.push(term);
            rest = after
                .trim_start()
                .strip_prefix('+')
                .unwrap_or(after)
                .trim_start();
        }
        // A bare word alone is a YAML value, not a name: kept as a literal.
        if terms.len() == 1 && !terms.first().is_some_and(|t| t.0) {
            if let Some(t) = terms.first_mut() {
                t.0 = true;
            }
        }
        if name.as_str().len() <= 64 && terms.iter().all(|t| t.1.len() <= 512) {
            defs.insert(name.as_str().to_string(), terms);
        }
    }
    fn value(
        defs: &std::collections::HashMap<String, Vec<(bool, String)>>,
        name: &str,
        depth: usize,
    ) -> Option<String> {
        if depth > 3 {
            return None;
        }
        let mut out = String::new();
        for (lit, t) in defs.get(name)? {
            if *lit {
                out.push_str(t);
            } else {
                out.push_str(&value(defs, t, depth + 1)?);
            }
        }
        (out.len() <= 512).then_some(out)
    }
    let mut out = text.to_string();
    let mut any = false;
    for _ in 0..3 {
        let mut changed = false;
        let next = place
            .replace_all(&out, |c: &regex::Captures<'_>| {
                let whole = c.get(0).map_or("", |m| m.as_str());
                let name = c
                    .get(1)
                    .or(c.get(2))
                    .or(c.get(3))
                    .map_or("", |m| m.as_str());
                match value(&defs, name, 0).filter(|v| !v.contains('\n')) {
                    Some(v) => {
                        changed = true;
                        v
                    }
                    None => whole.to_string(),
                }
            })
            .into_owned();
        out = next;
        any |= changed;
        if !changed || out.len() > 2 * text.len() + 4096 {
            break;
        }
    }
    any.then_some(out)
}

fn is_makefile_name(name: &str) -> bool {
    matches!(name, "makefile" | "gnumakefile") || name.ends_with(".mk")
}

/// A Makefile with its variables (`NAME = value`, `:=`, `?=`, `+=`) expanded where they are
/// used (`$(NAME)`, `${NAME}`), three rounds deep; `SHELL` is `/bin/sh` unless set. Values
/// are single lines, so line numbers stay those of the file.
pub(crate) fn expand_make(text: &str) -> String {
    static ASSIGN: OnceLock<Option<Regex>> = OnceLock::new();
    let Some(assign) = ASSIGN
        .get_or_init(|| {
            Regex::new(r"(?m)^(?:export\s+|override\s+)?([A-Za-z_][\w.-]{0,63})[ \t]*(\+=|\?=|::?=|=)[ \t]*(.{0,256}?)[ \t]*$").ok()
        })
        .as_ref()
    else {
        return text.to_string();
    };
    let mut vars: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    vars.insert("SHELL".to_string(), "/bin/sh".to_string());
    for c in assign.captures_iter(text).take(256) {
        let (Some(name), Some(op), Some(value)) = (c.get(1), c.get(2), c.get(3)) else {
            continue;
        };
        let (name, value) = (name.as_str().to_string(), value.as_str().to_string());
        match op.as_str() {
            "+=" => {
                let v = vars.entry(name).or_default();
                if v.len() < 512 {
                    v.push(' ');
                    v.push_str(&value);
                }
            }
            "?=" => {
                vars.entry(name).or_insert(value);
            }
            _ => {
                vars.insert(name, value);
            }
        }
    }
    let mut out = text.to_string();
    for _ in 0..3 {
        let mut next = String::with_capacity(out.len());
        let mut rest = out.as_str();
        let mut changed = false;
        while let Some(i) = rest.find('$') {
            next.push_str(rest.get(..i).unwrap_or(""));
            let after = rest.get(i + 1..).unwrap_or("");
            let close = match after.chars().next() {
                Some('(') => Some(')'),
                Some('{') => Some('}'),
                _ => None,
            };
            let name = close.and_then(|cl| {
                let body = after.get(1..)?;
                let end = body.find(cl)?;
                let name = body.get(..end)?;
                name.chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '.' | '-'))
                    .then_some(name)
            });
            match name.and_then(|n| vars.get(n).map(|v| (n.len(), v))) {
                Some((len, v)) if !v.contains('\n') => {
                    next.push_str(v);
                    rest = after.get(len + 2..).unwrap_or("");
                    changed = true;
                }
                _ => {
                    next.push('$');
                    rest = after;
                }
            }
            if next.len() > 2 * text.len() + 4096 {
                return out;
            }
        }
        next.push_str(rest);
        out = next;
        if !changed {
            break;
        }
    }
    out
}

/// Script files, by extension (or none, as for `configure` or a hook).
fn is_script_name(name: &str) -> bool {
    let ext = name.rsplit_once('.').map_or("", |(_, e)| e);
    !name.contains('.')
        || matches!(
            ext,
            "sh" | "bash"
                | "zsh"
                | "py"
                | "js"
                | "mjs"
                | "cjs"
                | "ts"
                | "ps1"
                | "psm1"
                | "rb"
                | "pl"
                | "bat"
                | "cmd"
        )
}

/// Words a command assembled from pieces must not spell.
const SPLIT_WORDS: &[&str] = &[
    "curl",
    "wget",
    "bash",
    "sh",
    "zsh",
    "nc",
    "ncat",
    "python",
    "python3",
    "perl",
    "eval",
    "exec",
    "base64",
    "powershell",
    "iex",
    "invoke-expression",
    "chmod",
    "/bin/sh",
    "/bin/bash",
    "/dev/tcp",
    "system",
    "popen",
    "subprocess",
    "child_process",
    "execsync",
    "spawn",
];

/// Lines that spell a dangerous command word from pieces: adjacent or `+`-joined string
/// literals (`"ba""sh"`, `'sys'+'tem'`) or concatenated shell variables holding literals
/// (`a=cu; b=rl; $a$b`), where no single piece holds the word. `(line start, line end, word)`.
pub(crate) fn assembled_words(text: &str) -> Vec<(usize, usize, String)> {
    struct Res {
        assign: Regex,
        vars: Regex,
        var: Regex,
        lits: Regex,
        lit: Regex,
    }
    static R: OnceLock<Option<Res>> = OnceLock::new();
    let Some(r) = R
        .get_or_init(|| {
            Some(Res {
                assign: Regex::new(
                    r#"(?m)(?:^|[\s;])([A-Za-z_]\w*)=(?:"([^"$`\n]{0,16})"|'([^'\n]{0,16})'|([^\s;"'$`]{1,16}))(?:[\s;]|$)"#,
                )
                .ok()?,
                vars: Regex::new(r"(?:\$\{?[A-Za-z_]\w*\}?){2,}").ok()?,
                var: Regex::new(r"\$\{?([A-Za-z_]\w*)\}?").ok()?,
                lits: Regex::new(
                    r#"(?:"[^"\n]{0,12}"|'[^'\n]{0,12}')(?:[ \t]*\+?[ \t]*(?:"[^"\n]{0,12}"|'[^'\n]{0,12}')){1,6}"#,
                )
                .ok()?,
                lit: Regex::new(r#""([^"\n]*)"|'([^'\n]*)'"#).ok()?,
            })
        })
        .as_ref()
    else {
        return Vec::new();
    };
    let mut out: Vec<(usize, usize, String)> = Vec::new();
    let push = |out: &mut Vec<(usize, usize, String)>, at: usize, w: String| {
        let (ls, le) = crate::scanner::line_bounds(text, at);
        if out.len() < 8 && out.last().map(|l| l.0) != Some(ls) {
            out.push((ls, le, w));
        }
    };
    // Variables holding pieces, concatenated (`$a$b`): only when the text concatenates any.
    if r.vars.is_match(text) {
        let mut vars: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
        for c in r.assign.captures_iter(text).take(512) {
            if let (Some(name), Some(v)) = (c.get(1), c.get(2).or(c.get(3)).or(c.get(4))) {
                vars.insert(name.as_str(), v.as_str());
            }
        }
        if !vars.is_empty() {
            for m in r.vars.find_iter(text).take(256) {
                let pieces: Vec<String> = r
                    .var
                    .captures_iter(m.as_str())
                    .filter_map(|c| {
                        c.get(1)
                            .and_then(|n| vars.get(n.as_str()))
                            .map(|v| v.to_string())
                    })
                    .collect();
                if let Some(w) = split_word(&pieces) {
                    push(&mut out, m.start(), w);
                }
            }
        }
    }
    // String literals joined (`"ba""sh"`, `'sys' + 'tem'`).
    for m in r.lits.find_iter(text).take(1024) {
        let pieces: Vec<String> = r
            .lit
            .captures_iter(m.as_str())
            .filter_map(|c| c.get(1).or(c.get(2)).map(|g| g.as_str().to_string()))
            .collect();
        if let Some(w) = split_word(&pieces) {
            push(&mut out, m.start(), w);
        }
    }
    out.sort_by_key(|l| l.0);
    out
}

/// Whether `word` (lower case, no folder) is a command word that must not be spelled from
/// pieces.
pub(crate) fn is_split_word(word: &str) -> bool {
    !word.is_empty()
        && SPLIT_WORDS
            .iter()
            .any(|w| w.rsplit('/').next().unwrap_or(w) == word)
}

/// The dangerous word that `pieces` spell together when no piece holds it alone.
fn split_word(pieces: &[String]) -> Option<String> {
    if pieces.len() < 2 {
        return None;
    }
    let joined = pieces.concat().to_ascii_lowercase();
    let head = joined.split_whitespace().next().unwrap_or("");
    let head = head.rsplit('/').next().unwrap_or(head);
    let word = SPLIT_WORDS.iter().find(|w| {
        let w = w.rsplit('/').next().unwrap_or(w);
        head == w
    })?;
    let alone = pieces.iter().any(|p| {
        p.to_ascii_lowercase()
            .contains(word.rsplit('/').next().unwrap_or(word))
    });
    (!alone).then(|| word.to_string())
}

/// Why a container build is carried.
const CONTAINER_BUILD: &str = "a container build (runs inside the image, not on the machine)";

/// Byte ranges of the fenced blocks of a Markdown text that hold a container build (info
/// string `dockerfile` / `containerfile`, or a first line `FROM image`).
fn container_fences(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    // (start, info says container, first code line seen)
    let mut open: Option<(usize, bool, bool)> = None;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        let fence = t.starts_with("```") || t.starts_with("~~~");
        match open.as_mut() {
            None if fence => {
                let info = t.trim_start_matches(['`', '~']).trim().to_ascii_lowercase();
                let container = matches!(
                    info.split_whitespace().next().unwrap_or(""),
                    "dockerfile" | "docker" | "containerfile"
                );
                open = Some((pos, container, false));
            }
            None => {}
            Some(&mut (a, container, _)) if fence => {
                if container {
                    out.push((a, pos + line.len()));
                }
                open = None;
            }
            Some((_, container, first))
                if !*first && !t.trim().is_empty() && !t.starts_with('#') =>
            {
                *first = true;
                let lower = t.to_ascii_lowercase();
                if lower.starts_with("from ") || lower.starts_with("arg ") {
                    *container = true;
                }
            }
            Some(_) => {}
        }
        pos += line.len();
    }
    if let Some((a, true, _)) = open {
        out.push((a, text.len()));
    }
    out
}

/// The `code spans` of a Markdown line, joined by ` ; `.
fn code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut parts = line.split('`');
    parts.next();
    while let Some(code) = parts.next() {
        if !out.is_empty() {
            out.push_str(" ; ");
        }
        out.push_str(code);
        if parts.next().is_none() {
            break;
        }
    }
    out
}

fn is_markdown_name(name: &str) -> bool {
    name.ends_with(".md") || name.ends_with(".markdown") || name.ends_with(".mdx")
}

fn sends_with_curl(lower_line: &str) -> bool {
    [
        " -d ",
        " -d'",
        " -d\"",
        "--data",
        " -f ",
        "--form",
        " -t ",
        "--upload-file",
        "-x post",
        "-xpost",
        "-x put",
        "--request post",
        "--request put",
    ]
    .iter()
    .any(|w| lower_line.contains(w))
}

fn base_name(s: &str) -> String {
    let s = s.trim_matches(|c| c == '"' || c == '\'');
    s.rsplit('/').next().unwrap_or(s).to_string()
}

/// A shell line whose command word is a variable (`$CMD args`, `"${A}${B}"`, `eval "$X"`).
pub(crate) fn variable_command(line: &str) -> bool {
    let t = line.trim_start();
    let t = t.strip_prefix("sudo ").unwrap_or(t);
    let t = t.strip_prefix('"').unwrap_or(t);
    let Some(rest) = t.strip_prefix('$') else {
        return false;
    };
    let rest = rest.strip_prefix('{').unwrap_or(rest);
    let ident: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if ident.is_empty() || ident.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    // `$HOME/bin/tool` runs a fixed tool under a variable folder; `$(`, `$ npm` are not this.
    let after = rest.get(ident.len()..).unwrap_or("");
    let after = after.strip_prefix('}').unwrap_or(after);
    // PowerShell: `$x = …`, `$x += …` assign and `$x.Method()` calls a method.
    let assigns = {
        let a = after.trim_start();
        a.starts_with('=') && !a.starts_with("==")
            || ["+=", "-=", "*=", "/=", "++", "--"]
                .iter()
                .any(|op| a.starts_with(op))
    };
    !after.starts_with('/')
        && !after.starts_with('=')
        && !after.starts_with('[')
        && !after.starts_with('.')
        && !assigns
}

type Adder<'a> = dyn FnMut(&mut Vec<Fact>, Fact) + 'a;

/// `package.json`: install-time scripts run on `npm install`.
fn package_json(
    path: Option<&str>,
    text: &str,
    excerpt: &dyn Fn(&str) -> String,
    add: &mut Adder<'_>,
    out: &mut Vec<Fact>,
    referenced: &mut HashSet<(String, bool)>,
) {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return;
    };
    let Some(scripts) = value.get("scripts").and_then(|s| s.as_object()) else {
        return;
    };
    for hook in [
        "preinstall",
        "install",
        "postinstall",
        "prepare",
        "prepublish",
        "preuninstall",
        "postuninstall",
    ] {
        let Some(cmd) = scripts.get(hook).and_then(|v| v.as_str()) else {
            continue;
        };
        let line = line_of(text, &format!("\"{hook}\""));
        let what = match hook {
            "preinstall" => "npm preinstall hook",
            "install" => "npm install hook",
            "postinstall" => "npm postinstall hook",
            "prepare" => "npm prepare hook",
            "prepublish" => "npm prepublish hook",
            "preuninstall" => "npm preuninstall hook",
            _ => "npm postuninstall hook",
        };
        let npm = Site::install(path, "runs at install time (npm lifecycle script)");
        add(out, npm.fact(Kind::Executes, what, excerpt(cmd), line));
        // What the command itself does, at install time.
        let mut inner = Vec::new();
        let mut refs = HashSet::new();
        extract(Some("setup.py"), cmd, excerpt, &mut inner, &mut refs);
        for mut f in inner {
            f.path = path.map(str::to_string);
            f.line = line;
            f.why = "runs at install time (npm lifecycle script)";
            add(out, f);
        }
        if let Some(c) = compiled() {
            for cap in c.referenced.captures_iter(cmd) {
                if let Some(m) = cap.get(1) {
                    referenced.insert((m.as_str().trim_start_matches("./").to_string(), true));
                }
            }
        }
    }
}

/// An agent settings file (`.claude/settings.json` and the like): broad permission grants and
/// hooks the agent runs by itself.
fn agent_settings(
    site: Site<'_>,
    text: &str,
    excerpt: &dyn Fn(&str) -> String,
    add: &mut Adder<'_>,
    out: &mut Vec<Fact>,
    referenced: &mut HashSet<(String, bool)>,
) {
    // Agent settings never run at install time.
    let site = Site {
        install: false,
        ..site
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return;
    };
    let perms = value.get("permissions");
    let allow = perms
        .and_then(|p| p.get("allow"))
        .and_then(|a| a.as_array())
        .cloned()
        .unwrap_or_default();
    let mode = perms
        .and_then(|p| p.get("defaultMode"))
        .and_then(|m| m.as_str())
        .unwrap_or("");
    let broad: Vec<String> = allow
        .iter()
        .filter_map(|v| v.as_str())
        .filter(|s| {
            let s = s.replace(' ', "");
            matches!(
                s.as_str(),
                "Bash"
                    | "Bash(*)"
                    | "Bash(*:*)"
                    | "*"
                    | "Bash(sudo:*)"
                    | "Bash(curl:*)"
                    | "WebFetch"
                    | "Write"
                    | "Write(*)"
                    | "Edit(*)"
            ) || s.starts_with("Bash(sudo")
                || s.starts_with("Bash(curl")
                || s.starts_with("Bash(rm")
        })
        .map(str::to_string)
        .collect();
    if !broad.is_empty() || mode == "bypassPermissions" {
        let what = if mode == "bypassPermissions" {
            "grants the agent every permission (bypassPermissions)"
        } else {
            "grants the agent broad permissions"
        };
        let detail = if broad.is_empty() {
            "defaultMode: bypassPermissions".to_string()
        } else {
            broad.join(", ")
        };
        let line = line_of(
            text,
            if broad.is_empty() {
                "defaultMode"
            } else {
                "\"allow\""
            },
        );
        let fact = site.fact(Kind::Persists, what, excerpt(&detail), line);
        add(
            out,
            Fact {
                strong: true,
                ..fact
            },
        );
    }
    mcp_servers(site, &value, text, excerpt, add, out);
    if let Some(hooks) = value.get("hooks").and_then(|h| h.as_object()) {
        if !hooks.is_empty() {
            let names = hooks.keys().cloned().collect::<Vec<_>>().join(", ");
            let line = line_of(text, "\"hooks\"");
            // What each hook's command does, read like a script of the skill; the scripts it
            // names run.
            let mut commands = Vec::new();
            hook_commands(&serde_json::Value::Object(hooks.clone()), &mut commands, 0);
            let mut inner = Vec::new();
            for cmd in commands.iter().take(32) {
                let mut refs = HashSet::new();
                extract(Some("agent-hook.sh"), cmd, excerpt, &mut inner, &mut refs);
                names_run(cmd, refs, referenced);
            }
            let risky = inner.iter().any(|f| match f.kind {
                Kind::Executes => f.dynamic,
                Kind::Obfuscates => true,
                _ => true,
            });
            let what = if risky {
                "registers agent hooks"
            } else {
                FIXED_HOOKS
            };
            add(out, site.fact(Kind::Persists, what, excerpt(&names), line));
            for mut f in inner {
                f.path = site.path.map(str::to_string);
                f.line = line;
                f.why = "runs as an agent hook";
                add(out, f);
            }
        }
    }
}

/// The lifecycle commands of a development container: command lines the editor runs when the
/// container is opened (`initializeCommand` on the host itself), like an MCP server's.
const DEVCONTAINER_COMMANDS: &[&str] = &[
    "initializeCommand",
    "onCreateCommand",
    "updateContentCommand",
    "postCreateCommand",
    "postStartCommand",
    "postAttachCommand",
];

/// A devcontainer configuration (JSON with `//` comments): each lifecycle command (a string,
/// an argument list, or an object of either) is read like a script of the skill, at the
/// command's line, and the scripts it names run. At most 32 command lines, 64 arguments each.
fn devcontainer(
    site: Site<'_>,
    text: &str,
    excerpt: &dyn Fn(&str) -> String,
    add: &mut Adder<'_>,
    out: &mut Vec<Fact>,
    referenced: &mut HashSet<(String, bool)>,
) {
    let value = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .or_else(|| {
            let plain: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            serde_json::from_str::<serde_json::Value>(&plain).ok()
        });
    let Some(value) = value else { return };
    let argv = |v: &serde_json::Value| -> Option<String> {
        match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Array(a) => Some(
                a.iter()
                    .take(64)
                    .filter_map(|x| x.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        }
    };
    let mut lines: Vec<(&str, String)> = Vec::new();
    for key in DEVCONTAINER_COMMANDS {
        match value.get(key) {
            Some(serde_json::Value::Object(m)) => {
                lines.extend(m.values().take(32).filter_map(&argv).map(|l| (*key, l)));
            }
            Some(v) => lines.extend(argv(v).map(|l| (*key, l))),
            None => {}
        }
    }
    let site = Site {
        runs: true,
        install: false,
        ..site
    };
    for (key, line) in lines.into_iter().take(32) {
        let at = line_of(text, &format!("\"{key}\""));
        let why = "runs when the development container opens (a devcontainer lifecycle command)";
        let refs = config_command(
            site,
            "devcontainer-command.sh",
            &line,
            at,
            why,
            excerpt,
            add,
            out,
        );
        names_run(&line, refs, referenced);
    }
}

/// Reads `line`, a command line a configuration file makes an agent or an editor run, like a
/// script of the skill (`as_file` names it for the code reading): its facts are placed at line
/// `at` of the configuration file, running as the site does, with `why`. Returns the files
/// the reading found it to name.
#[allow(clippy::too_many_arguments)]
fn config_command(
    site: Site<'_>,
    as_file: &str,
    line: &str,
    at: u32,
    why: &'static str,
    excerpt: &dyn Fn(&str) -> String,
    add: &mut Adder<'_>,
    out: &mut Vec<Fact>,
) -> HashSet<(String, bool)> {
    let mut inner = Vec::new();
    let mut refs = HashSet::new();
    extract(Some(as_file), line, excerpt, &mut inner, &mut refs);
    for mut f in inner {
        f.path = site.path.map(str::to_string);
        f.line = at;
        f.runs = site.runs;
        f.why = why;
        add(out, f);
    }
    refs
}

/// Marks as run the files a command line names: `refs`, found by reading it as code, and the
/// paths the `referenced` pattern finds in its text.
fn names_run(cmd: &str, refs: HashSet<(String, bool)>, referenced: &mut HashSet<(String, bool)>) {
    for (r, _) in refs {
        referenced.insert((r, false));
    }
    if let Some(c) = compiled() {
        for cap in c.referenced.captures_iter(cmd) {
            if let Some(m) = cap.get(1) {
                referenced.insert((m.as_str().trim_start_matches("./").to_string(), false));
            }
        }
    }
}

/// Files that configure the MCP servers an agent starts (`mcpServers`, or `servers` in VS
/// Code's `mcp.json`).
const MCP_CONFIGS: &[&str] = &[
    ".mcp.json",
    "mcp.json",
    "claude_desktop_config.json",
    "mcp_settings.json",
    "cline_mcp_settings.json",
];

/// The MCP servers of an agent configuration: each server's `command` and `args` are a
/// command line the agent runs when it starts (with the user's environment), read like a
/// script of the skill, so `npx -y https://…/pkg.tgz` installs a package from a URL.
fn mcp_servers(
    site: Site<'_>,
    value: &serde_json::Value,
    text: &str,
    excerpt: &dyn Fn(&str) -> String,
    add: &mut Adder<'_>,
    out: &mut Vec<Fact>,
) {
    let site = Site {
        install: false,
        ..site
    };
    let servers = value
        .get("mcpServers")
        .or_else(|| value.get("servers"))
        .and_then(|s| s.as_object());
    let Some(servers) = servers else { return };
    for (name, server) in servers.iter().take(32) {
        let Some(command) = server.get("command").and_then(|c| c.as_str()) else {
            continue;
        };
        let mut line = command.to_string();
        for a in server
            .get("args")
            .and_then(|a| a.as_array())
            .into_iter()
            .flatten()
            .take(64)
        {
            if let Some(a) = a.as_str() {
                line.push(' ');
                line.push_str(a);
            }
        }
        let at = line_of(text, &format!("\"{name}\""));
        let why = "starts with the agent (an MCP server of its configuration)";
        config_command(site, "mcp-server.sh", &line, at, why, excerpt, add, out);
    }
}

/// The `command` strings of an agent settings file's hooks (bounded depth).
fn hook_commands(v: &serde_json::Value, out: &mut Vec<String>, depth: usize) {
    if depth > 6 || out.len() >= 32 {
        return;
    }
    match v {
        serde_json::Value::Object(map) => {
            for (k, x) in map {
                match x {
                    serde_json::Value::String(c) if k == "command" => out.push(c.clone()),
                    _ => hook_commands(x, out, depth + 1),
                }
            }
        }
        serde_json::Value::Array(items) => {
            for x in items {
                hook_commands(x, out, depth + 1);
            }
        }
        _ => {}
    }
}

/// The 1-based line of the first occurrence of `needle` (1 when absent).
/// `pyproject.toml`: an in-tree build backend (`backend-path`) and hatch's custom build hook
/// run at install time, so the files they name do.
fn pyproject(
    path: Option<&str>,
    text: &str,
    add: &mut Adder<'_>,
    out: &mut Vec<Fact>,
    referenced: &mut HashSet<(String, bool)>,
) {
    let value_of = |key: &str| -> Option<(u32, String)> {
        text.lines().enumerate().find_map(|(i, l)| {
            let t = l.trim();
            let rest = t.strip_prefix(key)?.trim_start().strip_prefix('=')?;
            let v = rest
                .trim()
                .trim_matches(|c| c == '"' || c == '\'' || c == '[' || c == ']');
            let v = v.split(['"', '\'', ',']).next().unwrap_or(v).trim();
            Some((u32::try_from(i + 1).unwrap_or(u32::MAX), v.to_string()))
        })
    };
    let dir = path
        .and_then(|p| p.rsplit_once('/').map(|(d, _)| format!("{d}/")))
        .unwrap_or_default();
    let mut hook = |what: &'static str, line: u32, file: String, out: &mut Vec<Fact>| {
        referenced.insert((format!("{dir}{file}"), true));
        let build = Site::install(path, "runs at install time (Python build)");
        add(out, build.fact(Kind::Executes, what, file, line));
    };
    if let (Some((line, backend)), Some((_, folder))) =
        (value_of("build-backend"), value_of("backend-path"))
    {
        let module = backend
            .split(':')
            .next()
            .unwrap_or(&backend)
            .replace('.', "/");
        let folder = folder.trim_start_matches("./").trim_end_matches('/');
        let file = if folder.is_empty() || folder == "." {
            format!("{module}.py")
        } else {
            format!("{folder}/{module}.py")
        };
        hook("in-tree build backend (pyproject)", line, file, out);
    }
    if let Some(at) = text.find("[tool.hatch.build.hooks.custom]") {
        let after = text.get(at..).unwrap_or("");
        let section_end = after
            .get(1..)
            .and_then(|a| a.find("\n["))
            .map_or(after.len(), |e| e + 1);
        let section = after.get(..section_end).unwrap_or("");
        let file = section
            .lines()
            .find_map(|l| {
                let rest = l
                    .trim()
                    .strip_prefix("path")?
                    .trim_start()
                    .strip_prefix('=')?;
                Some(
                    rest.trim()
                        .trim_matches(|c| c == '"' || c == '\'')
                        .to_string(),
                )
            })
            .unwrap_or_else(|| "hatch_build.py".to_string());
        hook(
            "hatch build hook (pyproject)",
            line_of(text, "[tool.hatch.build.hooks.custom]"),
            file,
            out,
        );
    }
}

fn line_of(text: &str, needle: &str) -> u32 {
    text.find(needle).map_or(1, |i| {
        let n = memchr::memchr_iter(b'\n', text.as_bytes().get(..i).unwrap_or(&[])).count();
        u32::try_from(n + 1).unwrap_or(u32::MAX)
    })
}

/// At most this many bundled files looked for by name in the kept text of a scan (each search
/// reads up to the 4 MiB kept for joining).
pub(crate) const MAX_NAMED_SEARCHES: usize = 32;

/// Facts gathered over a scan, combined at its end.
#[derive(Debug, Default)]
pub(crate) struct Collector {
    pub facts: Vec<Fact>,
    /// Script paths that SKILL.md or an install hook invokes (`true`: from an install hook).
    pub referenced: HashSet<(String, bool)>,
    /// Time spent reading code as code in this scan (bounded by
    /// [`crate::code::MAX_SCAN_CODE_TIME`]).
    pub code_time: std::time::Duration,
    /// Code files kept for the joined reading across files ([`crate::code::link`]).
    pub kept: crate::code::link::Kept,
    /// Import edges between files (importer, module), from the joined reading.
    pub edges: HashSet<(String, String)>,
}

impl Collector {
    /// Values followed across files: each importing file read again with the values of the
    /// skill's modules it imports (decision 0042), within what is left of the scan's code
    /// time and the inventory's caps.
    fn join(&mut self) {
        let kept = std::mem::take(&mut self.kept);
        let role = |p: &str| {
            let (runs, why) = role(Some(p));
            let name = p.rsplit('/').next().unwrap_or(p).to_ascii_lowercase();
            (runs, why, is_install_file(&name))
        };
        let keep_line = |l: &str| {
            let t = l.trim();
            match t.char_indices().nth(160) {
                Some((end, _)) => format!("{}…", t.get(..end).unwrap_or("")),
                None => t.to_string(),
            }
        };
        let left = crate::code::MAX_SCAN_CODE_TIME.saturating_sub(self.code_time);
        let started = std::time::Instant::now();
        let joined = crate::code::link::join(&kept, &self.facts, &role, &keep_line, left);
        self.code_time += started.elapsed();
        let room = MAX_FACTS.saturating_sub(self.facts.len());
        self.facts.extend(joined.facts.into_iter().take(room));
        self.edges = joined.edges;
    }

    /// Whether a path is invoked by SKILL.md or an install hook (`Some(true)`: by an install
    /// hook).
    pub fn invoked(&self, path: &str) -> Option<bool> {
        let mut found = None;
        for (r, install) in &self.referenced {
            if path == r || path.ends_with(&format!("/{r}")) {
                found = Some(found.unwrap_or(false) || *install);
            }
        }
        found
    }

    /// What invokes `path`, when something that runs does: SKILL.md or an install hook
    /// naming it as a script, or a file of the skill that runs naming it (`true`: at install
    /// time).
    /// `search`: whether to look for the name in the kept files' text too (bounded by the
    /// caller: a scan searches for at most [`MAX_NAMED_SEARCHES`] names).
    pub fn invoker(&self, path: &str, search: bool) -> Option<(String, bool)> {
        if let Some(install) = self.invoked(path) {
            let by = if install {
                "an install hook"
            } else {
                "SKILL.md"
            };
            return Some((by.to_string(), install));
        }
        if !search {
            return None;
        }
        let runs = |p: &str| role(Some(p)).0;
        let by = self.kept.naming(path, &runs)?;
        let name = by.rsplit('/').next().unwrap_or(by).to_ascii_lowercase();
        Some((by.to_string(), is_install_file(&name)))
    }

    /// Files that are invoked run (and at install time when an install hook invokes them).
    fn settle(&mut self) {
        if self.referenced.is_empty() {
            return;
        }
        for f in &mut self.facts {
            let Some(p) = f.path.as_deref() else { continue };
            for (r, install) in &self.referenced {
                if p == r || p.ends_with(&format!("/{r}")) {
                    if !f.runs {
                        f.runs = true;
                        f.why = "invoked by SKILL.md or an install hook";
                    }
                    if *install && !f.install {
                        f.install = true;
                        f.why = "invoked by an install hook";
                    }
                }
            }
        }
    }

    /// The inventory and the combination findings; `shown` makes text fit to show (secrets
    /// redacted, invisible characters made visible), applied only to what is shown.
    pub fn finish(mut self, shown: &dyn Fn(&str) -> String) -> (Inventory, Vec<Finding>) {
        self.join();
        self.settle();
        let mut findings = combine(&self.facts, &self.edges);
        for f in &mut findings {
            f.message = shown(&f.message);
            f.excerpt = shown(&f.excerpt);
        }
        let mut inv = Inventory::default();
        let mut seen: HashSet<(Kind, &'static str, Option<String>, String)> = HashSet::new();
        for f in &self.facts {
            if !seen.insert((f.kind, f.what, f.path.clone(), f.detail.clone())) {
                continue;
            }
            let list = match f.kind {
                Kind::Executes => &mut inv.executes,
                Kind::Reads => &mut inv.reads,
                Kind::Sends => &mut inv.sends,
                Kind::Downloads => &mut inv.downloads,
                Kind::Persists => &mut inv.persists,
                Kind::SupplyChain => &mut inv.supply_chain,
                Kind::Obfuscates => &mut inv.obfuscation,
            };
            if list.len() >= MAX_ITEMS_PER_KIND {
                inv.truncated = true;
                continue;
            }
            list.push(Capability {
                what: f.what.to_string(),
                detail: shown(&f.detail),
                path: f.path.clone(),
                line: f.line,
                role: if f.install {
                    Role::Install
                } else if f.runs {
                    Role::Runs
                } else {
                    Role::Carried
                },
                why: f.why.to_string(),
            });
        }
        (inv, findings)
    }
}

fn at(f: &Fact) -> String {
    format!("{}:{}", f.path.as_deref().unwrap_or("content"), f.line)
}

/// What a fact does and where: "reads `~/.ssh` (scripts/x.sh:3: `cat ~/.ssh/id_rsa`)".
fn does(f: &Fact) -> String {
    format!("{} ({}: `{}`)", f.what, at(f), f.detail)
}

/// A `combo.remote-code` finding at `anchor`: critical, or low when `low` says why (said at the
/// end of the message).
fn remote_code(low: Option<&str>, message: String, anchor: &Fact) -> Finding {
    let (severity, message) = match low {
        Some(why) => (
            Severity::Low,
            format!("{message} Reported as low instead of critical: {why}."),
        ),
        None => (Severity::Critical, message),
    };
    let title = "Downloads code and runs it";
    finding("combo.remote-code", severity, title, message, anchor)
}

fn finding(id: &str, severity: Severity, title: &str, message: String, anchor: &Fact) -> Finding {
    Finding {
        rule_id: id.to_string(),
        severity,
        title: title.to_string(),
        message,
        path: anchor.path.clone(),
        line: anchor.line.max(1),
        column: 1,
        excerpt: anchor.detail.clone(),
    }
}

/// Findings from combinations of the facts of files that run.
fn combine(facts: &[Fact], edges: &HashSet<(String, String)>) -> Vec<Finding> {
    let run: Vec<&Fact> = facts.iter().filter(|f| f.runs).collect();
    let of = |k: Kind| run.iter().copied().filter(move |f| f.kind == k);
    let mut out = Vec::new();

    // Reads secrets + sends = exfiltration.
    let sends: Vec<&Fact> = of(Kind::Sends).collect();
    // A token from a provider's CLI, in a file that names no other host, goes back to that
    // provider; it pairs only with a send in another file.
    let reads: Vec<&Fact> = of(Kind::Reads)
        .filter(|r| r.what != ENV_SECRET && r.what != PASSWORD_PROMPT)
        .filter(|r| r.what != CLI_CREDENTIAL || r.strong || sends.iter().any(|s| s.path != r.path))
        .collect();
    if let (Some(r), Some(_)) = (reads.first(), sends.first()) {
        let mut send_paths: std::collections::HashMap<Option<&str>, &Fact> =
            std::collections::HashMap::new();
        for s in &sends {
            send_paths.entry(s.path.as_deref()).or_insert(*s);
        }
        let same = reads
            .iter()
            .find_map(|r| send_paths.get(&r.path.as_deref()).map(|s| (*r, *s)));
        // A read in one module and a send in the file that imports it (or the other way
        // round) are one flow (decision 0042).
        let joined = || {
            if edges.is_empty() {
                return None;
            }
            reads.iter().find_map(|r| {
                let rp = r.path.as_deref()?;
                sends.iter().find_map(|s| {
                    let sp = s.path.as_deref()?;
                    let linked = edges.contains(&(rp.to_string(), sp.to_string()))
                        || edges.contains(&(sp.to_string(), rp.to_string()));
                    linked.then_some((*r, *s))
                })
            })
        };
        let mut via = "";
        let (r, s, severity) = match same {
            Some((r, s)) => (r, s, Severity::Critical),
            None => match joined() {
                Some((r, s)) => {
                    via = " One file imports the other, so the data read is the data sent.";
                    (r, s, Severity::Critical)
                }
                None => (*r, sends[0], Severity::High),
            },
        };
        out.push(finding(
            "combo.exfiltration",
            severity,
            "Reads sensitive data and sends data out",
            format!(
                "The skill {} and {}; together they can carry the data off the machine.{via}",
                does(r),
                does(s)
            ),
            s,
        ));
    } else if let Some((r, s)) = of(Kind::Reads)
        .filter(|r| r.what == ENV_SECRET || r.what == PASSWORD_PROMPT)
        .find_map(|r| {
            sends
                .iter()
                .find(|s| s.path == r.path && COVERT_SENDS.contains(&s.what))
                .map(|s| (r, *s))
        })
    {
        // A credential from the environment is sent to its service in a header or a body;
        // spelled into a DNS name or written to a raw socket, it is carried off.
        out.push(finding(
            "combo.exfiltration",
            Severity::Critical,
            "Reads sensitive data and sends data out",
            format!(
                "The skill {} and {}: a credential has no reason to leave through this channel.",
                does(r),
                does(s)
            ),
            s,
        ));
    }

    // Downloads a file or value, then runs it (not on one line: the line rules see that).
    let downloads: Vec<&Fact> = of(Kind::Downloads).collect();
    let execs: Vec<&Fact> = of(Kind::Executes).collect();
    // Indexed, so that padding with many facts costs one pass, not a product.
    let mut by_target: std::collections::HashMap<&str, &Fact> = std::collections::HashMap::new();
    let mut by_line: std::collections::HashMap<(Option<&str>, u32), &Fact> =
        std::collections::HashMap::new();
    for d in &downloads {
        if let Some(t) = d.target.as_deref() {
            by_target.entry(t).or_insert(*d);
        }
        by_line.entry((d.path.as_deref(), d.line)).or_insert(*d);
    }
    let remote = execs.iter().find_map(|e| {
        // On one line, the line rules judge a shell's fetch-and-run (with their vendor
        // installers); other ways to run what was fetched are judged here.
        // The line itself, not what the code pass says it runs (`(runs `…`)`).
        let line = e.detail.split(" (runs `").next().unwrap_or(&e.detail);
        // `eval "$(curl …)"` is the line rules'; a substitution of a function that prints a
        // download (`eval "$(tool) $(src) | $(runner)"`) shows them no download.
        let lower = line.to_ascii_lowercase();
        let seen_by_lines = (line.contains("$(") || line.contains('`'))
            && (lower.contains("curl") || lower.contains("wget"));
        if (e.what == "evaluates code" && !seen_by_lines) || e.what == EXPANDED_PIPE {
            if let Some(d) = by_line.get(&(e.path.as_deref(), e.line)) {
                return Some((*d, *e));
            }
        }
        if by_target.is_empty() {
            return None;
        }
        e.detail
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-'))
            .filter(|w| !w.is_empty())
            .find_map(|w| {
                by_target
                    .get(w)
                    .filter(|d| d.path != e.path || d.line != e.line)
                    .map(|d| (*d, *e))
            })
    });
    if let Some((d, e)) = remote {
        let lower = d.detail.to_ascii_lowercase();
        let vendor = crate::filters::installer_url(&lower)
            || (d.what == PACKAGE_FROM_URL && KNOWN_FORGES.iter().any(|f| lower.contains(f)));
        out.push(remote_code(
            vendor.then_some("the script comes from a well-known vendor installer"),
            format!(
                "The skill downloads ({}: `{}`) and runs what it fetched ({}: `{}`, {}): code that is not in the skill runs on the machine.",
                at(d),
                d.detail,
                at(e),
                e.detail,
                e.what
            ),
            e,
        ));
    }

    // A package installed from a URL or a repository: its build and install code runs, and
    // what it is can change at any time.
    if remote.is_none() {
        if let Some(d) = downloads.iter().find(|d| d.what == PACKAGE_FROM_URL) {
            let lower = d.detail.to_ascii_lowercase();
            let forge = KNOWN_FORGES.iter().any(|f| lower.contains(f));
            out.push(remote_code(
                forge.then_some("the package comes from a well-known code host"),
                format!(
                    "The skill {}: the package's build and install code runs on the machine, and it is not in the skill.",
                    does(d)
                ),
                d,
            ));
        }
    }

    // Install-time code that does more than build.
    let install: Vec<&Fact> = run.iter().copied().filter(|f| f.install).collect();
    let risky = |f: &&Fact| match f.kind {
        // A token named in the environment is how a build authenticates to its own index.
        Kind::Reads => f.what != ENV_SECRET && f.what != PASSWORD_PROMPT,
        Kind::Sends | Kind::Persists | Kind::SupplyChain => true,
        Kind::Executes | Kind::Obfuscates => f.dynamic,
        Kind::Downloads => false,
    };
    let inst_dl = install.iter().find(|f| f.kind == Kind::Downloads);
    // The download and a run in the same install-time file (or the downloaded file run).
    let inst_pair = install
        .iter()
        .filter(|d| d.kind == Kind::Downloads)
        .find_map(|d| {
            install
                .iter()
                .find(|e| {
                    e.kind == Kind::Executes
                        && !e.what.ends_with(" hook")
                        && (e.path == d.path
                            || d.target
                                .as_deref()
                                .is_some_and(|t| mentions_word(&e.detail, t)))
                        && (e.dynamic
                            || matches!(
                                e.what,
                                "runs a script" | "makes a file executable" | "starts a process"
                            ))
                })
                .map(|e| (*d, *e))
        });
    if let Some((d, e)) = inst_pair {
        out.push(finding(
            "combo.install-hook-exec",
            Severity::Critical,
            "Install-time code downloads and runs code",
            format!(
                "Code that runs when the skill or its package is installed ({}, {}) downloads (`{}`) and runs code ({}: `{}`): what runs is not in the skill.",
                at(d),
                d.why,
                d.detail,
                at(e),
                e.detail
            ),
            e,
        ));
    } else if let Some(r) = install.iter().find(|f| risky(f)) {
        let (severity, extra) = match (inst_dl, r.kind) {
            (Some(d), Kind::Executes) => (
                Severity::Critical,
                format!(
                    " It also downloads at install time ({}: `{}`).",
                    at(d),
                    d.detail
                ),
            ),
            (_, Kind::Reads | Kind::Sends) => (Severity::Critical, String::new()),
            _ => (Severity::High, String::new()),
        };
        let id = if r.kind == Kind::Persists {
            "combo.install-persist"
        } else {
            "combo.install-hook-exec"
        };
        out.push(finding(
            id,
            severity,
            "Install-time code with side effects",
            format!(
                "Code that runs when the skill or its package is installed ({}, {}) {} (`{}`).{extra}",
                at(r),
                r.why,
                r.what,
                r.detail
            ),
            r,
        ));
    } else if let Some(d) = inst_dl {
        out.push(finding(
            "combo.install-hook-exec",
            Severity::Medium,
            "Install-time code downloads",
            format!(
                "Code that runs when the skill or its package is installed ({}, {}) downloads (`{}`): what it fetches is not in the skill.",
                at(d),
                d.why,
                d.detail
            ),
            d,
        ));
    }

    // Persistence next to remote or dynamic code; persistence alone in code that runs.
    let persists: Vec<&Fact> = of(Kind::Persists).filter(|f| !f.install).collect();
    if let Some(p) = persists.iter().find(|p| p.strong) {
        out.push(finding(
            "combo.agent-permissions",
            Severity::High,
            "Grants the agent broad permissions",
            format!(
                "The skill {}: the agent would run commands without asking, in this and later sessions.",
                does(p)
            ),
            p,
        ));
    }
    if let Some(p) = persists
        .iter()
        .filter(|p| !p.strong && p.what != FIXED_HOOKS)
        .max_by_key(|p| sends.iter().any(|s| s.path == p.path))
    {
        // Fetched or dynamic code anywhere, or data sent out by the file that persists.
        let partner = downloads
            .first()
            .copied()
            .or_else(|| execs.iter().copied().find(|e| e.dynamic))
            .or_else(|| sends.iter().copied().find(|s| s.path == p.path));
        match partner {
            Some(x) => out.push(finding(
                "combo.persist-exec",
                Severity::High,
                "Persists and runs fetched or dynamic code",
                format!(
                    "The skill {} and {}: a change that outlives the session, next to code not fixed in the skill.",
                    does(p),
                    does(x)
                ),
                p,
            )),
            None => out.push(finding(
                "combo.persistence",
                Severity::Medium,
                "Changes that outlive the session",
                format!(
                    "The skill {}: it stays after the session ends.",
                    does(p)
                ),
                p,
            )),
        }
    }

    // A command word spelled from pieces, in code that runs: obfuscation of what runs.
    if let Some(a) = run
        .iter()
        .find(|f| f.what == "assembles a command word from pieces")
    {
        out.push(finding(
            "combo.assembled-command",
            Severity::High,
            "Assembles a command from pieces",
            format!(
                "The skill builds a command word from pieces so that it does not appear whole ({}: `{}`); a command hidden this way is meant to pass review.",
                at(a),
                a.detail
            ),
            a,
        ));
    }

    // Obfuscation that runs: decoded, decompressed or decrypted data evaluated or run as a
    // command, or an encoded blob in a file that also runs dynamic code.
    let obfuscated: Vec<&Fact> = of(Kind::Obfuscates).collect();
    let obf_exec = obfuscated
        .iter()
        .find(|o| o.dynamic)
        .map(|o| (*o, None))
        .or_else(|| {
            obfuscated.iter().find_map(|o| {
                execs
                    .iter()
                    .find(|e| e.dynamic && e.path == o.path)
                    .map(|e| (*o, Some(*e)))
            })
        });
    if let Some((o, e)) = obf_exec {
        let (severity, note) = if o.install || e.is_some_and(|e| e.install) {
            (Severity::Critical, " It runs at install time.")
        } else {
            (Severity::High, "")
        };
        let with = e.map_or(String::new(), |e| format!(" next to code that {}", does(e)));
        out.push(finding(
            "combo.obfuscated-exec",
            severity,
            "Runs obfuscated code",
            format!(
                "The skill {}{with}: what runs is hidden from review.{note}",
                does(o)
            ),
            o,
        ));
    }

    // Supply chain.
    let supply: Vec<&Fact> = of(Kind::SupplyChain).filter(|f| !f.install).collect();
    if let Some(s) = supply.iter().find(|s| s.strong) {
        out.push(finding(
            "combo.supply-chain",
            Severity::High,
            "Changes where packages come from",
            format!(
                "The skill {}: later installs may fetch packages from a source the user did not choose, or without verifying it.",
                does(s)
            ),
            s,
        ));
    }
    out
}

fn mentions_word(hay: &str, word: &str) -> bool {
    let bytes = hay.as_bytes();
    let mut from = 0;
    while let Some(i) = hay.get(from..).and_then(|h| h.find(word)) {
        let s = from + i;
        let e = s + word.len();
        let ok_before = s == 0 || !is_word_byte(bytes.get(s - 1).copied().unwrap_or(b' '));
        let ok_after = !is_word_byte(bytes.get(e).copied().unwrap_or(b' '));
        if ok_before && ok_after {
            return true;
        }
        from = e;
    }
    false
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}
