//! Token counts for reservations (issue 28, decision 0025): OpenAI's own byte-pair encodings,
//! `o200k_base` for the gpt-4o, gpt-4.1, gpt-5 and o-series families and `cl100k_base` for
//! every other model (gpt-4, gpt-3.5 and names gc does not know), from `tiktoken-rs`, which
//! embeds its encoding files in the binary: nothing is downloaded, at build or at run time.
//!
//! Counting needs less than `tiktoken-rs` keeps: its `CoreBPE` holds each token twice in
//! hash maps of `Vec<u8>` (encoder and decoder), a sorted copy, and 128 clones of the split
//! regex, 23 MiB for `cl100k_base` and 45 MiB for `o200k_base`. So each encoding is read out
//! of a `CoreBPE` once (every token's bytes, by rank), into a [`Ranks`] table: the tokens'
//! bytes end to end, their offsets and an open-addressing index of ranks, about 2 and 4 MiB;
//! the `CoreBPE` is then dropped. The split pattern is tiktoken's own (same `fancy-regex`),
//! and the merge loops below are `tiktoken`'s (`_byte_pair_merge` and
//! `_byte_pair_merge_large`, vendored in `tiktoken-rs`) over that table, so the counts are
//! tiktoken's; `tests::counts_match_tiktoken` checks that on a varied corpus.
//!
//! Each encoding is loaded on its first use, that is by the first run a token limit applies
//! to (a server whose tenants have no token limit never loads one, and idles as before); it
//! then stays loaded. Figures in docs/benchmarks.md (issue 28, "Tokenizer memory").
//!
//! Loading takes a while (tens to hundreds of milliseconds: `tiktoken-rs` decodes its
//! embedded file, then the table is built). [`count`] loads on the calling thread; a stream
//! counting the output it passes on uses [`count_loaded`] instead, which never loads on the
//! caller's thread (an async worker serving other connections): it starts the load on a
//! thread of its own ([`preload`]) and says `None` until the encoding is there.

use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use fancy_regex::Regex;
use tiktoken_rs::CoreBPE;

/// Text beyond this many bytes (per call) is not run through the encoder but estimated at
/// one token per [`BYTES_PER_TOKEN_PAST_LIMIT`] bytes, so a huge prompt costs bounded work.
const ENCODE_MAX_BYTES: usize = 256 * 1024;
/// The estimate past [`ENCODE_MAX_BYTES`]: English text averages about 4 bytes a token; 3
/// leans towards more tokens (a reservation too large is settled back).
const BYTES_PER_TOKEN_PAST_LIMIT: usize = 3;

/// The encoding family of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    O200k,
    Cl100k,
}

impl Encoding {
    /// The family of `model` (a provider prefix such as `openai/` is ignored).
    pub fn of(model: &str) -> Self {
        let name = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        let o_series = name.len() > 1
            && name.starts_with('o')
            && name[1..].starts_with(|c: char| c.is_ascii_digit());
        if name.starts_with("gpt-4o")
            || name.starts_with("gpt-4.1")
            || name.starts_with("gpt-4.5")
            || name.starts_with("gpt-5")
            || name.starts_with("chatgpt-4o")
            || name.starts_with("gpt-oss")
            || o_series
        {
            Self::O200k
        } else {
            Self::Cl100k
        }
    }

    /// The encoding's cell (empty until loaded) and whether a background load was started.
    fn slot(self) -> (&'static OnceLock<Option<Tokenizer>>, &'static AtomicBool) {
        static O200K: (OnceLock<Option<Tokenizer>>, AtomicBool) =
            (OnceLock::new(), AtomicBool::new(false));
        static CL100K: (OnceLock<Option<Tokenizer>>, AtomicBool) =
            (OnceLock::new(), AtomicBool::new(false));
        let (cell, started) = match self {
            Self::O200k => &O200K,
            Self::Cl100k => &CL100K,
        };
        (cell, started)
    }

