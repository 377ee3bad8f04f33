//! The GGUF fuzz target of `crates/aneforge/fuzz` as a short deterministic mutation fuzz from a
//! valid seed; any panic fails the test and prints the input. `ANEFORGE_FUZZ_ITERS=<n>` sets the
//! number of mutants (default 1500).

#[path = "../../aneforge/fuzz/src/gguf.rs"]
mod gguf;
#[path = "../../aneforge/fuzz/src/mutate.rs"]
mod mutate;

#[test]
fn seed_is_a_valid_file() {
    // The seed's F32 tensor holds 0, 0.5, ..., 3.5 (written as i · 0.5).
    let p = std::env::temp_dir().join(format!("aneforge-gguf-seed-{}.gguf", std::process::id()));
    std::fs::write(&p, gguf::seed()).unwrap();
    let f = aneforge_gguf::GgufFile::open(&p).unwrap();
    let w = f.tensor("w").unwrap().dequantize().unwrap();
    drop(f);
    std::fs::remove_file(&p).unwrap();
    assert_eq!(w, [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]);
}

#[test]
fn fuzz_gguf() {
    let iters = std::env::var("ANEFORGE_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500);
    let n = mutate::run(&[gguf::seed()], iters, 0x16, &gguf::gguf);
    eprintln!("gguf: {n} executions, 0 crashes");
}
