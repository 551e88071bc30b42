//! `cargo run --release -p gc-guard --example throughput`: the scanner's throughput on the
//! 10 MiB benchmark text (wall clock and thread CPU time), for profiling.

fn main() {
    let scanner = match gc_guard::Scanner::new() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rules: {e}");
            return;
        }
    };
    let t = gc_guard::eval::throughput(&scanner, 10);
    println!("wall {:.1} MiB/s, cpu {:?} MiB/s", t.wall, t.cpu);
}
