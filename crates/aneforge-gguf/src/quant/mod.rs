//! Dequantization kernels, one per ggml type this crate can decode: plain floats
//! ([`float`]), the 32-element legacy blocks ([`legacy`]) and the 256-element k-quants
//! ([`kquant`]). Every kernel repeats the `gguf` package's float32 operations in the same
//! order (no fused multiply-add), so the results are bit-identical to its `dequantize`.

pub mod exact;
pub mod float;
pub mod kquant;
pub mod legacy;

use crate::tensors::GgmlType;

/// A kernel: decodes whole blocks of `data` (`k * type_size` bytes) into `out`
/// (`k * block_size` values); callers pass matching lengths (extra bytes/values are ignored).
pub type Kernel = fn(&[u8], &mut [f32]);

/// The kernel for `ty`, or `None` when this crate cannot dequantize it (IQ*, TQ*, MXFP4,
/// NVFP4, Q1_0, Q8_1 and the integer types).
pub fn kernel(ty: GgmlType) -> Option<Kernel> {
    Some(match ty {
        GgmlType::F32 => float::f32_le,
        GgmlType::F16 => float::f16_le,
        GgmlType::BF16 => float::bf16_le,
        GgmlType::Q4_0 => legacy::q4_0,
        GgmlType::Q4_1 => legacy::q4_1,
        GgmlType::Q5_0 => legacy::q5_0,
        GgmlType::Q5_1 => legacy::q5_1,
        GgmlType::Q8_0 => legacy::q8_0,
        GgmlType::Q2_K => kquant::q2_k,
        GgmlType::Q3_K => kquant::q3_k,
        GgmlType::Q4_K => kquant::q4_k,
        GgmlType::Q5_K => kquant::q5_k,
        GgmlType::Q6_K => kquant::q6_k,
        GgmlType::Q8_K => kquant::q8_k,
        _ => return None,
    })
}

/// Run `decode` on each `TS`-byte block of `data` and its `BS`-value slot of `out`.
fn for_blocks<const TS: usize, const BS: usize>(
    data: &[u8],
    out: &mut [f32],
    decode: impl Fn(&[u8; TS], &mut [f32; BS]),
) {
    for (block, values) in data.chunks_exact(TS).zip(out.chunks_exact_mut(BS)) {
        if let (Ok(block), Ok(values)) = (block.try_into(), values.try_into()) {
            decode(block, values);
        }
    }
}

/// The little-endian IEEE half at `bytes[at..at + 2]`, widened exactly to f32.
fn f16_at(bytes: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([bytes[at], bytes[at + 1]])).to_f32()
}

/// Deterministic values and block packing helpers shared by the kernel tests.
#[cfg(test)]
pub(crate) mod testutil {
    /// A xorshift generator: reproducible test data without a dependency.
    pub(crate) struct Rng(u64);

    impl Rng {
        pub(crate) fn new(seed: u64) -> Self {
            Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
        }
        /// Uniform in `0..n`.
        pub(crate) fn below(&mut self, n: u32) -> u8 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % u64::from(n)) as u8
        }
        /// A half-precision scale in about ±[2^-8, 2), as (its bytes, its exact value).
        pub(crate) fn scale(&mut self) -> ([u8; 2], f64) {
            let mantissa = f64::from(self.below(250)) / 256.0 + 0.5;
            let exponent = i32::from(self.below(8)) - 7;
            let sign = if self.below(2) == 0 { 1.0 } else { -1.0 };
            let h = half::f16::from_f64(sign * mantissa * 2f64.powi(exponent));
            (h.to_bits().to_le_bytes(), h.to_f64())
        }
    }

    /// Assert `got` equals the f64 `expected` values rounded once to f32, bit for bit.
    pub(crate) fn assert_bits(got: &[f32], expected: &[f64]) {
        assert_eq!(got.len(), expected.len());
        for (i, (&g, &e)) in got.iter().zip(expected).enumerate() {
            assert_eq!(g.to_bits(), (e as f32).to_bits(), "value {i}: {g} vs {e}");
        }
    }
}
