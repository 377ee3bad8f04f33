//! Timing: open a GGUF file and dequantize every tensor once.
//! `cargo run --release -p aneforge-gguf --example dequantize_all -- model.gguf`

use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: dequantize_all <file.gguf>")?;
    let start = Instant::now();
    let file = aneforge_gguf::GgufFile::open(&path)?;
    let opened = start.elapsed();
    let (mut values, mut bytes) = (0u64, 0u64);
    for info in file.tensor_infos() {
        let tensor = file.tensor(&info.name)?;
        values += tensor.dequantize()?.len() as u64;
        bytes += info.n_bytes;
    }
    let total = start.elapsed();
    println!(
        "{path}: {} tensors, {} metadata keys; open {:.1} ms; dequantize {values} values \
         from {:.1} MB in {:.1} ms ({:.0} Mvalues/s)",
        file.tensor_infos().len(),
        file.metadata().entries().len(),
        opened.as_secs_f64() * 1e3,
        bytes as f64 / 1e6,
        (total - opened).as_secs_f64() * 1e3,
        values as f64 / (total - opened).as_secs_f64() / 1e6,
    );
    Ok(())
}