    /// The encoding, loaded on first use (on this thread, or waiting for a load already
    /// running); `None` only if `tiktoken-rs`'s embedded data could not be read (then counts
    /// are estimates).
    fn tokenizer(self) -> Option<&'static Tokenizer> {
        self.slot()
            .0
            .get_or_init(|| match self {
                Self::O200k => Tokenizer::load(
                    tiktoken_rs::o200k_base().ok()?,
                    O200K_ORDINARY_TOKENS,
                    tiktoken_rs::O200K_BASE_PAT_STR,
                ),
                Self::Cl100k => Tokenizer::load(
                    tiktoken_rs::cl100k_base().ok()?,
                    CL100K_ORDINARY_TOKENS,
                    CL100K_PATTERN,
                ),
            })
            .as_ref()
    }

    /// The encoding if its load has finished (`Some(None)`: it failed), never loading it.
    fn loaded(self) -> Option<Option<&'static Tokenizer>> {
        self.slot().0.get().map(Option::as_ref)
    }

    /// Starts loading the encoding on a thread of its own, once, unless it is loaded.
    fn preload(self) {
        let (cell, started) = self.slot();
        if cell.get().is_some() || started.swap(true, Ordering::AcqRel) {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("gc-tokenizer".into())
            .spawn(move || {
                let _ = self.tokenizer();
            });
        if spawned.is_err() {
            // No thread: the next `count` loads it where it is called.
            started.store(false, Ordering::Release);
        }
    }
}

/// `cl100k_base`'s split pattern, as `tiktoken-rs::cl100k_base` builds it (it does not
/// export it; `O200K_BASE_PAT_STR` it does).
const CL100K_PATTERN: &str = "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s";
/// Ordinary tokens of each encoding (ranks `0..n`; the special tokens come after and are
/// counted as plain text here, as `encode_ordinary` does).
const CL100K_ORDINARY_TOKENS: u32 = 100_256;
const O200K_ORDINARY_TOKENS: u32 = 199_998;
/// Pieces this long or longer go through the heap-based merge, as in tiktoken.
const LARGE_PIECE: usize = 100;

/// One encoding, as much of it as counting needs.
struct Tokenizer {
    split: Regex,
    ranks: Ranks,
}

impl Tokenizer {
    fn load(core: CoreBPE, ordinary: u32, pattern: &str) -> Option<Self> {
        let ranks = Ranks::read(&core, ordinary)?;
        drop(core);
        let split = Regex::new(pattern).ok()?;
        Some(Self { split, ranks })
    }

    /// `tiktoken`'s `encode_ordinary(text).len()`.
    fn count(&self, text: &str) -> usize {
        let mut n = 0usize;
        let mut done = 0;
        for piece in self.split.find_iter(text) {
            match piece {
                Ok(piece) => {
                    n = n.saturating_add(self.ranks.count_piece(piece.as_str().as_bytes()));
                    done = piece.end();
                }
                // The regex gave up (its backtracking limit): estimate the rest.
                Err(_) => {
                    let rest = text.len().saturating_sub(done);
                    return n.saturating_add(rest.div_ceil(BYTES_PER_TOKEN_PAST_LIMIT));
                }
            }
        }
        n
    }
}

/// Token bytes to rank: every ordinary token's bytes end to end in rank order, where each
/// starts, and an open-addressing index (linear probing, at most half full) of `rank + 1`
/// by the hash of the bytes (0: empty).
struct Ranks {
    bytes: Box<[u8]>,
    starts: Box<[u32]>,
    slots: Box<[u32]>,
    longest: usize,
}

impl Ranks {
    /// Reads tokens `0..ordinary` out of `core`; `None` if one is missing, empty or repeated.
    fn read(core: &CoreBPE, ordinary: u32) -> Option<Self> {
        // Two passes, so each table is allocated once at its size.
        let mut total = 0usize;
        for rank in 0..ordinary {
            total = total.checked_add(core.decode_bytes(&[rank]).ok()?.len())?;
        }
        let count = usize::try_from(ordinary).ok()?;
        let mut bytes = Vec::with_capacity(total);
        let mut starts = Vec::with_capacity(count.checked_add(1)?);
        starts.push(0u32);
        let mut longest = 0;
        for rank in 0..ordinary {
            let token = core.decode_bytes(&[rank]).ok()?;
            if token.is_empty() || bytes.len() + token.len() > total {
                return None;
            }
            longest = longest.max(token.len());
            bytes.extend_from_slice(&token);
            starts.push(u32::try_from(bytes.len()).ok()?);
        }
        let mut ranks = Self {
            bytes: bytes.into_boxed_slice(),
            starts: starts.into_boxed_slice(),
            slots: vec![0; count.checked_mul(2)?.next_power_of_two()].into_boxed_slice(),
            longest,
        };
        let mask = ranks.slots.len() - 1;
        for rank in 0..ordinary {
            let token = ranks.token(rank);
            let mut i = hash(token) & mask;
            loop {
                match ranks.slots.get(i).copied()? {
                    0 => break,
                    taken if ranks.token(taken - 1) == token => return None,
                    _ => i = (i + 1) & mask,
                }
            }
            *ranks.slots.get_mut(i)? = rank + 1;
        }
        Some(ranks)
    }

