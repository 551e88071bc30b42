//! Scanner throughput: a 10 MiB mix of skill-like text and code on one thread, and a
//! 5,000-file in-memory repository. `cargo bench -p gc-guard --bench scan`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gc_guard::eval::{benchmark_files, benchmark_text, BENCHMARK_BYTES};
use gc_guard::Scanner;
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let scanner = match Scanner::new() {
        Ok(s) => s,
        Err(e) => panic!("rules must compile: {e}"),
    };
    let text = benchmark_text(BENCHMARK_BYTES);
    let mut g = c.benchmark_group("scan");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("text_10mib", |b| {
        b.iter(|| black_box(scanner.scan_text(None, black_box(&text))))
    });
    g.finish();

    let files = benchmark_files(5000);
    let bytes: usize = files.iter().map(|f| f.1.len()).sum();
    let mut g = c.benchmark_group("repo");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("files_5000", |b| {
        b.iter(|| {
            black_box(scanner.scan_files(files.iter().map(|(p, b)| (p.as_str(), b.as_slice()))))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
