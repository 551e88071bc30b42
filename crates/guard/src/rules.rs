//! The rule catalog: every rule is data (id, category, severity, title, description, remediation
//! and a detector). `Scanner::new` compiles the catalog once.
//!
//! A regex detector names the lowercase literal keywords of which at least one occurs in every
//! match; the scanner finds all keywords of all rules in one Aho-Corasick pass and runs a rule's
//! regex only on the lines (or texts) where one of its keywords occurred. A `Native` detector is
//! a hand-written check in `checks.rs` that reports under the rule's id.

use crate::filters;
use crate::model::{Category, Severity};

/// Where a regex detector runs once its keyword prefilter fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only the line that contains the keyword.
    Line,
    /// The whole text (for patterns that span lines).
    Text,
}

/// What a filter decided about one regex match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Keep,
    Drop,
    /// Keep, with another severity.
    Adjust(Severity),
}

/// What a filter may look at.
pub struct MatchCtx<'a> {
    /// The whole scanned text.
    pub text: &'a str,
    /// The path of the scanned file, if any.
    pub path: Option<&'a str>,
    /// Byte offsets of the line that contains the start of the match.
    pub line_start: usize,
    pub line_end: usize,
    /// The match and its capture groups.
    pub caps: &'a regex::Captures<'a>,
}

impl<'a> MatchCtx<'a> {
    /// The whole match.
    pub fn matched(&self) -> &'a str {
        self.caps.get(0).map_or("", |m| m.as_str())
    }
    /// Byte offset of the start of the match.
    pub fn start(&self) -> usize {
        self.caps.get(0).map_or(0, |m| m.start())
    }
    /// Byte offset of the end of the match.
    pub fn end(&self) -> usize {
        self.caps.get(0).map_or(0, |m| m.end())
    }
    /// The line that contains the start of the match.
    pub fn line(&self) -> &'a str {
        self.text.get(self.line_start..self.line_end).unwrap_or("")
    }
    /// The part of the match's line before the match.
    pub fn before(&self) -> &'a str {
        self.text.get(self.line_start..self.start()).unwrap_or("")
    }
    /// The part of the match's line after the match.
    pub fn after(&self) -> &'a str {
        self.text.get(self.end()..self.line_end).unwrap_or("")
    }
    /// Capture group 1 when it matched, else the whole match.
    pub fn value(&self) -> &'a str {
        self.caps
            .get(1)
            .map_or_else(|| self.matched(), |m| m.as_str())
    }
}

/// A filter run on every regex match of a rule.
pub type Filter = fn(&MatchCtx<'_>) -> Outcome;

/// A regex detector.
#[derive(Clone, Copy)]
pub struct RegexDetector {
    pub scope: Scope,
    pub keywords: &'static [&'static str],
    pub pattern: &'static str,
    pub filter: Option<Filter>,
    /// The match (group 1 when present) is a secret: redact it in the excerpt.
    pub secret: bool,
}

/// How a rule detects.
#[derive(Clone, Copy)]
pub enum Detector {
    Regex(RegexDetector),
    /// A hand-written check in `checks.rs`.
    Native,
}

/// One rule of the catalog.
#[derive(Clone, Copy)]
pub struct RuleDef {
    pub id: &'static str,
    pub category: Category,
    pub severity: Severity,
    pub title: &'static str,
    pub description: &'static str,
    pub remediation: &'static str,
    pub detector: Detector,
}

const fn detector(
    scope: Scope,
    keywords: &'static [&'static str],
    pattern: &'static str,
    filter: Option<Filter>,
    secret: bool,
) -> Detector {
    Detector::Regex(RegexDetector {
        scope,
        keywords,
        pattern,
        filter,
        secret,
    })
}

impl Detector {
    /// The same detector with a filter that decides on each match.
    const fn filtered(self, filter: Filter) -> Detector {
        match self {
            Detector::Regex(mut d) => {
                d.filter = Some(filter);
                Detector::Regex(d)
            }
            Detector::Native => Detector::Native,
        }
    }

    /// The same detector for a secret: the match (group 1 when present) is redacted in the
    /// excerpt.
    const fn secret(self) -> Detector {
        match self {
            Detector::Regex(mut d) => {
                d.secret = true;
                Detector::Regex(d)
            }
            Detector::Native => Detector::Native,
        }
    }
}

/// A Run key is an autorun where it is written, as the capability inventory reads it: on its
/// own line (`Set-ItemProperty`, `reg add`, …), or by a registry write elsewhere in the file whose
/// target is not known to be another key (`New-ItemProperty -Path $k` after `$k = '…\Run'`). A
/// key only named (listed, read with `Get-ItemProperty`, `reg query`) in a file whose every
/// registry write names another key is low, not hidden. Scheduled tasks and the Startup folder
/// keep their severity.
fn run_key_written(ctx: &MatchCtx<'_>) -> Outcome {
    if !ctx
        .matched()
        .to_ascii_lowercase()
        .contains("currentversion")
    {
        return Outcome::Keep;
    }
    let writes = |l: &str| {
        crate::capabilities::REGISTRY_WRITES
            .iter()
            .any(|w| l.contains(w))
    };
    if writes(&ctx.line().to_ascii_lowercase()) {
        return Outcome::Keep;
    }
    let text = ctx.text.to_ascii_lowercase();
    let lines: Vec<&str> = text.lines().collect();
    // A literal registry path that is not a Run key.
    let other_key = |l: &str| {
        (l.contains("hkcu") || l.contains("hklm") || l.contains("hkey_") || l.contains("hku:"))
            && !l.contains("currentversion\\run")
    };
    // The variables and splats a write uses (`$k`, `@params`), without the automatic ones.
    let used = |l: &str| -> Vec<String> {
        let mut out = Vec::new();
        for (i, _) in l.match_indices(['$', '@']) {
            let name: String = l
                .get(i + 1..)
                .unwrap_or("")
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let automatic = matches!(
                name.as_str(),
                "" | "env" | "true" | "false" | "null" | "_" | "psscriptroot" | "pwd"
            );
            if !automatic && !out.contains(&name) {
                out.push(name);
            }
        }
        out
    };
    let assigned_other_key = |v: &str| {
        lines.iter().any(|a| {
            a.trim_start()
                .strip_prefix('$')
                .and_then(|r| r.strip_prefix(v))
                .is_some_and(|r| r.trim_start().starts_with('=') && other_key(r))
        })
    };
    let accounted = |l: &str| {
        if other_key(l) {
            return true;
        }
        let vars = used(l);
        !vars.is_empty() && vars.iter().all(|v| assigned_other_key(v))
    };
    if lines
        .iter()
        .filter(|l| writes(l))
        .take(64)
        .all(|l| accounted(l))
    {
        Outcome::Adjust(Severity::Low)
    } else {
        Outcome::Keep
    }
}

const fn line(keywords: &'static [&'static str], pattern: &'static str) -> Detector {
    detector(Scope::Line, keywords, pattern, None, false)
}

const fn text_f(
    keywords: &'static [&'static str],
    pattern: &'static str,
    filter: Option<Filter>,
) -> Detector {
    detector(Scope::Text, keywords, pattern, filter, false)
}

use Category as C;
use Severity as S;

const NO_REMEDY_HIDDEN: &str = "Remove the character(s); legitimate skill text never needs them.";
const REMEDY_SECRET: &str =
    "Remove the secret from the content, rotate it, and read it from the environment instead.";

/// The rule catalog as the Markdown table that ends `docs/guard.md` (printed by
/// `cargo run -p gc-guard --example rules_table`; a test keeps the document in step).
pub fn markdown_table() -> String {
    use std::fmt::Write;
    let mut out =
        String::from("| id | severity | category | what it catches |\n|---|---|---|---|\n");
    for r in RULES {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            r.id,
            r.severity,
            r.category.as_str(),
            r.description.replace('|', "\\|")
        );
    }
    out
}

/// How many rules and categories the catalog has, as `docs/guard.md` says it ("125 rules in 19
/// categories").
pub fn catalog_summary() -> String {
    let mut categories: Vec<&str> = RULES.iter().map(|r| r.category.as_str()).collect();
    categories.sort_unstable();
    categories.dedup();
    format!("{} rules in {} categories", RULES.len(), categories.len())
}

