//! Partial scans of what is too large to read whole (see `coverage.rs`).
//!
//! A file over the per-file limit is read as a stream, never held whole: its first
//! `max_file_bytes / 2` (cut at a line end) and its last `max_file_bytes / 4` are scanned with
//! every rule; in between, one Aho-Corasick pass over every byte looks for the strongest
//! indicators (`coverage::INDICATORS`) and the line of each hit (a ±1 KiB window on
//! very long lines) is scanned with every rule, at most `MAX_WINDOWS` lines per file.
//! Memory stays bounded (a 64 KiB read buffer, an unfinished line of at most 8 KiB, twice the
//! tail) and time is one pass over the bytes plus the bounded rule scans. Line numbers are
//! those of the whole file.

use crate::model::{Finding, Limits};
use crate::scanner::Scanner;
use std::collections::HashMap;
use std::io::{self, Read};

/// Indicator lines scanned with every rule per file, at most.
pub(crate) const MAX_WINDOWS: usize = 512;
/// Indicator lines scanned with every rule per scan (all partial scans together), at most, so
/// a repository of many over-size or padded files costs no more than a bounded number of
/// small scans.
pub(crate) const MAX_WINDOWS_PER_SCAN: usize = 4096;
/// Bytes on each side of an indicator on a line longer than twice this.
const WINDOW: usize = 1024;
/// Bytes read at a time.
const CHUNK: usize = 64 * 1024;
/// Bytes of an unfinished line kept between reads, at most.
const MAX_CARRY: usize = 8 * 1024;
/// Kept of a cut line, so an indicator across the cut is still found.
const OVERLAP: usize = 64;
/// Findings of one rule in one file, and in all, at most (as for a whole file).
const MAX_PER_RULE: usize = 20;
const MAX_FINDINGS: usize = 200;

/// Bytes read with every rule at the start of an over-size file.
pub(crate) fn head_bytes(limits: &Limits) -> usize {
    usize::try_from(limits.max_file_bytes / 2)
        .unwrap_or(usize::MAX)
        .max(1)
}

/// Bytes read with every rule at the end of an over-size file.
pub(crate) fn tail_bytes(limits: &Limits) -> usize {
    usize::try_from(limits.max_file_bytes / 4)
        .unwrap_or(usize::MAX)
        .max(1)
}

/// What a partial scan found and read.
#[derive(Debug, Default)]
pub(crate) struct Partial {
    pub findings: Vec<Finding>,
    /// Findings left out by the per-file caps.
    pub truncated: u64,
    /// Bytes of the file.
    pub total_bytes: u64,
    /// Bytes scanned with every rule (head, tail, indicator lines).
    pub bytes_scanned: u64,
    /// Indicator lines scanned with every rule.
    pub windows: u64,
    /// Indicator lines not scanned (past the file's or the scan's cap).
    pub windows_dropped: u64,
}

impl Scanner {
    /// Scans a file over the size limit in part: `prefix` holds its first bytes (at least the
    /// head), `rest` the remainder. Only I/O errors of `rest` fail.
    pub(crate) fn scan_partial(
        &self,
        path: Option<&str>,
        prefix: &[u8],
        rest: &mut dyn Read,
        limits: &Limits,
        max_windows: usize,
    ) -> io::Result<Partial> {
        let head_len = head_bytes(limits).min(prefix.len());
        let head = prefix.get(..head_len).unwrap_or(prefix);
        let head_end = match memchr::memrchr(b'\n', head) {
            Some(i) if i + 1 >= head_len / 2 => i + 1,
            _ => head_len,
        };
        let head = prefix.get(..head_end).unwrap_or(prefix);
        let (head_findings, head_truncated) =
            self.scan_text_counted(path, &String::from_utf8_lossy(head));
        let mut stream = Stream::new(
            self,
            path,
            head_end as u64,
            memchr::memchr_iter(b'\n', head).count() as u64,
            Some(tail_bytes(limits)),
            max_windows,
        );
        // A head cut inside a line: the stream continues that line.
        let line_start = memchr::memrchr(b'\n', head).map_or(0, |i| i + 1);
        stream.carry_col = chars(head.get(line_start..).unwrap_or(&[]));
        stream.out.findings = head_findings;
        stream.out.truncated = head_truncated;
        stream.out.bytes_scanned = head_end as u64;
        // In read-sized pieces, so the unfinished line carried stays small.
        for piece in prefix.get(head_end..).unwrap_or(&[]).chunks(CHUNK) {
            stream.feed(piece);
        }
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match rest.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            stream.feed(buf.get(..n).unwrap_or(&[]));
        }
        Ok(stream.finish())
    }

    /// The keyword pass alone over a text held in memory (files past the count limit): each
    /// indicator line scanned with every rule.
    pub(crate) fn scan_indicator_lines(
        &self,
        path: Option<&str>,
        bytes: &[u8],
        max_windows: usize,
    ) -> Partial {
        let mut stream = Stream::new(self, path, 0, 0, None, max_windows);
        for piece in bytes.chunks(CHUNK) {
            stream.feed(piece);
        }
        stream.finish()
    }
}

