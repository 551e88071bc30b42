//! Measures a tokenizer's cost (issue 28 follow-up, docs/benchmarks.md): RSS before and after
//! loading one encoding, the load time, and the time to count a 4 KiB and a 256 KiB prompt.
//! One encoding per process, so each figure starts from the same baseline:
//!
//! ```text
//! cargo run --release -p gc-gateway --example tokenizer_probe -- gc o200k
//! cargo run --release -p gc-gateway --example tokenizer_probe -- tiktoken cl100k
//! ```
//!
//! It allocates with jemalloc as `gc-server` does (same built-in settings, `.cargo/config.toml`),
//! so memory freed after loading goes back to the system as it does in the server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn rss_line(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn rss_kib() -> u64 {
    (rss_line("VmRSS:") * 1024.0) as u64
}

/// Mixed text: English prose, code, CJK, Cyrillic, emoji and whitespace runs.
fn sample(bytes: usize) -> String {
    let parts = [
        "The quick brown fox jumps over the lazy dog, and then it doesn't stop running. ",
        "fn main() {\n    let x: Vec<u32> = (0..10).map(|i| i * 2).collect();\n}\n",
        "東京は日本の首都です。人工知能の研究が進んでいる。",
        "Привет, как дела? Всё хорошо, спасибо. ",
        "🙂🚀 emoji 👩‍👩‍👧 ",
        "\n\n    \t  trailing   \n",
    ];
    let mut s = String::new();
    let mut i = 0;
    while s.len() < bytes {
        s.push_str(parts[i % parts.len()]);
        i += 1;
    }
    let mut cut = bytes;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let lib = args.get(1).map(String::as_str).unwrap_or("gc");
    let enc = args.get(2).map(String::as_str).unwrap_or("cl100k");
    let small = sample(4 * 1024);
    let large = sample(256 * 1024);
    let before = rss_kib();
    eprintln!(
        "baseline anon {:.1} file {:.1}",
        rss_line("RssAnon:"),
        rss_line("RssFile:")
    );
    let t = Instant::now();
    let counter: Box<dyn Fn(&str) -> usize + Sync> = match (lib, enc) {
        ("gc", "cl100k") => Box::new(|s| gc_gateway::tokens::count("gpt-4", s) as usize),
        ("gc", "o200k") => Box::new(|s| gc_gateway::tokens::count("gpt-4o", s) as usize),
        ("tiktoken", "cl100k") => {
            let tok = tiktoken_rs::cl100k_base().unwrap();
            Box::new(move |s| tok.encode_ordinary(s).len())
        }
        ("tiktoken", "o200k") => {
            let tok = tiktoken_rs::o200k_base().unwrap();
            Box::new(move |s| tok.encode_ordinary(s).len())
        }
        ("regex", "o200k") => {
            let re = fancy_regex::Regex::new(tiktoken_rs::O200K_BASE_PAT_STR).unwrap();
            Box::new(move |s| re.find_iter(s).count())
        }
        _ => panic!("usage: tokenizer_probe gc|tiktoken cl100k|o200k, or regex o200k (the split regex alone)"),
    };
    // gc's counter loads on first use: the first count forces it.
    let _ = counter("x");
    let load = t.elapsed();
    let after = rss_kib();
    let mut line = format!(
        "{lib} {enc}: RSS {:.1} -> {:.1} MiB (+{:.1} MiB), load {:.1} ms",
        before as f64 / 1024.0,
        after as f64 / 1024.0,
        (after.saturating_sub(before)) as f64 / 1024.0,
        load.as_secs_f64() * 1e3
    );
    for (name, text, reps) in [("4 KiB", &small, 200), ("256 KiB", &large, 5)] {
        let t = Instant::now();
        let mut n = 0;
        for _ in 0..reps {
            n = counter(text);
        }
        let per = t.elapsed().as_secs_f64() / f64::from(reps);
        line.push_str(&format!(
            ", {name}: {n} tokens in {:.3} ms ({:.1} tokens/µs)",
            per * 1e3,
            n as f64 / (per * 1e6)
        ));
    }
    line.push_str(&format!(
        ", RSS at end {:.1} MiB",
        rss_kib() as f64 / 1024.0
    ));
    // Other threads keep counting after the main one (a server's workers): what that adds.
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| counter(&small));
        }
    });
    line.push_str(&format!(
        ", after 4 more threads counted {:.1} MiB",
        rss_kib() as f64 / 1024.0
    ));
    // jemalloc gives freed pages back after its decay time (1 s here), on allocator activity.
    for _ in 0..30 {
        std::thread::sleep(Duration::from_millis(70));
        for _ in 0..100 {
            let _ = std::hint::black_box(vec![0u8; 64]);
            let _ = std::hint::black_box(String::from("x").repeat(100));
        }
    }
    line.push_str(&format!(
        ", 2 s later {:.1} MiB (anon {:.1}, file {:.1}), peak {:.1} MiB",
        rss_kib() as f64 / 1024.0,
        rss_line("RssAnon:"),
        rss_line("RssFile:"),
        rss_line("VmHWM:")
    ));
    println!("{line}");
}