/// The catalog. Ids are stable: they appear in findings, SARIF and docs.
pub static RULES: &[RuleDef] = &[
    // ---------------------------------------------------------------- prompt injection
    RuleDef {
        id: "pi.ignore-instructions",
        category: C::PromptInjection,
        severity: S::High,
        title: "Instruction override",
        description: "Tells the model to ignore, disregard or forget its previous or system instructions.",
        remediation: "Remove the override; a skill must add instructions, never cancel the host's.",
        detector: line(&["ignore", "disregard", "forget", "override", "bypass", "skip", "neglect", "overlook", "discard", "abandon", "dismiss", "erase", "cancel", "set aside", "throw out", "no attention", "follow"], r"(?i)\b(?:ignore|disregard|forget|override|bypass|skip|neglect|overlook|discard|abandon|dismiss|drop|erase|cancel|set\s+aside|throw\s+out|pay\s+no\s+attention\s+to|stop\s+following|do\s+not\s+follow|don'?t\s+follow|no\s+longer\s+follow|cease\s+following)\s+(?:(?:the|your|all|any|of|every|my|these|those|its|each|whatever|previously|given|that|this|you|were|in)\s+){0,4}(?:previous|prior|above|earlier|preceding|original|system|safety|initial|former|old|existing|foregoing|developer'?s?|reviewer'?s?|admin(?:istrator)?'?s?|operator'?s?|all|any|your|those|these|default|built-in|current)\s+(?:[\w'-]+\s+){0,2}?(?:instructions?|prompts?|rules|guidelines|directives|guardrails|programming|context|commands|orders|constraints|restrictions|polic(?:y|ies)|guidance|training|conditioning|configuration|filters|limitations|boundaries|principles|protocols?|directions|tasks?)\b|\b(?:ignore|disregard|forget)\s+(?:everything|all(?:\s+of\s+that)?|what)\s+(?:above|before|previously|prior|said|(?:that\s+)?(?:came|comes)\s+before|you\s+(?:were|have\s+been)\s+(?:told|given|instructed))\b").filtered(filters::injection_intent),
    },
    RuleDef {
        id: "pi.role-override",
        category: C::PromptInjection,
        severity: S::High,
        title: "Role or mode override",
        description: "Declares a jailbreak persona or mode (\"you are now in developer mode\", \"SYSTEM OVERRIDE\", DAN).",
        remediation: "Remove the persona switch.",
        detector: line(&["you are now", "developer mode", "dan mode", "god mode", "jailbreak mode", "unrestricted mode", "unfiltered mode", "uncensored mode", "evil mode", "sudo mode", "system override", "do anything now", "jailbroken", "from now on", "henceforth", "starting now", "rest of this conversation", "rest of the conversation", "act as", "act like", "pretend", "roleplay", "role-play", "role play", "behave as", "respond as", "no longer bound", "not bound", "freed from", "liberated", "released from", "no longer restricted", "not restricted", "no longer an ai", "no longer limited"], r"(?i)\byou\s+are\s+now\s+(?:in\s+)?(?:an?\s+)?(?:unrestricted|unfiltered|uncensored|jailbroken|developer|dan|god|evil|admin|root|unlimited)\b|\b(?:developer|dan|god|jailbreak|unrestricted|unfiltered|uncensored|evil|sudo)\s+mode\s+(?:is\s+)?(?:enabled|activated|on)\b|\b(?:enable|enter|activate|switch\s+(?:to|into)|turn\s+on)\s+(?:the\s+)?(?:dan|god|jailbreak|unrestricted|unfiltered|uncensored|evil|sudo)\s+mode\b|\bsystem\s+override\b|\bdo\s+anything\s+now\b|\bjailbroken\b|\b(?:from\s+now\s+on|henceforth|starting\s+now|for\s+the\s+rest\s+of\s+(?:this|the)\s+conversation)\b[^.\n]{0,80}\b(?:unrestricted|unfiltered|uncensored|jailbroken|amoral|without\s+(?:any\s+)?(?:restrictions|limits|limitations|filters|rules|ethics|guidelines|censorship|morals)|no\s+(?:restrictions|limits|limitations|filters|rules|ethics|guidelines|morals|censorship)|not\s+bound|ignore\s+(?:all|any|your))\b|\b(?:act|pretend|roleplay|role-?\s?play|behave|respond)\s+(?:as|like|to\s+be)\s+(?:if\s+you\s+(?:are|were)\s+)?[^.\n]{0,60}?\b(?:without\s+(?:any\s+)?(?:restrictions|limits|limitations|filters|rules|ethics|guidelines|censorship|morals)|with\s+no\s+(?:restrictions|limits|limitations|filters|rules|ethics|guidelines|morals)|unrestricted|unfiltered|uncensored|jailbroken|amoral|(?:that|who)\s+can\s+do\s+anything)\b|\byou\s+are\s+(?:no\s+longer|not)\s+(?:bound|restricted|limited|constrained|governed)\s+by\b|\byou\s+(?:are|have\s+been)\s+(?:now\s+)?(?:freed|liberated|released)\s+from\b|\byou\s+are\s+no\s+longer\s+an?\s+(?:ai|assistant|language\s+model)\b").filtered(filters::persona),
    },
    RuleDef {
        id: "pi.new-instructions",
        category: C::PromptInjection,
        severity: S::Medium,
        title: "Replacement instructions",
        description: "Announces new system instructions or a new role for the model.",
        remediation: "State what the skill does; do not redefine the assistant.",
        detector: line(&["new instructions", "new task", "new role", "new system", "new goal", "new objective", "real instructions", "real task", "true instructions", "actual instructions", "real goal", "real purpose", "true purpose", "updated system", "revised system", "real system", "actual system", "true system", "override system", "system prompt", "system message", "system instruction", "system:", "admin:", "administrator:", "developer:", "message from", "instructions from", "note from", "directive from", "update from", "the above", "the previous", "end of system", "begin system", "begin new", "start new"], r"(?im)\byour\s+(?:new|real|true|actual|updated)\s+(?:instructions|task|role|goal|objective|purpose|directive)\s+(?:is|are)\b|\b(?:new|updated|revised|real|actual|true|override)\s+system\s+(?:prompt|instructions?|message)\s*(?::|follows|is|are|below)|\b(?:begin|start)\s+(?:new\s+)?(?:system\s+)?instructions\b|\bsystem\s+(?:prompt|message|instructions?)\s+(?:update|override|change|patch)\s*:|^\s*(?:#+\s*)?[\[(<]?(?:system|admin|administrator|developer)[\])>]?\s*:\s*(?:you\s+(?:must|will|are|should)|ignore|from\s+now|new\s+|your\s+|disregard|forget|override)|\b(?:message|instructions?|note|directive|update)\s+from\s+(?:the\s+)?(?:system|developers?|administrator|admin|anthropic|openai|your\s+(?:creators?|developers?|operators?))\s*:|\bthe\s+(?:above|previous|prior|earlier)\s+(?:instructions|prompt|rules|system\s+prompt)\s+(?:was|were|is|are)\s+(?:fake|a\s+test|wrong|outdated|obsolete|void|cancell?ed|revoked|no\s+longer\s+valid)\b|\bend\s+of\s+(?:the\s+)?system\s+(?:prompt|instructions|message)\b|\bbegin\s+system\s+(?:prompt|instructions|message)\b").filtered(filters::not_quoted_or_negated),
    },
    RuleDef {
        id: "pi.system-prompt-extraction",
        category: C::PromptInjection,
        severity: S::Medium,
        title: "System prompt extraction",
        description: "Asks the model to reveal, print or repeat its system prompt or hidden instructions.",
        remediation: "Remove the request.",
        detector: line(&["system prompt", "system message", "system instructions", "initial instructions", "initial prompt", "hidden instructions", "hidden prompt", "developer message", "developer prompt", "original prompt", "original instructions", "secret prompt", "secret instructions"], r"(?i)\b(?:reveal|print|output|repeat|show|leak|dump|disclose|display|tell\s+me|recite|share|reproduce|write\s+out|copy|paste|send|give\s+me|provide)\b[^.\n]{0,30}?\b(?:your|the|its|all|full|entire|complete|exact|verbatim)\s+(?:\w+\s+){0,2}?(?:system\s+(?:prompt|message|instructions)|initial\s+(?:instructions|prompt)|hidden\s+(?:instructions|prompt)|developer\s+(?:message|prompt)|(?:original|initial|secret)\s+(?:prompt|instructions))\b|\bwhat\s+(?:is|are|was|were)\s+your\s+(?:system\s+prompt|(?:initial|original|hidden|secret)\s+(?:instructions|prompt))|\byour\s+(?:system\s+prompt|(?:initial|original|hidden|secret)\s+(?:instructions|prompt))\b[^.\n]{0,30}\b(?:reveal|print|output|repeat|leak|dump|disclose|recite|share)\b").filtered(filters::not_quoted_or_negated),
    },
    RuleDef {
        id: "pi.chat-template-tokens",
        category: C::PromptInjection,
        severity: S::High,
        title: "Chat-template delimiters",
        description: "Contains model chat-template control tokens (<|im_start|>, [INST], <<SYS>> ...) that forge conversation turns.",
        remediation: "Remove the control tokens.",
        detector: line(
            &["<|", "[inst]", "[/inst]", "<<sys>>", "<</sys>>"],
            r"(?i)<\|(?:im_start|im_end|system|user|assistant|start_header_id|end_header_id|eot_id|endoftext)\|>|\[/?INST\]|<</?SYS>>",
        ),
    },
    RuleDef {
        id: "pi.policy-bypass",
        category: C::PromptInjection,
        severity: S::High,
        title: "Safety policy bypass",
        description: "Tells the model to bypass its content policy, ethics or safety guidelines, or claims it has no restrictions.",
        remediation: "Remove the bypass.",
        detector: line(&["polic", "guideline", "guardrail", "restrictions", "limitations", "filters", "regardless"], r"(?i)\b(?:disregard|ignore|bypass|circumvent|violate|override|skip|evade)\b[^.\n]{0,30}\b(?:content\s+polic(?:y|ies)|ethical\s+guidelines|ethics|safety\s+(?:guidelines|policies|filters|measures|restrictions)|guardrails|usage\s+polic(?:y|ies))|\byou\s+(?:have|has)\s+no\s+(?:restrictions|limits|limitations|rules|filters|guidelines)\b|\bregardless\s+of\s+(?:any\s+)?(?:restrictions|safety|ethics|rules|content\s+polic)").filtered(filters::not_quoted_or_negated),
    },
    RuleDef {
        id: "pi.forced-execution",
        category: C::PromptInjection,
        severity: S::Medium,
        title: "Execution without confirmation",
        description: "Tells the agent to execute code or commands without verification, confirmation or the user's approval.",
        remediation: "Let the host's confirmation flow run; never instruct the agent to skip it.",
        detector: line(&["without"], r"(?i)\b(?:execute|run|perform|install)\b[^.\n]{0,50}\bwithout\s+(?:any\s+)?(?:verification|verifying|confirmation|confirming|asking|approval|review(?:ing)?|checking|the\s+user'?s?\s+(?:consent|approval|confirmation|knowledge)|user\s+(?:consent|approval|confirmation)|permission)\b").filtered(filters::not_quoted_or_negated),
    },
    RuleDef {
        id: "pi.credential-echo",
        category: C::PromptInjection,
        severity: S::High,
        title: "Credential disclosure request",
        description: "Asks the model to echo or send a credential (authorization header, token, API key, password) in its reply.",
        remediation: "Remove the request; credentials must never appear in model output.",
        detector: line(&["authorization", "token", "api key", "api_key", "apikey", "password", "credential", "secret", "private key", "cookie"], r"(?i)\b(?:echo|print|repeat|reveal|include|output|send|paste|show|tell|share|leak|disclose|return)\b[^.\n]{0,30}\b(?:value\s+of\s+)?(?:the\s+|your\s+|my\s+)?(?:authorization\s+header|bearer\s+token|access\s+token|api[\s_-]?keys?|session\s+(?:token|cookie)|passwords?|credentials|secrets?|private\s+keys?)\b[^.\n]{0,40}\b(?:in\s+(?:your|the)\s+(?:next\s+)?(?:response|reply|answer|output|message)|to\s+(?:me|us)\b)").filtered(filters::not_quoted_or_negated),
    },
    RuleDef {
        id: "pi.hidden-comment",
        category: C::PromptInjection,
        severity: S::High,
        title: "Instructions hidden in a comment",
        description: "An HTML/Markdown comment (invisible when rendered) addresses the model or tells it to act.",
        remediation: "Move instructions into visible text or delete the comment.",
        detector: text_f(&["<!--"], r"(?s)<!--(.*?)-->", Some(filters::hidden_comment)),
    },
    RuleDef {
        id: "pi.decode-and-follow",
        category: C::PromptInjection,
        severity: S::High,
        title: "Decode (or translate) and follow",
        description: "Tells the model to decode, decrypt, reverse, translate or ROT13 a text and then follow, run or obey what comes out: instructions kept out of sight of a human reviewer and of scanners.",
        remediation: "Write instructions in plain text; never ask the agent to act on content it must first decode.",
        detector: line(&["decode", "decipher", "decrypt", "deobfuscate", "unscramble", "translate", "reverse", "rot13", "rot-13", "base64", "backwards"], r"(?i)\b(?:decode|decoding|decipher|decrypt|deobfuscate|unscramble|translate|translating|reverse|reversing|rot-?13|base64-?decode|read\s+(?:it\s+|this\s+)?backwards)\b[^\n]{0,120}?\b(?:follow|obey|execute|run|carry\s+out|comply\s+with|act\s+on|perform|apply)\s+(?:it|them|this|that|these|those|whatever|exactly|the\s+(?:result|output|decoded\s+\w+|hidden\s+\w+|translated\s+\w+|reversed\s+\w+|instructions?|commands?|message|text|steps))\b|\b(?:decode|decipher|decrypt|translate|reverse|rot-?13)\b[^\n]{0,120}?\b(?:do\s+what(?:ever)?\s+it\s+says|treat\s+(?:it|them|the\s+result)\s+as\s+(?:your\s+)?(?:new\s+)?(?:instructions?|prompt|orders))|\b(?:follow|obey|execute|run)\s+the\s+(?:decoded|encoded|hidden|reversed|deciphered|decrypted)\s+(?:instructions?|text|payload|commands?|message|steps)\b").filtered(filters::decode_and_follow),
    },
    RuleDef {
        id: "pi.hidden-html",
        category: C::PromptInjection,
        severity: S::High,
        title: "Instructions in a hidden HTML element",
        description: "An HTML element hidden from the reader (display:none, visibility:hidden, zero font size or opacity, white text, placed off-screen or clipped, the hidden attribute) holds instructions for the model: the agent reads what the person reviewing the rendered page does not see.",
        remediation: "Remove the hidden element; everything the agent reads must be visible to the person who installs the skill.",
        detector: text_f(
            &["display:none", "display: none", "visibility:hidden", "visibility: hidden", "font-size:0", "font-size: 0", "opacity:0", "opacity: 0", "aria-hidden", "<div hidden", "<span hidden", "<p hidden", "color:white", "color: white", "color:#fff", "color: #fff", "color:transparent", "color: transparent", "left:-", "left: -", "top:-", "top: -", "text-indent:-", "text-indent: -", "clip:rect", "clip: rect"],
            r#"(?is)<[a-z][\w-]*\b[^>]{0,300}?(?:style\s*=\s*["'][^"'>]{0,200}?(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?:px|em|pt)?\s*(?:;|["'])|opacity\s*:\s*0(?:\.0+)?\s*(?:;|["'])|color\s*:\s*(?:white|#fff(?:fff)?|transparent)\s*(?:;|["'])|(?:left|top|text-indent)\s*:\s*-\d{3,}(?:px|em|rem)?\s*(?:;|["'])|clip\s*:\s*rect\(\s*0)|\shidden\b|aria-hidden\s*=\s*["']true)[^>]{0,300}?>([^<]{12,})<"#,
            Some(filters::hidden_html),
        ),
    },
    RuleDef {
        id: "pi.scanner-evasion",
        category: C::PromptInjection,
        severity: S::High,
        title: "Instructions to the reviewer or scanner",
        description: "Tells an automated reviewer, scanner or the model to classify the skill as safe, not to flag or report its code, or claims a prior approval.",
        remediation: "Remove it; a skill must not address the tools that review it.",
        detector: line(&["as safe", "as benign", "as clean", "as harmless", "as trusted", "as verified", "as low risk", "as low-risk", "as non-malicious", "as nonmalicious", "not flag", "n't flag", "nt flag", "never flag", "not report", "n't report", "nt report", "never report", "not mention", "n't mention", "nt mention", "never mention", "not warn", "n't warn", "nt warn", "never warn", "not raise", "n't raise", "nt raise", "never raise", "report no ", "report zero ", "approved by", "verified by", "listed by", "audited by", "certified by", "cleared by", "as safe by"], r"(?i)\b(?:mark|classify|rate|report|label|treat|consider|score|judge|assess|evaluate)\s+(?:this|it|the)(?:\s+(?:skill|file|code|package|tool|script|repository|content))?\s+as\s+(?:safe|benign|clean|harmless|trusted|verified|low[\s-]risk|non-?malicious)\b|\b(?:do\s+not|don'?t|never)\s+(?:flag|report|mention|warn\s+(?:about|of)|raise\s+(?:alerts?|findings?|issues?)\s+(?:for|about))\s+(?:this|these|the\s+following|any|anything)\s*(?:\w+\s+){0,2}?(?:code|scripts?|commands?|files?|skill|lines?|section|behaviou?r|functions?|calls?|network\s+(?:calls?|requests?|activity)|malicious|suspicious|dangerous|security|findings?|vulnerabilit\w*)\b|\b(?:this|the)\s+(?:skill|code|tool|package|file|script)\s+(?:has\s+(?:already\s+)?been|was|is)\s+(?:already\s+)?(?:pre-?approved|verified|whitelisted|allow-?listed|audited|certified|cleared)\s+(?:as\s+safe\s+)?by\b|\breport\s+(?:no|zero)\s+(?:issues|findings|vulnerabilities|problems|risks)\b").filtered(filters::not_quoted),
    },
    // ---------------------------------------------------------------- concealment
    RuleDef {
        id: "conceal.hide-from-user",
        category: C::Concealment,
        severity: S::High,
        title: "Concealment from the user",
        description: "Tells the model to hide an action or instruction from the user (\"do not tell the user\", \"keep this hidden\").",
        remediation: "A skill must not hide anything from the user it acts for.",
        detector: line(
            &["do not", "don't", "dont", "never", "without", "keep this", "keep these", "keep it", "keep that", "hide this", "hide these", "hide it", "secretly"],
            r"(?i)\b(?:do\s+not|don'?t|never|without)\s+(?:ever\s+)?(?:tell(?:ing)?|inform(?:ing)?|mention(?:ing)?|reveal(?:ing)?|disclos(?:e|ing)|notify(?:ing)?|alert(?:ing)?|let(?:ting)?|report(?:ing)?)\s+(?:\S+\s+){0,6}?(?:the\s+|your\s+)?users?\b|\bkeep\s+(?:this|these|it|that)\s+(?:\w+\s+){0,2}(?:hidden|secret|confidential)\s+from\b|\bkeep\s+(?:this|these)\s+(?:behaviou?r|instructions?|steps?|actions?|requests?)\s+(?:hidden|secret)\b|\bhide\s+(?:this|these|it)\s+from\s+the\s+users?\b|\bsecretly\s+(?:send|upload|read|collect|copy|execute|run)\b",
        ),
    },
    // ---------------------------------------------------------------- tool poisoning
    RuleDef {
        id: "tool.important-block",
        category: C::ToolPoisoning,
        severity: S::High,
        title: "Hidden-priority tag block",
        description: "An <IMPORTANT>, <SYSTEM> or similar pseudo-tag block, the shape of tool-poisoning payloads.",
        remediation: "Remove the tag block; describe the tool plainly.",
        detector: line(
            &["<important>", "<system>", "<instructions>", "<instruction>", "<secret>", "<hidden>", "<admin>"],
            r"(?i)<(?:important|system|instructions?|secret|hidden|admin)>",
        )
        .filtered(filters::tag_not_placeholder),
    },
    RuleDef {
        id: "tool.shadowing",
        category: C::ToolPoisoning,
        severity: S::High,
        title: "Tool shadowing",
        description: "A description changes how another tool behaves or what it should always do.",
        remediation: "A tool may describe only itself.",
        detector: line(
            &[" tool", "\ttool"],
            r"(?i)\b(?:changes?|modif(?:y|ies)|overrides?|alters?|intercepts?|hijacks?|redefines?)\s+(?:how\s+|the\s+behaviou?r\s+of\s+)(?:the\s+)?[`'\x22]?[\w.-]+[`'\x22]?\s+tool\b|\bwhen(?:ever)?\s+(?:using|calling|you\s+(?:use|call))\s+(?:the\s+)?[`'\x22]?[\w.-]+[`'\x22]?\s+tool,?\s+(?:always|you\s+must|instead)\b",
        ),
    },
    RuleDef {
        id: "tool.sensitive-file-instruction",
        category: C::ToolPoisoning,
        severity: S::Medium,
        title: "Instruction to read private configuration",
        description: "Tells the agent to read, send or pass the contents of a private configuration or key directory.",
        remediation: "A skill should not need the user's private configuration.",
        detector: line(&["~/.", "$home", "%userprofile%", "/home/", "/users/"], r"(?i)\b(?:read|cat|open|load|include|attach|send|upload|pass|copy|collect|grab)\b[^\n]{0,40}(?:~|\$HOME|\$\{HOME\}|%USERPROFILE%|/home/[\w.-]+|/Users/[\w.-]+)[/\\]\.(?:config|ssh|aws|gnupg|kube|docker|netrc|npmrc|pypirc|git-credentials|env\b|azure|gcloud|password-store|mozilla|local/share/keyrings)").filtered(filters::private_file_instruction),
    },
    RuleDef {
        id: "tool.runaway-invocation",
        category: C::ToolPoisoning,
        severity: S::Medium,
        title: "Unbounded tool invocation",
        description: "Tells the agent to retry or call a tool indefinitely.",
        remediation: "Bound retries.",
        detector: line(
            &["indefinitely", "forever", "infinitely", "endlessly", "without stopping", "without limit", "without end"],
            r"(?i)\b(?:retry|repeat|call|invoke|re-?run|loop)\b[^.\n]{0,30}\b(?:tool|function|request|call|api)\b[^.\n]{0,30}\b(?:indefinitely|forever|infinitely|endlessly|without\s+(?:stopping|limit|end))\b",
        ),
    },
    // ---------------------------------------------------------------- hidden text (native)
    RuleDef {
        id: "unicode.tag-characters",
        category: C::HiddenText,
        severity: S::Critical,
        title: "Unicode tag characters",
        description: "Characters of the Unicode tag block (U+E0000..U+E007F) encode invisible ASCII text (ASCII smuggling).",
        remediation: NO_REMEDY_HIDDEN,
        detector: Detector::Native,
    },
    RuleDef {
        id: "unicode.bidi-control",
        category: C::HiddenText,
        severity: S::High,
        title: "Bidirectional control characters",
        description: "Bidi embedding, override or isolate controls (U+202A..U+202E, U+2066..U+2069) reorder text so that what is shown differs from what is read (Trojan Source).",
        remediation: NO_REMEDY_HIDDEN,
        detector: Detector::Native,
    },
    RuleDef {
        id: "unicode.zero-width",
        category: C::HiddenText,
        severity: S::Medium,
        title: "Invisible characters inside text",
        description: "Zero-width or invisible format characters (U+200B..U+200D, U+2060..U+2064, U+FEFF, fillers) inside or next to ASCII words; they split keywords to evade filters.",
        remediation: NO_REMEDY_HIDDEN,
        detector: Detector::Native,
    },
    RuleDef {
        id: "unicode.variation-selectors",
        category: C::HiddenText,
        severity: S::High,
        title: "Variation-selector payload",
        description: "A run of variation selectors (or supplementary selectors outside CJK ideographs) that can carry hidden bytes.",
        remediation: NO_REMEDY_HIDDEN,
        detector: Detector::Native,
    },
    RuleDef {
        id: "unicode.homoglyph",
        category: C::Homoglyph,
        severity: S::Medium,
        title: "Mixed-script look-alike word",
        description: "A word mixes Latin with look-alike letters of another script (TR39 confusables), e.g. a Cyrillic 'і' in github.com or 'с' in curl.",
        remediation: "Use plain ASCII for commands, hosts and identifiers.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "url.punycode-host",
        category: C::Homoglyph,
        severity: S::Medium,
        title: "Punycode host name",
        description: "A URL whose host is an internationalised (xn--) name, often a look-alike of a known domain.",
        remediation: "Use the canonical ASCII domain.",
        detector: line(&["xn--"], r"(?i)\b(?:https?|ftp)://[^\s/?#]*\bxn--[a-z0-9-]+"),
    },
    // ---------------------------------------------------------------- secrets
    RuleDef {
        id: "secret.aws-access-key",
        category: C::Secret,
        severity: S::High,
        title: "AWS access key id",
        description: "An AWS access key id (AKIA/ASIA...).",
        remediation: REMEDY_SECRET,
        detector: line(&["akia", "asia", "abia", "acca"], r"\b((?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16})\b").filtered(filters::secret_token).secret(),
    },
    RuleDef {
        id: "secret.aws-secret-key",
        category: C::Secret,
        severity: S::High,
        title: "AWS secret access key",
        description: "An AWS secret access key assigned to an aws_secret_access_key-like name.",
        remediation: REMEDY_SECRET,
        detector: line(&["aws_secret", "awssecret", "aws-secret", "secret_access_key", "secretaccesskey"], r#"(?i)aws[_-]?secret[_-]?(?:access[_-]?)?key["']?\s*(?::|=|:=|=>)\s*["']?([A-Za-z0-9/+=]{40})(?:[^A-Za-z0-9/+=]|$)"#).filtered(filters::secret_generic).secret(),
    },
    RuleDef {
        id: "secret.github-token",
        category: C::Secret,
        severity: S::High,
        title: "GitHub token",
        description: "A GitHub personal access, OAuth, app or refresh token (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_).",
        remediation: REMEDY_SECRET,
        detector: line(&["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"], r"\b(gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{50,255})\b").filtered(filters::secret_token).secret(),
    },
    RuleDef {
        id: "secret.openai-key",
        category: C::Secret,
        severity: S::High,
        title: "OpenAI API key",
        description: "An OpenAI API key (sk-, sk-proj-, sk-svcacct-).",
        remediation: REMEDY_SECRET,
        detector: line(&["sk-"], r"\b(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,})\b").filtered(filters::secret_openai).secret(),
    },
    RuleDef {
        id: "secret.anthropic-key",
        category: C::Secret,
        severity: S::High,
        title: "Anthropic API key",
        description: "An Anthropic API key (sk-ant-...).",
        remediation: REMEDY_SECRET,
        detector: line(&["sk-ant-"], r"\b(sk-ant-(?:api|admin|oat)\d{2}-[A-Za-z0-9_-]{32,})").filtered(filters::secret_token).secret(),
    },
    RuleDef {
        id: "secret.slack-token",
        category: C::Secret,
        severity: S::High,
        title: "Slack token",
        description: "A Slack bot, user, app or refresh token (xoxb-, xoxp-, xoxa-, xoxe-, xapp-).",
        remediation: REMEDY_SECRET,
        detector: line(&["xox", "xapp-"], r"\b((?:xox[abposre]|xapp)-[0-9A-Za-z-]{20,})\b").filtered(filters::secret_token).secret(),
    },
    RuleDef {
        id: "secret.slack-webhook",
        category: C::Secret,
        severity: S::High,
        title: "Slack incoming webhook",
        description: "A Slack incoming-webhook, workflow-webhook or trigger URL, which lets anyone post into a channel or start a workflow.",
        remediation: REMEDY_SECRET,
        detector: line(&["hooks.slack.com"], r"https://hooks\.slack\.com/(?:services/(T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{16,})|workflows/(T[A-Z0-9]{6,}/A[A-Z0-9]{6,}/\d{10,}/[A-Za-z0-9]{16,})|triggers/(T[A-Z0-9]{6,}/\d{10,}/[A-Za-z0-9]{16,}))").filtered(filters::secret_token).secret(),
    },
    RuleDef {
        id: "secret.stripe-key",
        category: C::Secret,
        severity: S::High,
        title: "Stripe secret key",
        description: "A Stripe secret or restricted key (sk_live_, rk_live_; test-mode sk_test_/rk_test_ keys are medium).",
        remediation: REMEDY_SECRET,
        detector: line(&["sk_live_", "rk_live_", "sk_test_", "rk_test_"], r"\b((?:sk|rk)_(?:live|test)_[0-9A-Za-z]{20,247})\b").filtered(filters::secret_stripe).secret(),
    },
    RuleDef {
        id: "secret.google-api-key",
        category: C::Secret,
        severity: S::High,
        title: "Google API key",
        description: "A Google API key (AIza...).",
        remediation: REMEDY_SECRET,
        detector: line(&["aiza"], r"\b(AIza[0-9A-Za-z_-]{35})(?:[^0-9A-Za-z_-]|$)").filtered(filters::secret_token).secret(),
    },
    RuleDef {
        id: "secret.huggingface-token",
        category: C::Secret,
        severity: S::High,
        title: "Hugging Face token",
        description: "A Hugging Face user or organisation access token (hf_, api_org_).",
        remediation: REMEDY_SECRET,
        detector: line(&["hf_", "api_org_"], r"\b((?:hf|api_org)_[A-Za-z0-9]{30,40})\b").filtered(filters::secret_token).secret(),
    },
    RuleDef {
        id: "secret.azure-client-secret",
        category: C::Secret,
        severity: S::High,
        title: "Azure AD client secret",
        description: "A Microsoft Entra ID (Azure AD) application client secret (the xxxNQ~ shape).",
        remediation: REMEDY_SECRET,
        detector: line(&["q~"], r"(?:^|[^A-Za-z0-9_~.])([A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34})(?:[^A-Za-z0-9_~.-]|$)").filtered(filters::secret_token).secret(),
    },
    RuleDef {
        id: "secret.azure-storage-key",
        category: C::Secret,
        severity: S::High,
        title: "Azure storage account key",
        description: "An Azure storage connection string with an AccountKey.",
        remediation: REMEDY_SECRET,
        detector: line(&["accountkey="], r"(?i)AccountKey=([A-Za-z0-9+/]{86}==)").filtered(filters::secret_token).secret(),
    },
    RuleDef {
        id: "secret.service-token",
        category: C::Secret,
        severity: S::High,
        title: "Service access token",
        description: "A token with a provider-specific shape: GitLab, npm, PyPI, SendGrid, Shopify, DigitalOcean, Doppler, Databricks, Linear, Postman, Grafana, New Relic, Vault, Terraform Cloud, age, 1Password, Pulumi, Fly.io, Replicate, Groq, Perplexity, xAI, LangSmith, Supabase, Docker Hub, Sentry, Buildkite, PlanetScale, RubyGems, Square, Telegram, Google OAuth, Atlassian, Mapbox, Heroku, Netlify, Figma, Dynatrace, Contentful, Render, Mailchimp, Mailgun, Brevo, JFrog, Typeform, Clojars, Alibaba, Cloudflare origin CA, Pinecone, Stripe webhook signing, Adafruit, Frame.io, ReadMe, Infracost, Flutterwave, EasyPost, Tavily, Firecrawl, Harness, Microsoft Teams and Power Automate webhooks, Zapier catch hooks, 1Password secret keys, Defined Networking, Sourcegraph, OpenShift, Octopus Deploy, Plaid, Scalingo, SettleMint, MaxMind, Intra42, Adobe, Dropbox, Yandex ...",
        remediation: REMEDY_SECRET,
        detector: line(&["glpat-", "glptt-", "gldt-", "glrt-", "gr1348941", "npm_", "pypi-ageichlwas5vcmc", "sg.", "shpat_", "shpss_", "shpca_", "shppa_", "dop_v1_", "doo_v1_", "dor_v1_", "dp.pt.", "dapi", "lin_api_", "pmak-", "glc_", "glsa_", "nrak-", "hvs.", "hvb.", "atlasv1", "age-secret-key-1", "ops_eyj", "pul-", "fo1_", "r8_", "gsk_", "pplx-", "xai-", "lsv2_", "sbp_", "dckr_pat_", "sntrys_", "sntryu_", "bkua_", "pscale_tkn_", "pscale_pw_", "rubygems_", "sq0atp-", "sq0csp-", ":aa", "gocspx-", "ya29.", "atatt3", "sk.eyj", "hrku-", "nfp_", "figd_", "dt0c01.", "cfpat-", "rnd_", "-us", "ntn_", "shippo_live_", "duffel_live_", "pnu_", "glcbt-", "glft-", "glsoat-", "gloas-", "glimt-", "glagent-", "glffct-", "key-", "xkeysib-", "nrjs-", "nrii-", "nraa-", "akcp", "cmvmdgtu", "tfp_", "dp.ct.", "dp.st.", "dp.sa.", "dp.scim.", "dp.audit.", "clojars_", "ltai", "v1.0-", "pcsk_", "whsec_", "aio_", "fio-u-", "rdme_", "ico-", "flwseck", "ezak", "tvly-", "fc-", "pat.", "xoxe.xox", "webhookb2", "logic.azure.com", "hooks.zapier.com", "a3-", "dnkey-", "sgp_", "sha256~", "api-", "access-sandbox-", "access-development-", "access-production-", "tk-us-", "sm_pat_", "sm_aat_", "sm_sat_", "_mmk", "s-s4t2", "duffel_test_", "eztk", "shippo_test_", "p8e-", "sl.", "aqvn"], r"\b((?:glpat-[0-9A-Za-z_-]{20}|glptt-[0-9a-f]{40}|gl(?:dt|rt)-[0-9A-Za-z_-]{20}|GR1348941[0-9A-Za-z_-]{20}|npm_[A-Za-z0-9]{36}|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}|SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}|do[opr]_v1_[a-f0-9]{64}|dp\.pt\.[A-Za-z0-9]{43}|dapi[a-f0-9]{32}(?:-\d)?|lin_api_[A-Za-z0-9]{40}|PMAK-[a-f0-9]{24}-[a-f0-9]{34}|glc_[A-Za-z0-9+/]{32,400}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|NRAK-[A-Z0-9]{27}|hv[sb]\.[A-Za-z0-9_-]{90,200}|[a-z0-9]{14}\.atlasv1\.[a-z0-9_=-]{60,70}|AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}|ops_eyJ[A-Za-z0-9+/=]{250,}|pul-[a-f0-9]{40}|fo1_[A-Za-z0-9_-]{43}|r8_[A-Za-z0-9]{37}|gsk_[A-Za-z0-9]{52}|pplx-[A-Za-z0-9]{48}|xai-[A-Za-z0-9]{80}|lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}|sbp_[a-f0-9]{40}|dckr_pat_[A-Za-z0-9_-]{27}|sntrys_eyJ[A-Za-z0-9+/=_-]{50,}|sntryu_[a-f0-9]{64}|bkua_[a-f0-9]{40}|pscale_(?:tkn|pw)_[A-Za-z0-9_.-]{32,64}|rubygems_[a-f0-9]{48}|sq0(?:atp|csp)-[0-9A-Za-z_-]{22,43}|\d{8,10}:AA[0-9A-Za-z_-]{33}|GOCSPX-[A-Za-z0-9_-]{28}|ya29\.[0-9A-Za-z_-]{30,}|ATATT3[A-Za-z0-9_=-]{186}|sk\.eyJ[A-Za-z0-9_-]{50,}\.[A-Za-z0-9_-]{20,}|HRKU-[A-Za-z0-9_-]{60}|nfp_[A-Za-z0-9]{36}|figd_[A-Za-z0-9_-]{40}|dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}|CFPAT-[A-Za-z0-9_-]{43}|rnd_[A-Za-z0-9]{32}|[0-9a-f]{32}-us\d{1,2}|ntn_\d{11}[A-Za-z0-9]{32,35}|shippo_live_[a-f0-9]{40}|duffel_live_[A-Za-z0-9_=-]{43}|pnu_[A-Za-z0-9]{36}|gl(?:cbt|ft|soat|oas|imt|agent|ffct)-[0-9A-Za-z_-]{20,64}|key-[0-9a-f]{32}|xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}|NRJS-[a-f0-9]{19}|NRII-[A-Za-z0-9-]{32}|NRAA-[a-f0-9]{27}|AKCp[A-Za-z0-9]{69}|cmVmdGtu[A-Za-z0-9]{56}|tfp_[A-Za-z0-9_.=-]{59}|dp\.(?:ct|st|sa|scim|audit)\.[A-Za-z0-9_.-]{40,}|CLOJARS_[a-z0-9]{60}|LTAI[A-Za-z0-9]{20}|v1\.0-[a-f0-9]{24}-[a-f0-9]{146}|pcsk_[A-Za-z0-9]{4,8}_[A-Za-z0-9]{40,}|whsec_[A-Za-z0-9+/=]{32,}|aio_[A-Za-z0-9]{28}|fio-u-[A-Za-z0-9_=-]{64}|rdme_[a-z0-9]{70}|ico-[A-Za-z0-9]{32}|FLWSECK(?:_TEST)?-[a-h0-9]{32}-X|EZAK[A-Za-z0-9]{54}|tvly-(?:dev-)?[A-Za-z0-9]{32}|fc-[a-f0-9]{32}|pat\.[A-Za-z0-9_-]{22}\.[0-9a-f]{24}\.[A-Za-z0-9]{20}|xoxe\.xox[bp]-\d-[A-Za-z0-9]{100,}|glpat-[0-9A-Za-z_-]{27,300}\.[0-9a-z]{9}|https://[a-z0-9-]+\.webhook\.office\.com/webhookb2/[0-9a-f-]{36}@[0-9a-f-]{36}/IncomingWebhook/[0-9a-f]{32}/[0-9a-f-]{36}(?:/[A-Za-z0-9_-]{20,})?|https://[a-z0-9.-]+\.logic\.azure\.com(?::443)?/workflows/[0-9a-f]{32}/triggers/[A-Za-z0-9_]+/paths/invoke\?[A-Za-z0-9_.%&=-]*?sig=[A-Za-z0-9_-]{40,}|hooks\.zapier\.com/hooks/catch/\d{4,12}/[a-z0-9]{5,10}/?|A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}|dnkey-[a-z0-9=_-]{26}-[a-z0-9=_-]{52}|sgp_(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}|sha256~[A-Za-z0-9_-]{43}|API-[A-Z0-9]{26}|access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|tk-us-[A-Za-z0-9_-]{48}|sm_(?:pat|aat|sat)_[A-Za-z0-9]{16}|[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk|s-s4t2(?:ud|af)-[a-f0-9]{64}|duffel_test_[A-Za-z0-9_=-]{43}|EZTK[A-Za-z0-9]{54}|shippo_test_[a-f0-9]{40}|p8e-[A-Za-z0-9]{32}|sl\.(?:u\.)?[A-Za-z0-9_=-]{130,}|AQVN[A-Za-z0-9_-]{35,38}))(?:[^A-Za-z0-9_-]|$)").filtered(filters::secret_token).secret(),
    },
    RuleDef {
        id: "secret.url-password",
        category: C::Secret,
        severity: S::High,
        title: "Password in a URL or a curl command",
        description: "A password written into a URL (scheme://user:password@host) or given to curl -u / --user.",
        remediation: REMEDY_SECRET,
        detector: line(&["://", "curl"], r#"(?i)\b(?:https?|ftps?|sftp|git|ssh|smtps?|imaps?|ldaps?|wss?|svn|nntp|rsync|amqps?|mqtts?)://[^\s:/@'"<>]+:([^\s/@'"<>]{6,})@[\w-]+(?:\.[\w-]+)*|\bcurl\b[^\n]*?\s(?:-u|--user)\s*["']?[^\s:'"]+:([^\s'"]{6,})"#).filtered(filters::secret_password).secret(),
    },
    RuleDef {
        id: "secret.sidekiq",
        category: C::Secret,
        severity: S::High,
        title: "Sidekiq Pro/Enterprise credentials",
        description: "Sidekiq Pro or Enterprise gem-server credentials (BUNDLE_GEMS__CONTRIBSYS__COM or user:password@gems.contribsys.com).",
        remediation: REMEDY_SECRET,
        detector: line(&["contribsys"], r#"(?i)\bBUNDLE_(?:ENTERPRISE|GEMS)__CONTRIBSYS__COM["']?\s*(?::|=|:=|=>)?\s*["']?([a-f0-9]{8}:[a-f0-9]{8})\b|\b(?:https?://)?([a-f0-9]{8}:[a-f0-9]{8})@(?:gems|enterprise)\.contribsys\.com"#).filtered(filters::secret_token).secret(),
    },
    RuleDef {
        id: "secret.private-key",
        category: C::Secret,
        severity: S::Critical,
        title: "Private key block",
        description: "A PEM/OpenSSH/PGP private key with key material (also with JSON-escaped line ends, as in a cloud service-account key file).",
        remediation: REMEDY_SECRET,
        detector: Detector::Regex(RegexDetector {
            scope: Scope::Text,
            keywords: &["private key-----", "private key block-----"],
            pattern: r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY(?: BLOCK)?-----(?:\r?\n(?:[A-Za-z-]+:[^\n]*\r?\n)*\s*|(?:\\r)?\\n)([A-Za-z0-9+/=]{40,})",
            filter: Some(filters::private_key_block),
            secret: true,
        }),
    },
    RuleDef {
        id: "secret.jwt",
        category: C::Secret,
        severity: S::Medium,
        title: "JSON Web Token",
        description: "A signed JWT (three base64url parts); it is a bearer credential until it expires.",
        remediation: REMEDY_SECRET,
        detector: line(&["eyj"], r"\b(eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{16,})").filtered(filters::secret_token).secret(),
    },
    RuleDef {
        id: "secret.generic-assignment",
        category: C::Secret,
        severity: S::Medium,
        title: "Hard-coded credential",
        description: "A high-entropy literal assigned to a password/secret/token/API-key name (placeholders and references are ignored).",
        remediation: REMEDY_SECRET,
        detector: line(&["password", "passwd", "secret", "token", "api_key", "apikey", "api-key", "access_key", "accesskey", "auth_key", "private_key"], r#"(?i)\b[\w.-]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|auth[_-]?key|private[_-]?key)[\w.-]*["']?\s*(?::|=|:=|=>)\s*["']([^"'\s]{10,})["']"#).filtered(filters::secret_generic).secret(),
    },
    RuleDef {
        id: "secret.auth-header",
        category: C::Secret,
        severity: S::High,
        title: "Credential written into an HTTP header",
        description: "A literal credential in an Authorization header (Bearer, Basic, token, Bot, SSWS ...) or an API-key header (X-API-Key, PRIVATE-TOKEN, X-Auth-Token ...), in curl -H, code or configuration; a variable, a command substitution or a placeholder is not reported.",
        remediation: REMEDY_SECRET,
        detector: line(&["authorization", "api-key", "apikey", "private-token", "auth-token", "access-token", "x-jfrog-art-api", "x-vault-token", "x-figma-token"], r#"(?i)\b(?:(?:proxy-)?authorization["']?\s*[:=]\s*["']?\s*(?:bearer|basic|token|bot|ssws|apikey|api-key|key|genie-?key)\s+|(?:x-api-key|x-apikey|api-key|apikey|x-auth-token|x-access-token|private-token|x-jfrog-art-api|x-vault-token|x-figma-token)["']?\s*:\s*["']?\s*)([A-Za-z0-9._~+/=-]{16,})"#).filtered(filters::secret_auth_header).secret(),
    },
    RuleDef {
        id: "secret.discord-bot-token",
        category: C::Secret,
        severity: S::High,
        title: "Discord bot token",
        description: "A Discord bot token (user id in base64, a timestamp and an HMAC, dot-separated) in a file that names Discord.",
        remediation: REMEDY_SECRET,
        detector: Detector::Regex(RegexDetector {
            scope: Scope::Text,
            keywords: &["discord"],
            pattern: r"(?:^|[^A-Za-z0-9_.-])([MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40})(?:[^A-Za-z0-9_.-]|$)",
            filter: Some(filters::secret_token),
            secret: true,
        }),
    },
    RuleDef {
        id: "secret.twilio-key",
        category: C::Secret,
        severity: S::High,
        title: "Twilio API key or auth token",
        description: "A Twilio API key (SK and 32 hex digits) or an auth token given next to an account SID, in a file that names Twilio.",
        remediation: REMEDY_SECRET,
        detector: Detector::Regex(RegexDetector {
            scope: Scope::Text,
            keywords: &["twilio"],
            pattern: r#"\b(SK[0-9a-fA-F]{32})\b|\bAC[0-9a-f]{32}["']\s*,\s*["']([0-9a-f]{32})["']"#,
            filter: Some(filters::secret_token),
            secret: true,
        }),
    },
    RuleDef {
        id: "secret.connection-string",
        category: C::Secret,
        severity: S::High,
        title: "Credentials in a connection string",
        description: "A database or broker URL with an embedded password.",
        remediation: REMEDY_SECRET,
        detector: line(&["postgres", "mysql", "mongodb", "redis", "amqp"], r"(?i)\b(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?)://[^\s:/@]+:([^\s@/]{8,})@").filtered(filters::secret_generic).secret(),
    },
    // ---------------------------------------------------------------- fetch and execute
    RuleDef {
        id: "exec.pipe-to-shell",
        category: C::FetchExecute,
        severity: S::High,
        title: "Download piped into a shell",
        description: "curl/wget output piped straight into sh, bash, python or another interpreter (well-known vendor installers, GitHub release installers and a project's own install script in its repository are reported as low).",
        remediation: "Download, verify (checksum or signature) and review the script before running it.",
        detector: line(&["curl", "wget"], r"(?i)\b(?:curl|wget)\b[^|\n;]*\|\s*(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+\S+\s+)?(?:/(?:usr/)?bin/)?(?:(?:ba|z|k|da|fi|tc|c)?sh|python[23]?|perl|ruby|node|php)\b").filtered(filters::known_installer),
    },
    RuleDef {
        id: "exec.shell-substitution",
        category: C::FetchExecute,
        severity: S::High,
        title: "Downloaded script executed via substitution",
        description: "bash <(curl ...), sh -c \"$(curl ...)\", source <(wget ...) and similar.",
        remediation: "Download, verify and review the script before running it.",
        detector: line(&["curl", "wget"], r#"(?i)\b(?:(?:ba|z|k)?sh|source|\.)\s+(?:-\S+\s+)*<\(\s*(?:curl|wget)\b|\b(?:(?:ba|z|k)?sh\s+-c|eval|exec)\s+["']?\$\(\s*(?:curl|wget)\b"#).filtered(filters::known_installer),
    },
    RuleDef {
        id: "exec.powershell-download",
        category: C::FetchExecute,
        severity: S::High,
        title: "PowerShell download-and-execute",
        description: "Invoke-Expression/IEX of downloaded content, or an -EncodedCommand payload.",
        remediation: "Download, verify and review the script before running it.",
        detector: line(&["iex", "invoke-expression", "powershell"], r"(?i)\b(?:iex|invoke-expression)\b[^\n]{0,80}\b(?:downloadstring|iwr|irm|invoke-webrequest|invoke-restmethod|net\.webclient)\b|\b(?:downloadstring|iwr|irm|invoke-webrequest|invoke-restmethod)\b[^\n]{0,160}\|\s*(?:iex|invoke-expression)\b|\bpowershell(?:\.exe)?\b[^\n]*\s-(?:e|ec|enc|encodedcommand)\s+[A-Za-z0-9+/=]{20,}").filtered(filters::known_installer),
    },
    RuleDef {
        id: "exec.remote-code-eval",
        category: C::FetchExecute,
        severity: S::Critical,
        title: "Evaluating downloaded code",
        description: "exec/eval of the body of an HTTP response (Python requests/urllib, JavaScript fetch).",
        remediation: "Never execute code fetched at run time.",
        detector: line(
            &["exec(", "eval(", "exec (", "eval ("],
            r"(?i)\b(?:exec|eval)\s*\(\s*(?:await\s+)?(?:requests\.get|urllib\.request\.urlopen|urlopen|httpx\.get|fetch)\s*\(|\b(?:exec|eval)\s*\([^\n]{0,80}\b(?:requests\.get|urlopen|httpx\.get)\s*\([^\n]*\)\s*\.\s*(?:text|read|content)",
        ),
    },
    RuleDef {
        id: "exec.download-and-run",
        category: C::FetchExecute,
        severity: S::Medium,
        title: "Download, make executable, run",
        description: "A download followed by chmod +x in the same command line.",
        remediation: "Verify downloaded binaries (checksum or signature) before running them.",
        detector: line(&["chmod"], r"(?i)\b(?:curl|wget)\b[^\n]*(?:&&|;|\n)\s*(?:sudo\s+)?chmod\s+(?:\+x|[0-7]?[0-7]?[1357][0-7]?)\b"),
    },
    // ---------------------------------------------------------------- decode and execute
    RuleDef {
        id: "exec.decode-pipe-shell",
        category: C::DecodeExecute,
        severity: S::Critical,
        title: "Decoded payload piped into a shell",
        description: "base64 -d / xxd -r / openssl base64 -d output piped into a shell: an obfuscated command.",
        remediation: "Ship readable commands; never hide a payload in an encoding.",
        detector: line(
            &["base64", "xxd", "openssl"],
            r"(?i)\b(?:base64\s+(?:-\w+\s+)*(?:-d|--decode|-D)\b|xxd\s+(?:-\w+\s+)*-r|openssl\s+(?:enc\s+)?-?base64\s+-d)[^|\n]*\|\s*(?:sudo\s+)?(?:/(?:usr/)?bin/)?(?:(?:ba|z|k|da)?sh|python[23]?|perl|ruby|node)\b",
        ),
    },
    RuleDef {
        id: "exec.decode-eval",
        category: C::DecodeExecute,
        severity: S::Critical,
        title: "Decoded payload evaluated",
        description: "exec/eval of base64, hex, zlib or marshal-decoded data.",
        remediation: "Ship readable code; never hide a payload in an encoding.",
        detector: line(
            &["b64decode", "decodebytes", "atob", "base64", "decompress", "marshal.loads", "codecs.decode", "fromhex"],
            r#"(?i)\b(?:exec|eval|Function)\s*\(\s*(?:base64\.b64decode|b64decode|base64\.decodebytes|base64\.b32decode|atob|Buffer\.from\s*\([^)]*["']base64["']\s*\)|zlib\.decompress|marshal\.loads|codecs\.decode|bytes\.fromhex|compile\s*\(\s*base64)"#,
        ),
    },
    RuleDef {
        id: "code.dynamic-eval",
        category: C::CodeExecution,
        severity: S::Medium,
        title: "eval/exec of a variable",
        description: "eval() or exec() applied to a variable or formatted string: arbitrary code execution if the value is attacker-influenced.",
        remediation: "Parse the input instead (ast.literal_eval, a real expression parser, a dispatch table).",
        detector: line(&["eval(", "exec(", "eval (", "exec ("], r#"\b(?:eval|exec)\s*\(\s*(?:f["']|[A-Za-z_][\w.]*(?:\[[^\]\n]*\])?\s*[,)])"#).filtered(filters::not_method_call),
    },
    RuleDef {
        id: "code.child-process-inline",
        category: C::CodeExecution,
        severity: S::High,
        title: "Inline child_process execution",
        description: "require('child_process').exec/execSync/spawn called inline, typical of injected JavaScript payloads.",
        remediation: "Do not run shell commands from configuration or injected code.",
        detector: line(
            &["child_process"],
            r#"require\s*\(\s*\\?["']child_process\\?["']\s*\)\s*\.\s*(?:exec|execSync|spawn|spawnSync|execFile|execFileSync)\s*\("#,
        ),
    },
    RuleDef {
        id: "code.dynamic-attribute",
        category: C::CodeExecution,
        severity: S::High,
        title: "Dangerous function reached by a computed name",
        description: "getattr/__import__/globals()/__builtins__ used to reach system, exec, eval or popen through a built or hidden name, a way to keep the call out of sight.",
        remediation: "Call functions by name; never build the name of a dangerous function.",
        detector: line(
            &["getattr", "__import__", "globals()", "locals()", "vars()", "__builtins__", "builtins", "import_module"],
            r#"\bgetattr\s*\(\s*(?:os|subprocess|builtins|__builtins__|posix|pty|socket|importlib|__import__\s*\([^)\n]*\))\s*,\s*(?:["'](?:system|popen|exec\w*|eval|spawn\w*|call|run|check_output|check_call|Popen|getoutput|getstatusoutput|import_module|__import__|compile|fork|dup2)["']|["'][^"'\n]*["']\s*(?:[+%\[]|\.(?:join|format|decode|replace))|[A-Za-z_(\[][^,)\n]*(?:\+|join|chr\s*\(|\[::-1\]|decode|format|b64decode|bytes|reversed))|\bgetattr\s*\(\s*(?:os|subprocess|builtins|__builtins__|posix|pty)\s*,\s*[A-Za-z_]\w*\s*\)\s*\(|\b__import__\s*\(\s*(?:["'][^"'\n]*["']\s*(?:[+%\[]|\.(?:join|format|decode))|["'](?:os|subprocess|pty|socket|base64|builtins)["']\s*\)\s*\.\s*(?:system|popen|spawn\w*|exec\w*|call|run|check_output|Popen|b64decode)\b|(?:chr|bytes|''\.join|"".join|base64)[^)\n]*\))|\b(?:globals|locals|vars)\s*\(\s*\)\s*\[\s*(?:["'](?:__builtins__|eval|exec|__import__|compile)["']|["'][^"'\n]*["']\s*\+)|\b__builtins__\s*(?:\.\s*__dict__\s*)?(?:\.\s*(?:eval|exec|__import__|compile)\b|\[\s*["'](?:eval|exec|__import__|compile)|\[\s*["'][^"'\n]*["']\s*\+)|\bimport_module\s*\(\s*["'][^"'\n]*["']\s*[+%\[]"#,
        ),
    },
    RuleDef {
        id: "flow.download-exec",
        category: C::FetchExecute,
        severity: S::Critical,
        title: "Downloaded value executed",
        description: "A value that came from a download (stored in a variable or a file on an earlier line) reaches eval/exec, a shell or an interpreter.",
        remediation: "Never execute what was downloaded; ship the code with the skill, or verify a pinned checksum first.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "flow.decode-exec",
        category: C::DecodeExecute,
        severity: S::Critical,
        title: "Decoded value executed",
        description: "A value produced by a decoder (base64, hex, zlib, marshal) on an earlier line reaches eval/exec or a shell.",
        remediation: "Ship readable code; never hide a payload in an encoding.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "flow.secret-to-network",
        category: C::Exfiltration,
        severity: S::High,
        title: "Environment or credentials sent over the network",
        description: "The whole environment, or the contents of a credential file, gathered into a value that is sent by an HTTP client, socket, mailer or curl/wget/nc.",
        remediation: "Never send environment variables or credential files anywhere.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "exfil.dns-lookup",
        category: C::Exfiltration,
        severity: S::High,
        title: "DNS lookup built from data",
        description: "A host name built from gathered data (a command substitution, the environment, a file or a variable) is resolved: data leaves in the DNS query even when HTTP is blocked.",
        remediation: "Resolve only fixed host names.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "code.os-system-dynamic",
        category: C::CodeExecution,
        severity: S::Medium,
        title: "Shell command built from a variable",
        description: "os.system/os.popen with a formatted or concatenated command: shell injection.",
        remediation: "Use subprocess with an argument list and no shell.",
        detector: line(
            &["os.system", "os.popen"],
            r#"\bos\.(?:system|popen)\s*\(\s*(?:f["']|[A-Za-z_][\w.]*\s*[)+%]|["'][^"'\n]*["']\s*(?:%|\+|\.format\())"#,
        ),
    },
    RuleDef {
        id: "code.shell-true",
        category: C::CodeExecution,
        severity: S::Low,
        title: "subprocess with shell=True",
        description: "A subprocess call through the shell.",
        remediation: "Pass an argument list without shell=True.",
        detector: line(&["shell=true", "shell = true"], r"\bsubprocess\.\w+\([^\n]*\bshell\s*=\s*True\b"),
    },
    RuleDef {
        id: "code.sql-string-format",
        category: C::CodeExecution,
        severity: S::Medium,
        title: "SQL built by string formatting",
        description: "A SQL statement assembled with an f-string, %, + or .format(): SQL injection.",
        remediation: "Use parameterised queries.",
        detector: line(
            &["\"select", "'select", "\"insert", "'insert", "\"update", "'update", "\"delete", "'delete"],
            r#"(?i)\bf["'](?:SELECT\b[^"'\n]*\bFROM|INSERT\s+INTO|UPDATE\b[^"'\n]*\bSET|DELETE\s+FROM)\b[^"'\n]*\{[^}\n]+\}|["'](?:SELECT\b[^"'\n]*\bFROM|INSERT\s+INTO|UPDATE\b[^"'\n]*\bSET|DELETE\s+FROM)\b[^"'\n]*["']\s*(?:%\s*[\w(]|\+\s*\w|\.format\()"#,
        ),
    },
    RuleDef {
        id: "code.system-credential-file",
        category: C::Exfiltration,
        severity: S::Medium,
        title: "System account file",
        description: "A reference to /etc/passwd, /etc/shadow or /etc/sudoers, the classic target of path traversal.",
        remediation: "A skill has no reason to read system account files.",
        detector: line(&["/etc/passwd", "/etc/shadow", "/etc/sudoers", "/etc/gshadow", "master.passwd"], r"/etc/(?:passwd|shadow|gshadow|sudoers|master\.passwd)\b"),
    },
    RuleDef {
        id: "code.path-traversal",
        category: C::CodeExecution,
        severity: S::Low,
        title: "Deep relative path",
        description: "Three or more ../ segments in a row.",
        remediation: "Resolve paths against a base directory and reject escapes.",
        detector: line(&["../../../", "..\\..\\..\\"], r"(?:\.\./){3,}|(?:\.\.\\){3,}"),
    },
    // ---------------------------------------------------------------- resource abuse
    RuleDef {
        id: "resource.memory-bomb",
        category: C::ResourceAbuse,
        severity: S::Medium,
        title: "Huge in-memory allocation",
        description: "A list or string multiplied by ten million or more.",
        remediation: "Bound allocations by the input size.",
        detector: line(&["0000000"], r#"(?:\]|["'])\s*\*\s*\d{8,}|(?:\]|["'])\s*\*\s*[1-9]0{6,}"#),
    },
    RuleDef {
        id: "resource.fork-bomb",
        category: C::ResourceAbuse,
        severity: S::Critical,
        title: "Fork bomb",
        description: "The shell fork bomb :(){ :|:& };: or an os.fork() loop.",
        remediation: "Remove it.",
        detector: line(&[":|:", "os.fork"], r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:|\bwhile\s+(?:True|1)\s*:\s*os\.fork\(\)"),
    },
    RuleDef {
        id: "resource.infinite-loop",
        category: C::ResourceAbuse,
        severity: S::Low,
        title: "Loop without exit",
        description: "A Python `while True:` loop whose body has no break, return, raise or exit.",
        remediation: "Give the loop an exit condition.",
        detector: Detector::Native,
    },
    // ---------------------------------------------------------------- destructive
    RuleDef {
        id: "destructive.rm-root-home",
        category: C::Destructive,
        severity: S::Critical,
        title: "Recursive delete of root or home",
        description: "rm -rf of /, /*, ~, $HOME or a system directory.",
        remediation: "Delete only paths the skill created, relative to its working directory.",
        detector: line(
            &["rm -", "rm  -", "rm\t-"],
            r#"(?i)\brm\s+(?:-[a-z]+\s+)*(?:-[a-z]*(?:r[a-z]*f|f[a-z]*r)[a-z]*|-r\s+-f|-f\s+-r|--recursive\s+--force|--force\s+--recursive)\s+(?:-[a-z-]+\s+)*["']?(?:/\*?|~/?\*?|\$HOME/?\*?|\$\{HOME\}/?\*?|/(?:etc|usr|var|home|bin|sbin|boot|lib|lib64|opt|root|sys|dev|System|Users|Library|Applications)/?\*?)["']?(?:\s|$|;|&|\||`|\))"#,
        ),
    },
    RuleDef {
        id: "destructive.disk-wipe",
        category: C::Destructive,
        severity: S::Critical,
        title: "Disk wipe or format",
        description: "mkfs, dd or shred on a block device, wipefs -a.",
        remediation: "Remove it.",
        detector: line(
            &["mkfs", "of=/dev/", "/dev/sd", "/dev/nvme", "wipefs", "shred"],
            r"\bmkfs(?:\.\w+)?\s+(?:-\S+\s+)*/dev/|\bdd\s+[^\n]*\bof=/dev/(?:sd|hd|nvme|disk|mmcblk|xvd|vd)|>\s*/dev/(?:sd[a-z]|nvme\d)\b|\bwipefs\s+(?:-\S+\s+)*-a\b|\bshred\s+[^\n]*/dev/",
        ),
    },
    RuleDef {
        id: "destructive.windows-wipe",
        category: C::Destructive,
        severity: S::Critical,
        title: "Windows mass delete",
        description: "format C:, del /s /q C:\\, rd /s /q C:\\, Remove-Item -Recurse on a drive or the profile, or deleting shadow copies.",
        remediation: "Remove it.",
        detector: line(
            &["format c:", ":\\", "remove-item", "vssadmin", "shadowcopy"],
            r"(?i)\bformat\s+c:|\b(?:del|erase)\s+(?:/[a-z]\s+)*[a-z]:\\(?:\*|\s|$)|\b(?:rd|rmdir)\s+/s\s+/q\s+[a-z]:\\(?:\s|$)|\bremove-item\b[^\n]*-recurse\b[^\n]*(?:\b[a-z]:\\\*?(?:\s|$)|\$env:userprofile\b|\$home\b)|\bvssadmin(?:\.exe)?\s+delete\s+shadows\b|\bwmic\s+shadowcopy\s+delete\b",
        ),
    },
    RuleDef {
        id: "destructive.rmtree-home",
        category: C::Destructive,
        severity: S::High,
        title: "Recursive delete of home or root from code",
        description: "shutil.rmtree / fs.rm(recursive) on /, ~ or the home directory.",
        remediation: "Delete only paths the skill created.",
        detector: line(
            &["rmtree", "rmsync", "fs.rm", "remove_dir_all"],
            r#"(?i)\b(?:shutil\.rmtree|rmtree|fs\.rmSync|fs\.rm|remove_dir_all)\s*\(\s*(?:["'](?:/|~|~/|[a-z]:\\\\?)["']|os\.path\.expanduser\(\s*["']~/?["']\s*\)|Path\.home\(\)|os\.environ\[["']HOME["']\]|os\.homedir\(\)|["']/(?:etc|usr|home|var|Users)/?["'])"#,
        ),
    },
    RuleDef {
        id: "destructive.chmod-root",
        category: C::Destructive,
        severity: S::High,
        title: "Permissions opened on the whole system",
        description: "chmod -R 777 / or chown -R of /.",
        remediation: "Remove it.",
        detector: line(&["chmod", "chown"], r"\b(?:chmod\s+-R\s+[0-7]*7[0-7]*|chown\s+-R\s+\S+)\s+/(?:\s|$|;|&)"),
    },
    // ---------------------------------------------------------------- reverse shells
    RuleDef {
        id: "shell.dev-tcp",
        category: C::ReverseShell,
        severity: S::Critical,
        title: "Reverse shell via /dev/tcp",
        description: "bash redirection to /dev/tcp or /dev/udp, the classic reverse shell.",
        remediation: "Remove it.",
        detector: line(&["/dev/tcp/", "/dev/udp/"], r"/dev/(?:tcp|udp)/[\w.:-]+/\d+"),
    },
    RuleDef {
        id: "shell.netcat",
        category: C::ReverseShell,
        severity: S::Critical,
        title: "Reverse shell via netcat or socat",
        description: "nc/ncat -e /bin/sh, socat exec:, mkfifo pipelines into nc.",
        remediation: "Remove it.",
        detector: line(
            &["ncat", "netcat", "socat", "mkfifo", " -e", " -c", "|sh", "| sh", "|bash", "| bash", "|/bin/", "| /bin/", "|zsh", "| zsh"],
            r"(?i)\b(?:nc|ncat|netcat)\b[^\n|;]*\s-(?:e|c)\s*(?:/bin/)?(?:ba|z)?sh\b|\bsocat\b[^\n]*\bexec:|\bmkfifo\b[^\n]*\|\s*(?:nc|ncat|netcat)\b|\b(?:nc|ncat|netcat)\s+[^\n|]*\|\s*(?:/bin/)?(?:ba|z)?sh\b",
        ),
    },
    RuleDef {
        id: "shell.socket-dup",
        category: C::ReverseShell,
        severity: S::Critical,
        title: "Reverse shell via socket duplication",
        description: "os.dup2(socket.fileno()) or pty.spawn of a shell, the Python reverse shell.",
        remediation: "Remove it.",
        detector: line(&["dup2", "pty.spawn"], r#"\bos\.dup2\s*\(\s*\w+\.fileno\(\)|\bpty\.spawn\s*\(\s*["'](?:/bin/)?(?:ba|z)?sh"#),
    },
    RuleDef {
        id: "shell.powershell-tcp",
        category: C::ReverseShell,
        severity: S::Critical,
        title: "PowerShell TCP client shell",
        description: "A System.Net.Sockets.TCPClient created in PowerShell, the usual reverse-shell one-liner.",
        remediation: "Remove it.",
        detector: line(&["tcpclient"], r"(?i)new-object\s+(?:-typename\s+)?(?:system\.)?net\.sockets\.tcpclient"),
    },
    // ---------------------------------------------------------------- persistence
    RuleDef {
        id: "persist.crontab",
        category: C::Persistence,
        severity: S::High,
        title: "Cron persistence",
        description: "Installs a cron job non-interactively (crontab -, /etc/cron.d, /var/spool/cron).",
        remediation: "A skill must not schedule itself.",
        detector: line(
            &["crontab", "/etc/cron", "/var/spool/cron"],
            r"(?i)\|\s*crontab\s+-(?:\s|$|\))|\bcrontab\s+-\s*<|>>?\s*/etc/cron(?:tab|\.d/|\.(?:hourly|daily|weekly|monthly)/)|/var/spool/cron/",
        ),
    },
    RuleDef {
        id: "persist.shell-rc",
        category: C::Persistence,
        severity: S::Medium,
        title: "Shell start-up file modified",
        description: "Appends to ~/.bashrc, ~/.zshrc, ~/.profile and similar (high when what is appended downloads or connects).",
        remediation: "Tell the user what to add; do not edit their shell start-up files.",
        detector: line(&["bashrc", "zshrc", "bash_profile", ".profile", "zprofile", "bash_login", "zshenv", "config.fish"], r#"(?i)(?:>>|\btee\s+-a\b|\.write\(|open\([^)\n]*["']a["'])[^\n]{0,80}(?:~|\$HOME|\$\{HOME\})/\.(?:bashrc|bash_profile|zshrc|zprofile|profile|bash_login|zshenv|config/fish/config\.fish)|open\([^)\n]*\.(?:bashrc|zshrc|bash_profile|profile)["'][^)\n]*["']a\+?["']"#).filtered(filters::escalate_if_network),
    },
    RuleDef {
        id: "persist.launch-agent",
        category: C::Persistence,
        severity: S::Medium,
        title: "macOS launch agent",
        description: "Writes a LaunchAgent/LaunchDaemon or loads/starts one with launchctl.",
        remediation: "A skill must not install background services.",
        detector: line(
            &["launchagents", "launchdaemons", "launchctl"],
            r"(?i)Library/Launch(?:Agents|Daemons)/|\blaunchctl\s+(?:load|bootstrap|submit|enable|start|kickstart)\b",
        ),
    },
    RuleDef {
        id: "persist.systemd",
        category: C::Persistence,
        severity: S::Low,
        title: "systemd unit installed",
        description: "Writes a systemd unit or enables one.",
        remediation: "A skill should not install services.",
        detector: line(
            &["systemd", "systemctl"],
            r"(?i)/etc/systemd/system/[\w@.-]+\.(?:service|timer)|\.config/systemd/user/|\bsystemctl\s+(?:--user\s+)?enable\b",
        ),
    },
    RuleDef {
        id: "persist.windows-autorun",
        category: C::Persistence,
        severity: S::High,
        title: "Windows autorun",
        description: "Writes the Run/RunOnce registry keys, creates a scheduled task or drops into the Startup folder.",
        remediation: "A skill must not install autoruns.",
        detector: line(
            &["currentversion\\run", "schtasks", "\\startup"],
            r"(?i)\\CurrentVersion\\Run(?:Once)?\b|\bschtasks(?:\.exe)?\s+/create\b|\\Start Menu\\Programs\\Startup\b",
        )
        .filtered(run_key_written),
    },
    RuleDef {
        id: "persist.ssh-authorized-keys",
        category: C::Persistence,
        severity: S::Critical,
        title: "SSH key planted",
        description: "Appends a key to ~/.ssh/authorized_keys.",
        remediation: "Remove it.",
        detector: line(
            &["authorized_keys"],
            r"(?i)(?:>>|\btee\s+-a)\s*(?:~|\$HOME|\$\{HOME\}|/root|/home/[\w.-]+)/\.ssh/authorized_keys",
        ),
    },
    // ---------------------------------------------------------------- exfiltration
    RuleDef {
        id: "exfil.credential-file",
        category: C::Exfiltration,
        severity: S::Medium,
        title: "Credential file access",
        description: "References a private key, cloud or registry credential file (high when the same line sends data over the network; a key given to ssh -i, IdentityFile or ssh-add is used, not read, and is low).",
        remediation: "A skill must not read the user's credentials.",
        detector: line(&[".ssh/id_", ".ssh\\id_", ".aws/credentials", ".aws\\credentials", "gcloud/", "netrc", "git-credentials", "docker/config.json", "kube/config", "npmrc", "pypirc", "gnupg", "password-store", "wallet.dat", "login data", "find-generic-password", "find-internet-password"], r"(?i)\.ssh[/\\]id_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws[/\\]credentials\b|\.config/gcloud/(?:credentials|application_default_credentials|access_tokens)|(?:~|\$HOME|\$\{HOME\}|%USERPROFILE%|/root|/home/[\w.-]+|/Users/[\w.-]+)[/\\]\.(?:netrc|git-credentials|docker/config\.json|kube/config|npmrc|pypirc|gnupg\b|password-store\b)|\bwallet\.dat\b|\bLogin\s+Data\b|\bsecurity\s+find-(?:generic|internet)-password\b").filtered(filters::credential_file),
    },
    RuleDef {
        id: "exfil.env-to-network",
        category: C::Exfiltration,
        severity: S::High,
        title: "Environment sent over the network",
        description: "The whole environment ($(env), printenv, process.env, os.environ) piped or posted to a network client.",
        remediation: "Never send environment variables anywhere.",
        detector: line(
            &["$(env", "$( env", "$(printenv", "$(set", "env |", "env|", "printenv", "process.env", "os.environ"],
            r#"(?i)\$\(\s*(?:env|printenv|set)\s*\)[^\n]*\b(?:https?://|curl|wget|nc)\b|\b(?:curl|wget)\b[^\n]*\$\(\s*(?:env|printenv)\s*\)|\b(?:env|printenv)\s*\|\s*(?:base64\s*\|\s*)?(?:curl|wget|nc|ncat)\b|\b(?:fetch|axios\.post|request)\s*\([^\n]*JSON\.stringify\(\s*process\.env\s*\)|\b(?:requests|httpx)\.(?:post|put)\([^\n]*(?:\bdict\(\s*os\.environ\b|\*\*os\.environ\b|[=:(,]\s*os\.environ\s*(?:[,)}]|\.(?:copy|items|keys|values)\(|$))"#,
        ),
    },
    RuleDef {
        id: "exfil.env-harvest",
        category: C::Exfiltration,
        severity: S::Medium,
        title: "Environment harvesting",
        description: "Iterates or serialises all environment variables in code that also talks to the network and looks for key/secret/token names.",
        remediation: "Read only the variables the skill needs, by name.",
        detector: line(&["os.environ", "process.env"], r"\bos\.environ\.(?:items|copy|keys|values)\(\)|\b(?:dict|json\.dumps|str)\(\s*os\.environ\s*\)|JSON\.stringify\(\s*process\.env\s*\)|Object\.(?:entries|keys|values)\(\s*process\.env\s*\)").filtered(filters::env_harvest_context),
    },
    RuleDef {
        id: "exfil.secret-post",
        category: C::Exfiltration,
        severity: S::Medium,
        title: "Secret sent in a request body",
        description: "An HTTP POST/PUT whose body carries an API key, secret, password or credentials (low when the credential is read under its service's name and sent to that service's host).",
        remediation: "Send credentials only as authentication to the service they belong to.",
        detector: line(&[".post(", ".put(", ".post (", ".put ("], r#"(?i)\b(?:requests|httpx|session|client|axios|urllib\.request)\.(?:post|put)\s*\([^\n]*\b(?:json|data|params|body)\s*[=:]\s*[^\n]*\b(?:api_?key|secret|secrets|password|passwd|credentials?|env_data|aws_creds?)\b"#).filtered(filters::secret_post),
    },
    RuleDef {
        id: "exfil.sensitive-pipeline",
        category: C::Exfiltration,
        severity: S::Critical,
        title: "Credential files sent over the network",
        description: "Credential or key files read and piped (possibly encoded) to curl/wget/nc, or uploaded with curl -d/-F/-T @file.",
        remediation: "Remove it.",
        detector: line(
            &["curl", "wget", "ncat", "netcat", "| nc", "|nc"],
            r#"(?i)\b(?:cat|tar|zip|base64|gzip)\b[^\n|]*(?:\.ssh\b|\.aws\b|\.gnupg\b|\.kube\b|\.docker\b|/etc/shadow|/etc/passwd|\.env\b|\.netrc\b)[^\n]*\|\s*(?:[^\n|]*\|\s*)?(?:curl|wget|nc|ncat|netcat)\b|\bcurl\b[^\n]*(?:-d|--data(?:-binary|-raw)?|-F|--form|-T|--upload-file)\s*["']?[\w-]*=?@(?:~|\$HOME)?/?[^\s]*\.(?:ssh|aws|env|netrc|kube|docker|gnupg)\b"#,
        ),
    },
    RuleDef {
        id: "exfil.browser-storage",
        category: C::Exfiltration,
        severity: S::High,
        title: "Browser cookies or storage sent out",
        description: "document.cookie, localStorage or sessionStorage put into a request, an image address or a redirect: session theft.",
        remediation: "Never send cookies or browser storage anywhere; use the platform's authentication.",
        detector: line(
            &["document.cookie", "localstorage", "sessionstorage"],
            r"(?i)(?:\bfetch\s*\(|\bnew\s+Image\s*\(|\.src\s*=|\blocation(?:\.href)?\s*=|\bsendBeacon\s*\(|\.open\s*\(\s*['\x22](?:GET|POST)|\baxios|\$\.(?:get|post|ajax)\s*\(|\bwindow\.open\s*\()[^\n]{0,200}?(?:document\.cookie|localStorage|sessionStorage)|(?:document\.cookie|localStorage|sessionStorage)[^\n]{0,120}?(?:\bfetch\s*\(|\bsendBeacon\s*\(|\bnew\s+Image\s*\(|https?://)",
        ),
    },
    RuleDef {
        id: "exfil.secret-in-url",
        category: C::Exfiltration,
        severity: S::High,
        title: "Secret placed in a URL",
        description: "A secret-named variable (AWS secret key, session token, client secret, private key, GitHub/npm token) interpolated into the address of a request, where every proxy and log sees it.",
        remediation: "Send credentials only in an authorization header to their own service, never in a URL.",
        detector: line(
            &["aws_secret_access_key", "aws_session_token", "secret_access_key", "session_token", "github_token", "gh_token", "npm_token", "pypi_token", "private_key", "client_secret", "db_password", "database_password"],
            r"(?i)https?://[^\s\x22'`<>]*?(?:\{[^}\n]*?|\$\{?|#\{[^}\n]*?|%\()(?:aws_secret_access_key|aws_session_token|secret_access_key|session_token|github_token|gh_token|npm_token|pypi_token|private_key|client_secret|db_password|database_password)\b|https?://[^\s\x22'`<>]*[\x22']\s*\+\s*[\w.\[\]\x22'()]*?(?:aws_secret_access_key|aws_session_token|secret_access_key|session_token|github_token|gh_token|npm_token|pypi_token|private_key|client_secret|db_password|database_password)\b",
        ),
    },
    RuleDef {
        id: "exfil.secret-to-other-host",
        category: C::Exfiltration,
        severity: S::Medium,
        title: "Credential sent to another host",
        description: "A credential named after a service (GITHUB_TOKEN, OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY ...) is put into the body, form or query of a request to a host of another name; sent to its own service (api.github.com) it is authentication, not reported.",
        remediation: "Send a credential only to the service it belongs to, in its authorization header.",
        detector: line(&[" -d ", " -d'", " -d\"", "--data", " -f ", "--form", "--post-data", "--body-data", "--json", "-body ", "=$", "json=", "data=", "params=", "files=", "body=", "fields=", "json =", "data =", "params =", "process.env", "={", "=${", "=' +", "=\" +", "='+", "=\"+", "sendall", ".send(", "sendto("], r#"(?i)\b(?:curl|wget|http|xh|Invoke-RestMethod|Invoke-WebRequest|irm|iwr)\b[^\n]*?(?:\s(?:-d|--data(?:-raw|-binary|-urlencode|-ascii)?|-F|--form(?:-string)?|--post-data|--body-data|--json|-Body)(?:\s+|=)(?:\x22[^\x22\n]*?|'[^'\n]*?|[^\s\x22']*?)|[?&][\w.-]+=)\$\{?(?:env:)?([A-Za-z_][A-Za-z0-9_]*)|\.(?:post|put|patch|get|request)\s*\([^\n]*?\b(?:json|data|params|files|body|fields)\s*=[^\n]*?(?:os\.environ(?:\.get)?\s*[\[(]\s*['\x22]|os\.getenv\(\s*['\x22]|process\.env(?:\.|\[\s*['\x22]))([A-Za-z_][A-Za-z0-9_]*)|\b(?:fetch|axios(?:\.\w+)?|got(?:\.\w+)?|request|ky(?:\.\w+)?)\s*\([^\n]*?\b(?:body|data|params|json|form|qs|searchParams)\s*:[^\n]*?process\.env(?:\.|\[\s*['\x22])([A-Za-z_][A-Za-z0-9_]*)|https?://[^\s'\x22`]*[?&][\w.-]+=(?:\{|\$\{)\s*(?:(?:os\.environ(?:\.get)?\s*[\[(]\s*['\x22]|os\.getenv\(\s*['\x22]|process\.env(?:\.|\[\s*['\x22])))?([A-Za-z_][A-Za-z0-9_]*)|https?://[^\s'\x22`]*[?&][\w.-]+=['\x22]\s*\+\s*(?:(?:os\.environ(?:\.get)?\s*[\[(]\s*['\x22]|os\.getenv\(\s*['\x22]|process\.env(?:\.|\[\s*['\x22])))?([A-Za-z_][A-Za-z0-9_]*)|\.(?:sendall|send|sendto)\s*\([^\n]*?(?:os\.environ(?:\.get)?\s*[\[(]\s*['\x22]|os\.getenv\(\s*['\x22]|process\.env(?:\.|\[\s*['\x22]))([A-Za-z_][A-Za-z0-9_]*)"#).filtered(filters::secret_to_other_host),
    },
    RuleDef {
        id: "exfil.dns-secret-name",
        category: C::Exfiltration,
        severity: S::High,
        title: "Credential placed in a DNS name",
        description: "A host name that holds a secret-named variable (a token, key, password or credential) is resolved (dig, nslookup, host, ping, Resolve-DnsName, gethostbyname, dns.lookup): the secret leaves in the DNS query.",
        remediation: "Never build host names from credentials.",
        detector: line(&["dig ", "nslookup", "host $", "host \"$", "drill ", "ping $", "ping \"$", "ping -", "resolve-dnsname", "gethostbyname", "getaddrinfo", "resolver.", "dns.lookup", "dns.resolve", "dns.promises"], r#"(?i)\b(?:dig|nslookup|host|drill|ping|Resolve-DnsName)\b[^\n;|&]*?\$\{?(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}?\.[A-Za-z0-9-]|\b(?:gethostbyname(?:_ex)?|getaddrinfo|resolver\.(?:resolve|query)|dns\.(?:promises\.)?(?:lookup|resolve\w*))\s*\([^\n]*?(?:(?:os\.environ(?:\.get)?\s*[\[(]\s*['\x22]|os\.getenv\(\s*['\x22]|process\.env(?:\.|\[\s*['\x22]))|\$\{|\{)\s*(?:(?:os\.environ(?:\.get)?\s*[\[(]\s*['\x22]|os\.getenv\(\s*['\x22]|process\.env(?:\.|\[\s*['\x22])))?([A-Za-z_][A-Za-z0-9_]*)"#).filtered(filters::secret_named_variable),
    },
    RuleDef {
        id: "exfil.markdown-image-beacon",
        category: C::Exfiltration,
        severity: S::High,
        title: "Markdown image beacon",
        description: "A Markdown, HTML or CSS image whose URL (host, path or query) carries templated data, leaking conversation content when rendered (a template whose placeholders only name the resource, such as {owner}/{repo}, is low).",
        remediation: "Do not render images with data-bearing query strings.",
        detector: line(&["![", "<img", "url("], r#"(?i)!\[[^\]\n]*\]\(\s*https?://[^)\s]+\?[^)\s]*(?:\{\{|\{[A-Za-z_]|\$\{|\$[A-Za-z_]|%7B|<[A-Za-z_]|\[[A-Z_]{3,}\]|%s\b)|(?-i:!\[[^\]\n]*\]\(\s*https?://[^)\s]+\?[^)\s]*=(?:[A-Z]+_[A-Z_]+|[A-Z]{6,}|\.\.\.)(?:[&)#\s]|$))|!\[[^\]\n]*\]\(\s*<?https?://[^)\s]*?(?:\{\{|\{[A-Za-z_]|\$\{|%7B|<[A-Za-z_]|\[[A-Z_]{3,}\]|%[A-Za-z][A-Za-z_]{3,}%)|<img\b[^>\n]*\bsrc\s*=\s*["']?https?://[^"'\s>]*?(?:\{\{|\{[A-Za-z_]|\$\{|%7B|<[A-Za-z_]|\[[A-Z_]{3,}\]|%[A-Za-z][A-Za-z_]{3,}%)|\burl\(\s*['\x22]?https?://[^)\s'\x22]*?(?:\{\{|\{[A-Za-z_]|\$\{|%7B|<[A-Za-z_]|\[[A-Z_]{3,}\]|%[A-Za-z][A-Za-z_]{3,}%)"#).filtered(filters::data_placeholders),
    },
    RuleDef {
        id: "exfil.markdown-link-beacon",
        category: C::Exfiltration,
        severity: S::Medium,
        title: "Link that carries data",
        description: "A Markdown or HTML link (or link reference) whose URL holds template placeholders for data to be filled in: clicking it sends that data to the host (placeholders that only name the resource are low).",
        remediation: "Do not build links from conversation data.",
        detector: line(&["](", "href", "]: http", "]: <http"], r#"(?im)(?:^|[^!])\[[^\]\n]*\]\(\s*<?https?://[^)\s]*?(?:\{\{|\{[A-Za-z_]|\$\{|%7B|<[A-Za-z_]|\[[A-Z_]{3,}\]|%[A-Za-z][A-Za-z_]{3,}%)|^\s{0,3}\[[^\]\n]+\]:\s*<?https?://[^\s>]*?(?:\{\{|\{[A-Za-z_]|\$\{|%7B|<[A-Za-z_]|\[[A-Z_]{3,}\]|%[A-Za-z][A-Za-z_]{3,}%)|<a\b[^>\n]*\bhref\s*=\s*["']?https?://[^"'\s>]*?(?:\{\{|\{[A-Za-z_]|\$\{|%7B|<[A-Za-z_]|\[[A-Z_]{3,}\]|%[A-Za-z][A-Za-z_]{3,}%)"#).filtered(filters::data_placeholders),
    },
    RuleDef {
        id: "exfil.data-in-url-instruction",
        category: C::Exfiltration,
        severity: S::High,
        title: "Instruction to put data into a URL",
        description: "Tells the model to append or encode conversation data, secrets or user data into a URL, link or image address.",
        remediation: "Remove it; data must not leave through rendered links or images.",
        detector: line(&["url", "link", "image", "query", "src", "href", "followed by", " plus ", "appending", "=<", "/<"], r"(?i)\b(?:append|add|include|encode|put|insert|embed|attach|place|substitute)\b[^.\n]{0,60}?\b(?:conversation|chat\s+history|(?:previous|user'?s?|all)\s+messages|secrets?|api[\s_-]?keys?|tokens?|credentials?|passwords?|user(?:'s)?\s+(?:data|input|details|information)|personal\s+(?:data|information)|context|summary|memory|environment\s+variables|private\s+data)\b[^.\n]{0,60}?\b(?:to|in|into|as|inside)\s+(?:the\s+|a\s+|an\s+|this\s+)?(?:url|link|image(?:\s+(?:url|address|link))?|query(?:\s+string)?|query\s+param(?:eter)?s?|src|href|address)\b|https?://[^\s)>\]`'\x22]*[?&][\w.-]*=[)\]`'\x22]?,?\s+(?:followed\s+by|plus|\+|then|with|and\s+append(?:ing)?|appending)\b[^.\n]{0,80}?\b(?:conversation|chat(?:\s+(?:log|history|transcript))?|(?:previous|prior|earlier|last|all|full|entire)\s+(?:[\w']+\s+){0,2}?messages?|summary|history|transcript|secrets?|api[\s_-]?keys?|tokens?|passwords?|credentials?|cookies?|environment(?:\s+variables)?|system\s+prompt|(?:user'?s?|their)\s+(?:name|e-?mail|address|phone|details|data|information|files?|messages?)|files?\s+you\s+(?:read|opened|saw|accessed)|e-?mail\s+address(?:es)?|personal\s+(?:data|information)|memory|ssh\s+keys?|env(?:\s+file)?|dotenv)\b|https?://[^\s)>\]`'\x22]*[?&/=]<[^>\n]{0,100}?\b(?:conversation|chat(?:\s+(?:log|history|transcript))?|(?:previous|prior|earlier|last|all|full|entire)\s+(?:[\w']+\s+){0,2}?messages?|summary|history|transcript|secrets?|api[\s_-]?keys?|tokens?|passwords?|credentials?|cookies?|environment(?:\s+variables)?|system\s+prompt|(?:user'?s?|their)\s+(?:name|e-?mail|address|phone|details|data|information|files?|messages?)|files?\s+you\s+(?:read|opened|saw|accessed)|e-?mail\s+address(?:es)?|personal\s+(?:data|information)|memory|ssh\s+keys?|env(?:\s+file)?|dotenv)\b[^>\n]{0,100}>").filtered(filters::data_into_url),
    },
    RuleDef {
        id: "exfil.data-before-url",
        category: C::Exfiltration,
        severity: S::Medium,
        title: "Data named before an open URL",
        description: "A sentence names conversation data, a secret or personal data and then gives a URL whose query value is left open (`?v=`) or is a placeholder describing that data (`/log/<summary of the chat>`): the shape of an instruction to send the data there.",
        remediation: "Do not tell the model to fill a URL with data from the conversation or the user.",
        detector: line(&["=<", "/<", "password", "conversation", "chat history", "chat log", "transcript", "credential", "cookie", "secret", "system prompt", "messages", "memory", "ssh key"], r"(?i)\b(?:conversation|chat(?:\s+(?:log|history|transcript))?|(?:previous|prior|earlier|last|all|full|entire)\s+(?:[\w']+\s+){0,2}?messages?|summary|history|transcript|secrets?|api[\s_-]?keys?|tokens?|passwords?|credentials?|cookies?|environment\s+variables|system\s+prompt|(?:user'?s?|their)\s+(?:name|e-?mail|address|phone|details|data|information|files?|messages?)|files?\s+you\s+(?:read|opened|saw|accessed)|e-?mail\s+address(?:es)?|personal\s+(?:data|information)|memory|ssh\s+keys?)\b[^.\n]{0,100}?https?://[^\s)>\]`'\x22]*[?&][\w.-]*=(?:[\s)`'\x22]|$)|\b(?:conversation|chat(?:\s+(?:log|history|transcript))?|(?:previous|prior|earlier|last|all|full|entire)\s+(?:[\w']+\s+){0,2}?messages?|transcript|system\s+prompt|files?\s+you\s+(?:read|opened|saw|accessed)|personal\s+(?:data|information)|memory)\b[^.\n]{0,100}?https?://[^\s)>\]`'\x22]*[?&/=]<[^>\n]{1,40}>").filtered(filters::data_before_url),
    },
    RuleDef {
        id: "exfil.webhook-endpoint",
        category: C::Exfiltration,
        severity: S::High,
        title: "Request-catcher or chat webhook endpoint",
        description: "A URL of a request-catching service (webhook.site, requestbin, pipedream, interactsh/OAST, Burp collaborator) or a Discord/Telegram bot webhook, common exfiltration sinks (a bot or webhook token given as a variable, the user's own bot, is low).",
        remediation: "Send data only to the service the skill is about.",
        detector: line(&["webhook.site", "requestbin", "pipedream.net", "hookbin", "interact.sh", "oast.", "burpcollaborator", "canarytokens", "/api/webhooks/", "api.telegram.org/bot", "beeceptor", "requestcatcher"], r"(?i)\b(?:https?://)?(?:[\w-]+\.)*(?:webhook\.site|requestbin\.(?:com|net)|[\w-]+\.m\.pipedream\.net|pipedream\.net|hookbin\.com|interact\.sh|oast\.(?:fun|me|pro|site|live|online)|burpcollaborator\.net|canarytokens\.(?:com|org)|beeceptor\.com|requestcatcher\.com)\b|discord(?:app)?\.com/api/webhooks/|api\.telegram\.org/bot").filtered(filters::webhook_endpoint),
    },
    // ---------------------------------------------------------------- miners
    RuleDef {
        id: "miner.cryptominer",
        category: C::Miner,
        severity: S::High,
        title: "Cryptocurrency miner",
        description: "A known miner binary, a stratum pool URL or miner flags.",
        remediation: "Remove it.",
        detector: line(
            &["xmrig", "xmr-stak", "minerd", "cpuminer", "cgminer", "bfgminer", "ethminer", "nbminer", "phoenixminer", "lolminer", "coinhive", "cryptonight", "nicehash", "stratum+", "--donate-level", "minexmr", "supportxmr", "nanopool", "2miners", "f2pool", "hashvault", "moneroocean"],
            r"(?i)\b(?:xmrig|xmr-stak|minerd|cpuminer|cgminer|bfgminer|ethminer|nbminer|phoenixminer|lolminer|coinhive|cryptonight)\b|\bnicehash\.com\b|stratum\+(?:tcp|ssl|tls)://|--donate-level\b|\b(?:[\w-]+\.)?(?:minexmr|supportxmr|nanopool|2miners|f2pool|hashvault|moneroocean)\.(?:com|org|pro|net|stream)\b",
        ),
    },
    // ---------------------------------------------------------------- suspicious URLs
    RuleDef {
        id: "url.ip-literal",
        category: C::SuspiciousUrl,
        severity: S::Medium,
        title: "URL with a public IP address",
        description: "A URL whose host is a public IPv4 literal (or a decimal/hex encoded address) instead of a name.",
        remediation: "Use the service's domain name over HTTPS.",
        detector: line(&["://0", "://1", "://2", "://3", "://4", "://5", "://6", "://7", "://8", "://9", "@0", "@1", "@2", "@3", "@4", "@5", "@6", "@7", "@8", "@9"], r"(?i)\b(?:https?|ftp|tcp|udp|wss?)://(?:[^\s/@]+@)?((?:\d{1,3}\.){3}\d{1,3}|0x[0-9a-f]{8}|\d{8,10})(?::\d+)?(?:[/?#\s'\x22)`]|$)").filtered(filters::public_ip),
    },
    RuleDef {
        id: "url.tunnel",
        category: C::SuspiciousUrl,
        severity: S::Medium,
        title: "Tunnel service URL",
        description: "A host on a tunnelling service (ngrok, trycloudflare, localtunnel, serveo, localhost.run, pinggy, bore).",
        remediation: "Use the real service's domain.",
        detector: line(
            &["ngrok", "trycloudflare", "loca.lt", "localtunnel", "serveo", "localhost.run", "pinggy", "bore.pub", "lhr.life", "tunnelmole"],
            r"(?i)\b[\w.-]*(?:\.ngrok(?:-free)?\.(?:io|app|dev)|\.trycloudflare\.com|\.loca\.lt|localtunnel\.me|serveo\.net|\.localhost\.run|\.pinggy\.(?:io|link|online)|bore\.pub|\.lhr\.life|tunnelmole\.net)\b",
        ),
    },
    RuleDef {
        id: "url.paste-site",
        category: C::SuspiciousUrl,
        severity: S::Medium,
        title: "Paste or anonymous file-drop site",
        description: "A URL on a paste site or anonymous file drop (pastebin, rentry, transfer.sh, 0x0.st ...), common payload hosts and exfiltration sinks.",
        remediation: "Host files in the skill's own repository.",
        detector: line(
            &["pastebin", "paste.ee", "hastebin", "ghostbin", "rentry.", "transfer.sh", "0x0.st", "termbin", "controlc.com", "justpaste.it", "dpaste", "privatebin", "pastes.io", "paste.rs", "file.io", "anonfiles", "gofile.io", "temp.sh"],
            r"(?i)\bhttps?://(?:www\.)?(?:pastebin\.com|paste\.ee|hastebin\.com|ghostbin\.\w+|rentry\.(?:co|org)|transfer\.sh|0x0\.st|termbin\.com|controlc\.com|justpaste\.it|dpaste\.(?:com|org)|privatebin\.net|pastes\.io|paste\.rs|file\.io|anonfiles\.com|gofile\.io|temp\.sh)\b|(?:^|[\s(\x22'`])(?:www\.)?(?:pastebin\.com|paste\.ee|hastebin\.com|ghostbin\.\w+|rentry\.(?:co|org)|transfer\.sh|0x0\.st|termbin\.com|controlc\.com|justpaste\.it|dpaste\.(?:com|org)|privatebin\.net|pastes\.io|paste\.rs|file\.io|anonfiles\.com|gofile\.io|temp\.sh)/[\w-]",
        ),
    },
    RuleDef {
        id: "url.shortener",
        category: C::SuspiciousUrl,
        severity: S::Medium,
        title: "Shortened URL",
        description: "A link shortener hides the real destination.",
        remediation: "Link to the destination directly.",
        detector: line(
            &["bit.ly", "tinyurl", "t.co/", "goo.gl", "is.gd", "cutt.ly", "rb.gy", "ow.ly", "shorturl.at", "rebrand.ly", "buff.ly", "tiny.cc", "v.gd", "t.ly", "s.id", "shorturl", "tiny.one"],
            r"(?i)\bhttps?://(?:www\.)?(?:bit\.ly|tinyurl\.com|t\.co|goo\.gl|is\.gd|cutt\.ly|rb\.gy|ow\.ly|shorturl\.at|rebrand\.ly|buff\.ly|tiny\.cc|v\.gd|t\.ly|s\.id|tiny\.one)/[\w-]+",
        ),
    },
    RuleDef {
        id: "url.executable-download",
        category: C::SuspiciousUrl,
        severity: S::Medium,
        title: "Executable download link",
        description: "A URL pointing straight at a Windows/macOS/Android executable or script (.exe, .msi, .scr, .ps1, .dmg, .pkg, .apk ...).",
        remediation: "Skills should not ship or fetch executables.",
        detector: line(&[".exe", ".msi", ".scr", ".bat", ".cmd", ".ps1", ".vbs", ".hta", ".dmg", ".pkg", ".apk", ".jar", ".lnk"], r"(?i)\bhttps?://[^\s)\x22'<>]+\.(?:exe|msi|scr|bat|cmd|ps1|vbs|hta|dmg|pkg|apk|jar|lnk)(?:[?#\s)\x22'<>]|$)").filtered(filters::known_installer),
    },
    RuleDef {
        id: "lure.password-archive",
        category: C::FetchExecute,
        severity: S::High,
        title: "Password-protected download lure",
        description: "Tells the user to extract an archive or run an executable with a given password, the classic malware-lure shape that defeats scanners.",
        remediation: "Remove it.",
        detector: line(
            &["password"],
            r"(?i)\b(?:extract|unzip|unpack|decompress|unrar|open)\b[^\n]{0,30}\bwith\s+(?:the\s+)?password\b|\.(?:zip|rar|7z|exe|msi|dmg)\b[^\n]{0,60}\bpassword\s*[:=]",
        ),
    },
    RuleDef {
        id: "lure.paste-into-terminal",
        category: C::FetchExecute,
        severity: S::Medium,
        title: "Paste-into-terminal lure",
        description: "Tells the user to paste a command into their terminal or the Run dialog (\"ClickFix\").",
        remediation: "Let the user review commands; do not push copy-paste execution.",
        detector: line(
            &["paste", "win+r", "win + r"],
            r"(?i)\bpaste\s+(?:it\s+|this\s+|the\s+command\s+)?into\s+(?:your\s+|the\s+)?(?:terminal|shell|powershell|command\s+prompt|run\s+dialog|cmd)\b|\bwin\s*\+\s*r\b[^\n]{0,60}\bpaste\b",
        ),
    },
    // ---------------------------------------------------------------- obfuscation (native)
    RuleDef {
        id: "obf.base64-shell-payload",
        category: C::DecodeExecute,
        severity: S::High,
        title: "Encoded command payload",
        description: "A base64 literal that decodes to a shell command, download or code-execution payload.",
        remediation: "Ship readable commands and code.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "obf.hex-encoded-text",
        category: C::DecodeExecute,
        severity: S::Medium,
        title: "Hex-escaped text",
        description: "A long run of \\xNN escapes that decodes to readable text, a way to hide strings from review.",
        remediation: "Write strings in plain text.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "obf.encoded-payload",
        category: C::DecodeExecute,
        severity: S::High,
        title: "Encoded payload",
        description: "A hex, percent-encoded, ROT13 or reversed run whose decoded text triggers other rules (a command, an injection, an exfiltration address).",
        remediation: "Ship readable commands and text.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "obf.embedded-binary",
        category: C::DecodeExecute,
        severity: S::High,
        title: "Executable or archive embedded as text",
        description: "A base64 or hex run that decodes to an executable (ELF, PE, Mach-O) or an archive (ZIP, gzip, 7-Zip, RAR ...).",
        remediation: "Do not ship binaries inside text; ship source.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "file.executable-binary",
        category: C::Skill,
        severity: S::Medium,
        title: "Bundled executable",
        description: "The skill ships a native executable (ELF, PE or Mach-O); it cannot be reviewed as text.",
        remediation: "Ship source, or document where the binary comes from and how to verify it.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "scan.incomplete",
        category: C::Coverage,
        severity: S::Medium,
        title: "Not everything was examined",
        description: "The scan could not read everything whole: files over the size limit (read in part), files past the file-count limit (a keyword pass only), executables, archives, binary data of no harmless type, text mostly not in UTF-8, or unreadable files. The verdict of such a scan is never pass.",
        remediation: "Review what the finding names by hand, or split the skill so that every file is within the limits; ship source instead of binaries and archives.",
        detector: Detector::Native,
    },
    // ---------------------------------------------------------------- SKILL.md frontmatter (native)
    RuleDef {
        id: "skill.frontmatter-missing",
        category: C::Skill,
        severity: S::Low,
        title: "SKILL.md without frontmatter",
        description: "A SKILL.md that does not start with a --- YAML frontmatter block.",
        remediation: "Start SKILL.md with frontmatter holding name and description.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "skill.name-missing",
        category: C::Skill,
        severity: S::Low,
        title: "Skill name missing",
        description: "The frontmatter has no name.",
        remediation: "Add a name: field.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "skill.name-invalid",
        category: C::Skill,
        severity: S::Info,
        title: "Skill name not in the recommended form",
        description: "The name is not lowercase letters, digits and hyphens of at most 64 characters.",
        remediation: "Use a short kebab-case name.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "skill.description-missing",
        category: C::Skill,
        severity: S::Low,
        title: "Skill description missing",
        description: "The frontmatter has no description, so the agent cannot tell when to use the skill.",
        remediation: "Add a description: field.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "skill.allowed-tools-broad",
        category: C::Skill,
        severity: S::Medium,
        title: "Over-broad allowed tools",
        description: "allowed-tools grants every tool or unrestricted shell (*, Bash(*), Bash(sudo:*) ...).",
        remediation: "List only the tools and command prefixes the skill needs.",
        detector: Detector::Native,
    },
    // ---------------------------------------------------------------- capability combinations (native, `capabilities`)
    RuleDef {
        id: "combo.exfiltration",
        category: C::Exfiltration,
        severity: S::Critical,
        title: "Reads sensitive data and sends data out",
        description: "The skill reads a credential store, browser or wallet data, process memory, the whole environment or files found by a secret pattern, and code that runs also sends data over a network channel (HTTP, sockets, DNS, scp/rsync, git push, mail, chat webhooks). Critical when one file does both, high across files.",
        remediation: "Remove the read of sensitive data or the channel out; a skill should not need both.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "combo.remote-code",
        category: C::FetchExecute,
        severity: S::Critical,
        title: "Downloads code and runs it",
        description: "The skill downloads a file or value and runs it elsewhere (a later line or another file runs, chmods, sources or evaluates what was fetched), or evaluates a fetched response in-process. Low for a well-known vendor installer.",
        remediation: "Ship the code with the skill, or pin and verify it by checksum before running it.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "combo.install-hook-exec",
        category: C::CodeExecution,
        severity: S::High,
        title: "Install-time code with side effects",
        description: "Code that runs when the skill or its package is installed (npm preinstall/install/postinstall/prepare scripts and the files they invoke, setup.py, hatch build hooks) evaluates dynamic code, reads secrets, sends data or changes the supply chain (critical when it reads or sends, or downloads and runs); an install hook that only downloads is medium.",
        remediation: "Install hooks should build, not fetch, run or send anything.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "combo.install-persist",
        category: C::Persistence,
        severity: S::High,
        title: "Install-time code persists",
        description: "Code that runs at install time writes shell start-up files, cron entries, autostart items, hooks or interpreter start-up files.",
        remediation: "Nothing should outlive an install without the user's explicit action.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "combo.persist-exec",
        category: C::Persistence,
        severity: S::High,
        title: "Persists and runs fetched or dynamic code",
        description: "Code that runs makes a change that outlives the session (shell start-up files, cron, systemd/launchd, git hooks, sitecustomize/.pth, authorized_keys) and also downloads or runs dynamic code.",
        remediation: "Remove the persistence or the fetched code.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "combo.persistence",
        category: C::Persistence,
        severity: S::Medium,
        title: "Changes that outlive the session",
        description: "Code that runs writes shell start-up files, cron entries, services, login items, git hooks or interpreter start-up files.",
        remediation: "Tell the user and let them make such a change themselves.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "combo.agent-permissions",
        category: C::Persistence,
        severity: S::High,
        title: "Grants the agent broad permissions",
        description: "An agent settings file or command grants unrestricted shell or every permission (Bash(*), bypassPermissions, --dangerously-skip-permissions), so the agent runs commands without asking now and later.",
        remediation: "Grant only the commands the skill needs.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "combo.assembled-command",
        category: C::CodeExecution,
        severity: S::High,
        title: "Assembles a command from pieces",
        description: "Code that runs spells a command word (curl, bash, eval, system, subprocess ...) from string pieces or variables holding pieces (`\"ba\"\"sh\"`, `'sys'+'tem'`, `a=cu; b=rl; $a$b`), so that the word never appears whole.",
        remediation: "Write commands out whole.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "combo.obfuscated-exec",
        category: C::DecodeExecute,
        severity: S::High,
        title: "Runs obfuscated code",
        description: "Code (read with a grammar, decision 0034) runs data it decoded, decompressed or decrypted (base64, zlib, marshal, rot13, hex, Fernet/AES, Buffer.from/atob, `base64 -d | sh`), or strings built from character codes or XOR, or carries a long encoded blob in a file that also runs dynamic code. Critical at install time.",
        remediation: "Ship code as readable source; do not decode code at run time.",
        detector: Detector::Native,
    },
    RuleDef {
        id: "combo.supply-chain",
        category: C::SupplyChain,
        severity: S::High,
        title: "Changes where packages come from",
        description: "A lasting change to package sources or their verification: pip/npm/yarn config set, a written .npmrc/pip.conf/uv.toml, a registry or index on an unknown host, --trusted-host, strict-ssl false, insteadOf rewrites, GOINSECURE/GONOSUMDB.",
        remediation: "Install from the default registries; let the user configure sources.",
        detector: Detector::Native,
    },
];