    fn token(&self, rank: u32) -> &[u8] {
        let r = rank as usize;
        match (self.starts.get(r), self.starts.get(r + 1)) {
            (Some(&a), Some(&b)) => self.bytes.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }

    fn get(&self, piece: &[u8]) -> Option<u32> {
        if piece.is_empty() || piece.len() > self.longest {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = hash(piece) & mask;
        loop {
            match self.slots.get(i).copied()? {
                0 => return None,
                slot if self.token(slot - 1) == piece => return Some(slot - 1),
                _ => i = (i + 1) & mask,
            }
        }
    }

    fn rank(&self, piece: &[u8]) -> u32 {
        self.get(piece).unwrap_or(u32::MAX)
    }

    /// The tokens of one piece of the split: `tiktoken`'s `byte_pair_encode(piece).len()`.
    fn count_piece(&self, piece: &[u8]) -> usize {
        if piece.is_empty() {
            0
        } else if self.get(piece).is_some() {
            1
        } else if piece.len() < LARGE_PIECE {
            self.merge_small(piece)
        } else {
            self.merge_large(piece)
        }
    }

    /// `tiktoken`'s `_byte_pair_merge` (`piece` is at least 2 bytes): repeatedly merge the
    /// adjacent pair of lowest rank, the leftmost of equal ones.
    fn merge_small(&self, piece: &[u8]) -> usize {
        let mut parts: Vec<(usize, u32)> = Vec::with_capacity(piece.len() + 1);
        let mut min_rank = (u32::MAX, usize::MAX);
        for i in 0..piece.len() - 1 {
            let rank = self.rank(&piece[i..i + 2]);
            if rank < min_rank.0 {
                min_rank = (rank, i);
            }
            parts.push((i, rank));
        }
        parts.push((piece.len() - 1, u32::MAX));
        parts.push((piece.len(), u32::MAX));
        let get_rank = |parts: &[(usize, u32)], i: usize| {
            if i + 3 < parts.len() {
                self.rank(&piece[parts[i].0..parts[i + 3].0])
            } else {
                u32::MAX
            }
        };
        while min_rank.0 != u32::MAX {
            let i = min_rank.1;
            if i > 0 {
                parts[i - 1].1 = get_rank(&parts, i - 1);
            }
            parts[i].1 = get_rank(&parts, i);
            parts.remove(i + 1);
            min_rank = (u32::MAX, usize::MAX);
            for (i, &(_, rank)) in parts[..parts.len() - 1].iter().enumerate() {
                if rank < min_rank.0 {
                    min_rank = (rank, i);
                }
            }
        }
        parts.len() - 1
    }

    /// `tiktoken`'s `_byte_pair_merge_large`: the same merges with a heap, O(n log n) for
    /// long pieces (a run of one letter is one piece).
    fn merge_large(&self, piece: &[u8]) -> usize {
        let mut state = Vec::with_capacity(piece.len());
        state.push(MergeState {
            prev: usize::MAX,
            end: 1,
            next_end: 2,
            next_rank: u32::MAX,
        });
        let mut heap = BinaryHeap::with_capacity(piece.len());
        for i in 0..piece.len() - 1 {
            if let Some(rank) = self.get(&piece[i..i + 2]) {
                heap.push(Merge { start: i, rank });
                state[i].next_rank = rank;
            }
            state.push(MergeState {
                prev: i,
                end: i + 2,
                next_end: i + 3,
                next_rank: u32::MAX,
            });
        }
        let potential_merge =
            |state: &mut [MergeState], heap: &mut BinaryHeap<Merge>, start: usize, next_end| {
                state[start].next_end = next_end;
                state[start].next_rank = u32::MAX;
                if next_end <= piece.len() {
                    if let Some(rank) = self.get(&piece[start..next_end]) {
                        heap.push(Merge { start, rank });
                        state[start].next_rank = rank;
                    }
                }
            };
        while let Some(left) = heap.pop() {
            if left.rank == u32::MAX {
                break;
            }
            if left.rank != state[left.start].next_rank {
                continue;
            }
            let left_start = left.start;
            let right_start = state[left_start].end;
            let right_end = state[left_start].next_end;
            let right_next_end = state[right_start].next_end;
            state[left_start].end = right_end;
            potential_merge(&mut state, &mut heap, left_start, right_next_end);
            if right_end < state.len() {
                state[right_end].prev = left_start;
            }
            if left_start > 0 {
                let prev_start = state[left_start].prev;
                potential_merge(&mut state, &mut heap, prev_start, right_end);
            }
            state[right_start].next_rank = u32::MAX;
        }
        let mut n = 0;
        let mut i = 0;
        while i < state.len() {
            n += 1;
            i = state[i].end;
        }
        n
    }
}

struct MergeState {
    prev: usize,
    end: usize,
    next_end: usize,
    next_rank: u32,
}

#[derive(PartialEq, Eq)]
struct Merge {
    start: usize,
    rank: u32,
}

impl Ord for Merge {
    /// Lowest rank first, then the leftmost (`BinaryHeap` pops the greatest).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.start.cmp(&self.start))
    }
}

impl PartialOrd for Merge {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// FNV-1a: token bytes are short (at most a few dozen), and the index is private.
fn hash(bytes: &[u8]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // Fold the high bits in: the index masks the low ones.
    (h ^ (h >> 32)) as usize
}

/// The tokens of `text` in `model`'s encoding (special tokens counted as plain text). Loads
/// the encoding on this thread if it is not loaded yet.
pub fn count(model: &str, text: &str) -> u64 {
    count_with(Encoding::of(model).tokenizer(), text)
}

/// [`count`] when `model`'s encoding is loaded; else `None`, and the encoding starts loading
/// on a thread of its own ([`preload`]): this never loads on the calling thread.
pub fn count_loaded(model: &str, text: &str) -> Option<u64> {
    let encoding = Encoding::of(model);
    match encoding.loaded() {
        Some(tokenizer) => Some(count_with(tokenizer, text)),
        None => {
            encoding.preload();
            None
        }
    }
}

/// Starts loading `model`'s encoding on a thread of its own, unless it is loaded or loading
/// (for a caller that will count soon and must not wait for the load where it runs).
pub fn preload(model: &str) {
    Encoding::of(model).preload();
}

fn count_with(tokenizer: Option<&Tokenizer>, text: &str) -> u64 {
    if text.is_empty() {
        return 0;
    }
    let (head, rest) = match text.get(..ENCODE_MAX_BYTES) {
        Some(head) if head.len() < text.len() => (head, text.len() - head.len()),
        // A cut inside a character, or nothing to cut: walk back to a boundary.
        _ if text.len() > ENCODE_MAX_BYTES => {
            let mut cut = ENCODE_MAX_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            (&text[..cut], text.len() - cut)
        }
        _ => (text, 0),
    };
    let encoded = match tokenizer {
        Some(tokenizer) => tokenizer.count(head),
        // Unreachable with the embedded files; an estimate rather than a failed run.
        None => head.len().div_ceil(BYTES_PER_TOKEN_PAST_LIMIT),
    };
    let estimated = rest.div_ceil(BYTES_PER_TOKEN_PAST_LIMIT);
    u64::try_from(encoded.saturating_add(estimated)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_follow_the_model_name() {
        for m in [
            "gpt-4o",
            "gpt-4o-mini",
            "openai/gpt-4.1",
            "gpt-5",
            "o1",
            "o3-mini",
            "o4-mini",
        ] {
            assert_eq!(Encoding::of(m), Encoding::O200k, "{m}");
        }
        for m in ["gpt-4", "gpt-3.5-turbo", "auto", "m-large", "omni", "o"] {
            assert_eq!(Encoding::of(m), Encoding::Cl100k, "{m}");
        }
    }

    #[test]
    fn counts_are_openais() {
        // Known counts: "hello world" is 2 tokens in both encodings; the sentence is 10 (nine
        // words and the stop) in cl100k_base.
        assert_eq!(count("gpt-4o", "hello world"), 2);
        assert_eq!(count("gpt-4", "hello world"), 2);
        assert_eq!(
            count("gpt-4", "The quick brown fox jumps over the lazy dog."),
            10
        );
        assert_eq!(count("gpt-4", ""), 0);
    }

    /// Text of every kind the encodings split differently: prose, code, CJK, Cyrillic,
    /// emoji (with joiners), contractions, digits, whitespace runs and newlines, and long
    /// runs of one character (pieces of 100 bytes and more take the heap-based merge).
    fn corpus() -> Vec<String> {
        let mut texts: Vec<String> = [
            "hello world",
            "The quick brown fox jumps over the lazy dog.",
            "It's, they're, we've, I'm, you'll, he'd, IT'S THEY'RE Don't",
            "fn main() {\n    let x: Vec<u32> = (0..10).map(|i| i * 2).collect();\n    println!(\"{x:?}\");\n}\n",
            "SELECT id, name FROM users WHERE email LIKE '%@example.com' ORDER BY 2 DESC;",
            "<div class=\"a\">\r\n\t<span>x &amp; y</span>\r\n</div>",
            "東京は日本の首都です。人工知能の研究が進んでいる。ひらがなとカタカナ。",
            "我们今天去公园散步，然后吃了一顿很好吃的晚饭。",
            "Привет, как дела? Всё хорошо, спасибо. ПРОГРАММИРОВАНИЕ",
            "Γειά σου κόσμε· مرحبا بالعالم · שלום עולם · नमस्ते दुनिया",
            "🙂🚀👩‍👩‍👧 emoji 🏳️‍🌈 and flags 🇫🇷🇯🇵 ✔︎",
            "1234567890 3.14159 1,000,000 0x7fffffff 2026-11-27T06:00:00Z",
            "   leading and trailing   \n\n\n   \t\t  \n",
            "a\n\nb\r\n\r\nc   \n   d\t\te",
            "<|endoftext|> special tokens as plain text <|fim_prefix|>",
            "naïve café résumé coöperate Zürich straße ÆØÅ",
            "\u{0}\u{1}\u{7f} control \u{200b}zero\u{feff}width",
            "https://example.com/path/to/page?query=1&x=%20y#frag",
            "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for (c, n) in [
            ("a", 5000),
            ("ab", 700),
            ("é", 300),
            ("日", 400),
            (" ", 3000),
            ("\n", 500),
            ("\t ", 200),
            ("🙂", 150),
            ("0", 1000),
            ("!", 999),
            ("=-", 123),
            ("x ", 800),
        ] {
            texts.push(c.repeat(n));
        }
        // Deterministic pseudo-random mixes of the pieces above.
        let alphabet: Vec<char> = "aZ é日\n\t1'🙂.,Щ-_\r{}ab  xyz東京".chars().collect();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in [10, 100, 1000, 10_000] {
            let mut t = String::new();
            for _ in 0..len {
                seed = seed
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                t.push(alphabet[(seed >> 33) as usize % alphabet.len()]);
            }
            texts.push(t);
        }
        texts.push(texts.join(""));
        texts
    }

    #[test]
    fn counts_match_tiktoken() {
        let texts = corpus();
        for (encoding, model, reference) in [
            (
                Encoding::Cl100k,
                "gpt-4",
                tiktoken_rs::cl100k_base_singleton(),
            ),
            (
                Encoding::O200k,
                "gpt-4o",
                tiktoken_rs::o200k_base_singleton(),
            ),
        ] {
            let ours = encoding.tokenizer().expect("encoding loads");
            let mut total = 0;
            for text in &texts {
                let want = reference.encode_ordinary(text).len();
                assert_eq!(ours.count(text), want, "{encoding:?} {text:?}");
                assert_eq!(count(model, text), want as u64, "{encoding:?} {text:?}");
                total += want;
            }
            assert!(total > 10_000, "{total}");
        }
    }

    #[test]
    fn every_token_is_one_token() {
        // Each ordinary token's bytes (as text where they are UTF-8) count as one token, and
        // the index finds every rank.
        for encoding in [Encoding::Cl100k, Encoding::O200k] {
            let ranks = &encoding.tokenizer().expect("encoding loads").ranks;
            let n = ranks.starts.len() - 1;
            for rank in 0..u32::try_from(n).expect("fits") {
                let token = ranks.token(rank);
                assert_eq!(ranks.get(token), Some(rank), "{encoding:?} {rank}");
                assert_eq!(ranks.count_piece(token), 1);
            }
            assert_eq!(ranks.get(b""), None);
        }
    }

    #[test]
    fn count_loaded_never_loads_on_the_caller_and_then_counts_as_count() {
        // `o200k` may already be loaded by another test; either way `count_loaded` answers
        // at once, and once the background load is done it counts what `count` counts.
        let text = "The quick brown fox jumps over the lazy dog.";
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        let got = loop {
            if let Some(n) = count_loaded("gpt-4o", text) {
                break n;
            }
            assert!(
                Encoding::O200k.slot().1.load(Ordering::Acquire),
                "load started"
            );
            assert!(std::time::Instant::now() < deadline, "never loaded");
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert_eq!(got, count("gpt-4o", text));
        assert!(got > 5, "{got}");
        assert_eq!(count_loaded("gpt-4o", ""), Some(0));
    }

    #[test]
    fn huge_text_is_bounded_and_never_undercounted_to_zero() {
        let text = "é".repeat(400 * 1024);
        let n = count("gpt-4o", &text);
        assert!(n > 100_000, "{n}");
    }
}