struct Stream<'a> {
    scanner: &'a Scanner,
    path: Option<&'a str>,
    /// Bytes not processed yet (an unfinished line).
    carry: Vec<u8>,
    /// Offset in the file of `carry[0]`, newlines before it, and characters of its line
    /// before it (when a long line was cut).
    carry_off: u64,
    carry_line: u64,
    carry_col: u64,
    /// Where the stream started (after the head).
    start_off: u64,
    /// The last bytes seen (between `tail_cap` and twice that), when a tail is scanned.
    tail: Vec<u8>,
    tail_cap: Option<usize>,
    tail_off: u64,
    tail_line: u64,
    /// Indicator windows scanned so far (at most `max_windows`), and the end (offset in the
    /// file) of the last one.
    windows: usize,
    max_windows: usize,
    covered_to: u64,
    out: Partial,
}

impl<'a> Stream<'a> {
    fn new(
        scanner: &'a Scanner,
        path: Option<&'a str>,
        start_off: u64,
        start_line: u64,
        tail_cap: Option<usize>,
        max_windows: usize,
    ) -> Self {
        Stream {
            scanner,
            path,
            carry: Vec::new(),
            carry_off: start_off,
            carry_line: start_line,
            carry_col: 0,
            start_off,
            tail: Vec::new(),
            tail_cap,
            tail_off: start_off,
            tail_line: start_line,
            windows: 0,
            max_windows: max_windows.min(MAX_WINDOWS),
            covered_to: 0,
            out: Partial {
                total_bytes: start_off,
                ..Partial::default()
            },
        }
    }

    fn feed(&mut self, data: &[u8]) {
        self.out.total_bytes += data.len() as u64;
        self.carry.extend_from_slice(data);
        if let Some(i) = memchr::memrchr(b'\n', &self.carry) {
            self.process(i + 1, false);
        }
        if self.carry.len() > MAX_CARRY {
            let n = self.carry.len() - OVERLAP;
            self.process(n, true);
        }
    }

    /// Runs the indicator pass over `carry[..n]` and moves it to the tail. `mid_line`: the
    /// region ends inside a line.
    fn process(&mut self, n: usize, mid_line: bool) {
        let carry = std::mem::take(&mut self.carry);
        let n = n.min(carry.len());
        let region = carry.get(..n).unwrap_or(&[]);
        // Bookkeeping advanced in order with the hits, so that every byte is looked at a
        // bounded number of times (a long line full of indicators stays linear): newlines
        // before `pos`, the start of the line holding `pos`, and its characters up to `pos`.
        let mut pos = 0usize;
        let mut line = self.carry_line;
        let mut ls = 0usize;
        let mut col_at_pos = self.carry_col;
        for m in self.scanner.indicators.find_iter(region) {
            let p = m.start();
            if self.carry_off + (p as u64) < self.covered_to {
                continue;
            }
            let skipped = region.get(pos..p).unwrap_or(&[]);
            match memchr::memrchr(b'\n', skipped) {
                Some(i) => {
                    line += memchr::memchr_iter(b'\n', skipped).count() as u64;
                    ls = pos + i + 1;
                    col_at_pos = chars(region.get(ls..p).unwrap_or(&[]));
                }
                None => col_at_pos += chars(skipped),
            }
            pos = p;
            // The line's end, looked for no further than a short line reaches.
            let ahead = region.get(p..n.min(p + 2 * WINDOW + 1)).unwrap_or(&[]);
            let le = memchr::memchr(b'\n', ahead).map(|i| p + i);
            let (ws, we) = match le {
                Some(le) if le - ls <= 2 * WINDOW => (ls, le),
                _ => (
                    p.saturating_sub(WINDOW).max(ls),
                    (m.end() + WINDOW).min(le.unwrap_or(n)),
                ),
            };
            // A window cut at the end of a region inside a line covers only up to its match:
            // the overlap kept for the next region is searched again.
            let covered = if mid_line && we == n { m.end() } else { we };
            self.covered_to = self.carry_off + covered as u64;
            if self.windows >= self.max_windows {
                self.out.windows_dropped += 1;
                continue;
            }
            self.windows += 1;
            let col = col_at_pos.saturating_sub(chars(region.get(ws..p).unwrap_or(&[])));
            let window = region.get(ws..we).unwrap_or(&[]);
            self.out.bytes_scanned += window.len() as u64;
            let (found, truncated) = self
                .scanner
                .scan_text_counted(self.path, &String::from_utf8_lossy(window));
            self.out.truncated += truncated;
            for mut f in found.into_iter().filter(|f| keep_out_of_place(&f.rule_id)) {
                f.line = to_u32(line + u64::from(f.line));
                if f.line == to_u32(line + 1) {
                    f.column = to_u32(u64::from(f.column) + col);
                }
                self.out.findings.push(f);
            }
        }
        let newlines = memchr::memchr_iter(b'\n', region).count() as u64;
        if mid_line {
            self.carry_col += chars(region);
        } else {
            self.carry_col = 0;
        }
        if let Some(cap) = self.tail_cap {
            self.tail.extend_from_slice(region);
            if self.tail.len() > 2 * cap {
                self.drop_tail_front(self.tail.len() - cap);
            }
        }
        self.carry_line += newlines;
        self.carry_off += n as u64;
        self.carry = carry.get(n..).unwrap_or(&[]).to_vec();
    }

