//! Exact int8 views of the symmetric 32-element blocks: every Q8_0, Q4_0 and Q5_0 element is
//! `code · d` with a signed code that fits int8 and the block's f16 scale `d`, which is
//! blockwise int8 with block 32 — the same values [`super::kernel`] produces, with no rounding.
//! Every Q4_1 and Q5_1 element is `d · q + m` with an unsigned 4- or 5-bit code and the block's
//! f16 scale and minimum, computed in f32 as the kernel does ([`affine_blocks`]).

use half::f16;

use super::legacy::{five_bits, nibble};
use crate::tensors::GgmlType;

/// Elements per legacy block.
pub const BLOCK: usize = 32;

/// Codes (one per element, in file order) and one f16 scale per 32-element block.
#[derive(Clone, Debug, PartialEq)]
pub struct Int8Blocks {
    pub codes: Vec<i8>,
    pub scales: Vec<f16>,
}

/// Reads the signed code of element `j` from one block's bytes.
type CodeOf = fn(&[u8], usize) -> i8;

/// The int8 codes and scales of `data` (whole blocks of type `ty`), or `None` when `ty` is not
/// one of the symmetric kinds (Q8_0, Q4_0, Q5_0). Trailing bytes short of a block are ignored.
pub fn int8_blocks(ty: GgmlType, data: &[u8]) -> Option<Int8Blocks> {
    let (size, code): (usize, CodeOf) = match ty {
        GgmlType::Q8_0 => (34, |b, j| b[2 + j] as i8),
        GgmlType::Q4_0 => (18, |b, j| nibble(&b[2..], j) as i8 - 8),
        GgmlType::Q5_0 => (22, |b, j| {
            let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
            five_bits(&b[6..], qh, j) as i8 - 16
        }),
        _ => return None,
    };
    let blocks = data.len() / size;
    let mut out = Int8Blocks {
        codes: Vec::with_capacity(blocks * BLOCK),
        scales: Vec::with_capacity(blocks),
    };
    for b in data.chunks_exact(size) {
        out.scales.push(f16::from_le_bytes([b[0], b[1]]));
        out.codes.extend((0..BLOCK).map(|j| code(b, j)));
    }
    Some(out)
}

/// Reads the unsigned code of element `j` from one block's bytes.
type UnsignedCodeOf = fn(&[u8], usize) -> u8;

/// Unsigned codes (one per element, in file order) with one f16 scale and one f16 minimum per
/// 32-element block: element = `d · q + m` in f32.
#[derive(Clone, Debug, PartialEq)]
pub struct AffineBlocks {
    /// Code bits: 4 (Q4_1) or 5 (Q5_1).
    pub bits: u32,
    pub codes: Vec<u8>,
    pub scales: Vec<f16>,
    pub mins: Vec<f16>,
}

/// The codes, scales and minimums of `data` (whole blocks of type `ty`), or `None` when `ty` is
/// not Q4_1 or Q5_1. Trailing bytes short of a block are ignored.
pub fn affine_blocks(ty: GgmlType, data: &[u8]) -> Option<AffineBlocks> {
    let (size, bits, code): (usize, u32, UnsignedCodeOf) = match ty {
        GgmlType::Q4_1 => (20, 4, |b, j| nibble(&b[4..], j)),
        GgmlType::Q5_1 => (24, 5, |b, j| {
            let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
            five_bits(&b[8..], qh, j)
        }),
        _ => return None,
    };
    let blocks = data.len() / size;
    let mut out = AffineBlocks {
        bits,
        codes: Vec::with_capacity(blocks * BLOCK),
        scales: Vec::with_capacity(blocks),
        mins: Vec::with_capacity(blocks),
    };
    for b in data.chunks_exact(size) {
        out.scales.push(f16::from_le_bytes([b[0], b[1]]));
        out.mins.push(f16::from_le_bytes([b[2], b[3]]));
        out.codes.extend((0..BLOCK).map(|j| code(b, j)));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::kernel;
    use crate::quant::testutil::Rng;

    /// Random bytes with finite f16 scales in the first two bytes of each block.
    fn blocks(rng: &mut Rng, size: usize, n: usize) -> Vec<u8> {
        let mut data: Vec<u8> = (0..size * n).map(|_| rng.below(256)).collect();
        for b in data.chunks_exact_mut(size) {
            b[..2].copy_from_slice(&rng.scale().0);
        }
        data
    }

    #[test]
    fn codes_times_scales_are_the_dequantized_values() {
        let mut rng = Rng::new(7);
        for (ty, size) in [
            (GgmlType::Q8_0, 34),
            (GgmlType::Q4_0, 18),
            (GgmlType::Q5_0, 22),
        ] {
            let data = blocks(&mut rng, size, 9);
            let mut want = vec![0f32; 9 * BLOCK];
            kernel(ty).unwrap()(&data, &mut want);
            let got = int8_blocks(ty, &data).unwrap();
            for (i, w) in want.iter().enumerate() {
                let v = f32::from(got.codes[i]) * got.scales[i / BLOCK].to_f32();
                assert_eq!(v.to_bits(), w.to_bits(), "{ty:?} element {i}");
            }
        }
    }

    #[test]
    fn scale_times_code_plus_min_is_the_dequantized_value() {
        let mut rng = Rng::new(11);
        for (ty, size, max_code) in [(GgmlType::Q4_1, 20, 15), (GgmlType::Q5_1, 24, 31)] {
            let mut data = blocks(&mut rng, size, 9);
            for b in data.chunks_exact_mut(size) {
                b[2..4].copy_from_slice(&rng.scale().0);
            }
            let mut want = vec![0f32; 9 * BLOCK];
            kernel(ty).unwrap()(&data, &mut want);
            let got = affine_blocks(ty, &data).unwrap();
            assert!(got.codes.iter().all(|&q| q <= max_code));
            for (i, w) in want.iter().enumerate() {
                let (d, m) = (got.scales[i / BLOCK], got.mins[i / BLOCK]);
                let v = d.to_f32() * f32::from(got.codes[i]) + m.to_f32();
                assert_eq!(v.to_bits(), w.to_bits(), "{ty:?} element {i}");
            }
        }
        assert!(affine_blocks(GgmlType::Q8_0, &[0; 34]).is_none());
    }

    #[test]
    fn asymmetric_and_k_quant_kinds_have_no_int8_view() {
        for ty in [
            GgmlType::Q4_1,
            GgmlType::Q5_1,
            GgmlType::Q4_K,
            GgmlType::F16,
        ] {
            assert!(int8_blocks(ty, &[0; 64]).is_none());
        }
    }
}
