//! The compression report of a loaded decoder: one row per weight constant with its encoding,
//! fp16 and encoded bytes and reconstruction error.

use crate::compress::CompressionEntry;

use super::runtime::Llm;

impl Llm {
    /// One row per projection constant, sorted by name: the shared weights made at load (GGUF
    /// exact int8 blocks or fp16; Hugging Face fp16 with its rounding error) and the weights
    /// the compiler encoded for `compress` (decode programs; prefill programs hold the same).
    pub fn compression_report(&self) -> Vec<CompressionEntry> {
        let mut rows = self.src.report();
        rows.extend(self.decode.iter().flat_map(|c| c.report.iter().cloned()));
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        rows
    }
}