    fn drop_tail_front(&mut self, k: usize) {
        let k = k.min(self.tail.len());
        let dropped = self.tail.get(..k).unwrap_or(&[]);
        self.tail_line += memchr::memchr_iter(b'\n', dropped).count() as u64;
        self.tail_off += k as u64;
        self.tail.drain(..k);
    }

    fn finish(mut self) -> Partial {
        let n = self.carry.len();
        self.process(n, true);
        if let Some(cap) = self.tail_cap {
            if self.tail.len() > cap {
                self.drop_tail_front(self.tail.len() - cap);
            }
            // Start at a line when the tail does not begin where the stream began.
            if self.tail_off > self.start_off {
                if let Some(i) = memchr::memchr(b'\n', &self.tail) {
                    self.drop_tail_front(i + 1);
                }
            }
            let tail = std::mem::take(&mut self.tail);
            self.out.bytes_scanned += tail.len() as u64;
            let (found, truncated) = self
                .scanner
                .scan_text_counted(self.path, &String::from_utf8_lossy(&tail));
            self.out.truncated += truncated;
            for mut f in found.into_iter().filter(|f| keep_out_of_place(&f.rule_id)) {
                f.line = to_u32(self.tail_line + u64::from(f.line));
                self.out.findings.push(f);
            }
        }
        self.out.windows = self.windows as u64;
        let (findings, dropped) = dedupe_and_cap(std::mem::take(&mut self.out.findings));
        self.out.findings = findings;
        self.out.truncated += dropped;
        self.out
    }
}

/// Findings that make sense away from the start of a file (the SKILL.md frontmatter checks
/// would fire on every tail and window).
fn keep_out_of_place(rule_id: &str) -> bool {
    !rule_id.starts_with("skill.")
}

/// One finding per rule and line (the most severe), in line order, within the per-file caps.
fn dedupe_and_cap(findings: Vec<Finding>) -> (Vec<Finding>, u64) {
    let mut best: HashMap<(String, u32), Finding> = HashMap::new();
    for f in findings {
        let key = (f.rule_id.clone(), f.line);
        match best.get(&key) {
            Some(old) if old.severity >= f.severity => {}
            _ => {
                best.insert(key, f);
            }
        }
    }
    let mut all: Vec<Finding> = best.into_values().collect();
    all.sort_by(|a, b| (a.line, a.column, &a.rule_id).cmp(&(b.line, b.column, &b.rule_id)));
    let mut per_rule: HashMap<String, usize> = HashMap::new();
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    for f in all {
        let n = per_rule.entry(f.rule_id.clone()).or_insert(0);
        if *n >= MAX_PER_RULE || kept.len() >= MAX_FINDINGS {
            dropped += 1;
            continue;
        }
        *n += 1;
        kept.push(f);
    }
    (kept, dropped)
}

/// Characters (UTF-8 scalar values, counting invalid bytes as one each) in `bytes`.
fn chars(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|b| (**b & 0xc0) != 0x80).count() as u64
}

fn to_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
