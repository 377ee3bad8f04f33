//! The 256-element k-quants (Q2_K ... Q6_K, Q8_K): a super-block scale `d` (and `dmin`)
//! times per-sub-block integer scales (and minimums) times 2..8-bit codes. Layouts follow
//! ggml's `block_qN_K` structs; the float operations follow the `gguf` package's order:
//! `(d * scale) * q - (dmin * min)`.

use super::{f16_at, for_blocks};

/// Elements per k-quant super-block.
pub const QK_K: usize = 256;

/// The 2-bit code of element `i` from 64 bytes `qs`: each 128-element half uses 32 bytes,
/// element `32 * s + l` of a half sitting at bits `2s..2s+2` of byte `l`.
fn two_bits(qs: &[u8], i: usize) -> u8 {
    (qs[(i / 128) * 32 + i % 32] >> (2 * ((i % 128) / 32))) & 3
}

/// The 4-bit code of element `i` from 128 bytes `qs`: each 64-element quarter uses 32 bytes,
/// the first 32 elements in the low nibbles, the next 32 in the high nibbles.
fn four_bits(qs: &[u8], i: usize) -> u8 {
    (qs[(i / 64) * 32 + i % 32] >> (4 * ((i % 64) / 32))) & 0x0F
}

/// Bit `i / 32` of byte `i % 32` of the 32-byte high-bit mask.
fn high_bit(mask: &[u8], i: usize) -> u8 {
    (mask[i % 32] >> (i / 32)) & 1
}

/// Q4_K/Q5_K 6-bit (scale, min) of sub-block `j` (0..8) from the 12 packed bytes.
fn scale_min(sc: &[u8], j: usize) -> (u8, u8) {
    if j < 4 {
        (sc[j] & 0x3F, sc[j + 4] & 0x3F)
    } else {
        (
            (sc[j + 4] & 0x0F) | ((sc[j - 4] >> 2) & 0x30),
            (sc[j + 4] >> 4) | ((sc[j] >> 2) & 0x30),
        )
    }
}

/// Q2_K (84 bytes: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin):
/// `(d * scale) * q - (dmin * min)` per 16-element sub-block.
pub fn q2_k(data: &[u8], out: &mut [f32]) {
    for_blocks(data, out, |b: &[u8; 84], y: &mut [f32; QK_K]| {
        let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
        for (i, y) in y.iter_mut().enumerate() {
            let sc = b[i / 16];
            let dl = d * f32::from(sc & 0x0F);
            let ml = dmin * f32::from(sc >> 4);
            *y = dl * f32::from(two_bits(&b[16..80], i)) - ml;
        }
    });
}

/// Q3_K (110 bytes: hmask[32], qs[64], scales[12] (sixteen 6-bit), d):
/// `(d * (scale - 32)) * (q - 4 * !hbit)`.
pub fn q3_k(data: &[u8], out: &mut [f32]) {
    for_blocks(data, out, |b: &[u8; 110], y: &mut [f32; QK_K]| {
        let d = f16_at(b, 108);
        let sc = &b[96..108];
        for (i, y) in y.iter_mut().enumerate() {
            let j = i / 16;
            let low = (sc[j % 8] >> (4 * (j / 8))) & 0x0F;
            let high = (sc[8 + j % 4] >> (2 * (j / 4))) & 0x03;
            let dl = d * f32::from((low | (high << 4)) as i8 - 32);
            let q = two_bits(&b[32..96], i) as i8 - 4 * (1 - high_bit(&b[..32], i) as i8);
            *y = dl * f32::from(q);
        }
    });
}

/// Q4_K (144 bytes: d, dmin, scales[12] (eight 6-bit scale/min pairs), qs[128]):
/// `(d * scale) * q - (dmin * min)` per 32-element sub-block.
pub fn q4_k(data: &[u8], out: &mut [f32]) {
    for_blocks(data, out, |b: &[u8; 144], y: &mut [f32; QK_K]| {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        for (i, y) in y.iter_mut().enumerate() {
            let (sc, m) = scale_min(&b[4..16], i / 32);
            let q = four_bits(&b[16..], i);
            *y = (d * f32::from(sc)) * f32::from(q) - dmin * f32::from(m);
        }
    });
}

/// Q5_K (176 bytes: d, dmin, scales[12], qh[32], qs[128]): Q4_K with a fifth code bit.
pub fn q5_k(data: &[u8], out: &mut [f32]) {
    for_blocks(data, out, |b: &[u8; 176], y: &mut [f32; QK_K]| {
        let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
        for (i, y) in y.iter_mut().enumerate() {
            let (sc, m) = scale_min(&b[4..16], i / 32);
            let q = four_bits(&b[48..], i) | (high_bit(&b[16..48], i) << 4);
            *y = (d * f32::from(sc)) * f32::from(q) - dmin * f32::from(m);
        }
    });
}

/// Q6_K (210 bytes: ql[128], qh[64], scales[16] as i8, d): `(d * scale) * (q - 32)` per
/// 16-element sub-block; per 128-element half, the low nibbles come from 64 bytes of `ql`
/// (32 elements per nibble position) and the top two bits from 32 bytes of `qh`.
pub fn q6_k(data: &[u8], out: &mut [f32]) {
    for_blocks(data, out, |b: &[u8; 210], y: &mut [f32; QK_K]| {
        let d = f16_at(b, 208);
        for (i, y) in y.iter_mut().enumerate() {
            let (half, r) = (i / 128, i % 128);
            let low = (b[half * 64 + r % 64] >> (4 * (r / 64))) & 0x0F;
            let high = two_bits(&b[128..192], i);
            let q = (low | (high << 4)) as i8 - 32;
            *y = (d * f32::from(b[192 + i / 16] as i8)) * f32::from(q);
        }
    });
}

/// Q8_K (292 bytes: d as f32, qs[256] as i8, bsums[16]): `d * q`.
pub fn q8_k(data: &[u8], out: &mut [f32]) {
    for_blocks(data, out, |b: &[u8; 292], y: &mut [f32; QK_K]| {
        let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        for (y, &q) in y.iter_mut().zip(&b[4..260]) {
            *y = d * f32::from(q as i8);
        }
    });
}

#[cfg(test)]
mod tests {
    //! Each test packs random codes and scales the way ggml's reference quantizers
    //! (`quantize_row_qN_K_ref`) lay them out, then checks the kernel against the format's
    //! formula evaluated in f64 and rounded once to f32.
    use super::*;
    use crate::quant::testutil::{assert_bits, Rng};

    /// Codes below `levels` for one super-block.
    fn codes(rng: &mut Rng, levels: u32) -> [u8; QK_K] {
        std::array::from_fn(|_| rng.below(levels))
    }

    /// ggml's 2-bit packing: per 128 elements, byte l holds elements l, l+32, l+64, l+96.
    fn pack_two_bits(q: &[u8; QK_K]) -> [u8; 64] {
        let mut qs = [0u8; 64];
        for j in (0..QK_K).step_by(128) {
            for l in 0..32 {
                qs[j / 4 + l] = (q[j + l] & 3)
                    | ((q[j + l + 32] & 3) << 2)
                    | ((q[j + l + 64] & 3) << 4)
                    | ((q[j + l + 96] & 3) << 6);
            }
        }
        qs
    }

    /// ggml's 4-bit packing: per 64 elements, byte l holds elements l and l+32.
    fn pack_four_bits(q: &[u8; QK_K]) -> [u8; 128] {
        let mut qs = [0u8; 128];
        for j in (0..QK_K).step_by(64) {
            for l in 0..32 {
                qs[j / 2 + l] = (q[j + l] & 0x0F) | ((q[j + l + 32] & 0x0F) << 4);
            }
        }
        qs
    }

    /// ggml's high-bit mask: bit `i / 32` of byte `i % 32` is bit `shift` of code i.
    fn pack_high_bits(q: &[u8; QK_K], shift: u32) -> [u8; 32] {
        let mut mask = [0u8; 32];
        for (i, &c) in q.iter().enumerate() {
            mask[i % 32] |= ((c >> shift) & 1) << (i / 32);
        }
        mask
    }

    /// ggml's Q4_K/Q5_K packing of eight 6-bit scales and mins into 12 bytes.
    fn pack_scale_mins(ls: &[u8; 8], lm: &[u8; 8]) -> [u8; 12] {
        let mut s = [0u8; 12];
        for j in 0..8 {
            if j < 4 {
                s[j] = ls[j];
                s[j + 4] = lm[j];
            } else {
                s[j + 4] = (ls[j] & 0x0F) | ((lm[j] & 0x0F) << 4);
                s[j - 4] |= (ls[j] >> 4) << 6;
                s[j] |= (lm[j] >> 4) << 6;
            }
        }
        s
    }

    #[test]
    fn q2_k_matches_scale_min_formula() {
        let mut rng = Rng::new(10);
        let mut data = Vec::new();
        let mut expected = Vec::new();
        for _ in 0..3 {
            let q = codes(&mut rng, 4);
            let scales: [u8; 16] = std::array::from_fn(|_| rng.below(256));
            let (d_bytes, d) = rng.scale();
            let (m_bytes, dmin) = rng.scale();
            data.extend_from_slice(&scales);
            data.extend_from_slice(&pack_two_bits(&q));
            data.extend_from_slice(&d_bytes);
            data.extend_from_slice(&m_bytes);
            expected.extend((0..QK_K).map(|i| {
                let sc = scales[i / 16];
                d * f64::from(sc & 15) * f64::from(q[i]) - dmin * f64::from(sc >> 4)
            }));
        }
        let mut out = vec![0f32; 3 * QK_K];
        q2_k(&data, &mut out);
        assert_bits(&out, &expected);
    }

    #[test]
    fn q3_k_matches_signed_scale_formula() {
        let mut rng = Rng::new(11);
        let mut data = Vec::new();
        let mut expected = Vec::new();
        for _ in 0..3 {
            let q = codes(&mut rng, 8); // q - 4 is the signed 3-bit value
            let ls: [u8; 16] = std::array::from_fn(|_| rng.below(64));
            let (d_bytes, d) = rng.scale();
            let mut scales = [0u8; 12];
            for (j, &l) in ls.iter().enumerate() {
                if j < 8 {
                    scales[j] = l & 0x0F;
                } else {
                    scales[j - 8] |= (l & 0x0F) << 4;
                }
                scales[j % 4 + 8] |= (l >> 4) << (2 * (j / 4));
            }
            data.extend_from_slice(&pack_high_bits(&q, 2));
            data.extend_from_slice(&pack_two_bits(&q));
            data.extend_from_slice(&scales);
            data.extend_from_slice(&d_bytes);
            expected.extend(
                (0..QK_K).map(|i| d * (f64::from(ls[i / 16]) - 32.0) * (f64::from(q[i]) - 4.0)),
            );
        }
        let mut out = vec![0f32; 3 * QK_K];
        q3_k(&data, &mut out);
        assert_bits(&out, &expected);
    }

    /// Random Q4_K (`with_high_bits` false) or Q5_K blocks and their expected values.
    fn q45_k_case(seed: u64, with_high_bits: bool) -> (Vec<u8>, Vec<f64>) {
        let mut rng = Rng::new(seed);
        let mut data = Vec::new();
        let mut expected = Vec::new();
        for _ in 0..3 {
            let q = codes(&mut rng, if with_high_bits { 32 } else { 16 });
            let ls: [u8; 8] = std::array::from_fn(|_| rng.below(64));
            let lm: [u8; 8] = std::array::from_fn(|_| rng.below(64));
            let (d_bytes, d) = rng.scale();
            let (m_bytes, dmin) = rng.scale();
            data.extend_from_slice(&d_bytes);
            data.extend_from_slice(&m_bytes);
            data.extend_from_slice(&pack_scale_mins(&ls, &lm));
            if with_high_bits {
                data.extend_from_slice(&pack_high_bits(&q, 4));
            }
            data.extend_from_slice(&pack_four_bits(&q));
            expected.extend((0..QK_K).map(|i| {
                let j = i / 32;
                d * f64::from(ls[j]) * f64::from(q[i]) - dmin * f64::from(lm[j])
            }));
        }
        (data, expected)
    }

    #[test]
    fn q4_k_matches_scale_min_formula() {
        let (data, expected) = q45_k_case(12, false);
        let mut out = vec![0f32; 3 * QK_K];
        q4_k(&data, &mut out);
        assert_bits(&out, &expected);
    }

    #[test]
    fn q5_k_matches_scale_min_formula() {
        let (data, expected) = q45_k_case(13, true);
        let mut out = vec![0f32; 3 * QK_K];
        q5_k(&data, &mut out);
        assert_bits(&out, &expected);
    }

    #[test]
    fn q6_k_matches_signed_scale_formula() {
        let mut rng = Rng::new(14);
        let mut data = Vec::new();
        let mut expected = Vec::new();
        for _ in 0..3 {
            let q = codes(&mut rng, 64); // q - 32 is the signed 6-bit value
            let scales: [u8; 16] = std::array::from_fn(|_| rng.below(256));
            let (d_bytes, d) = rng.scale();
            let (mut ql, mut qh) = ([0u8; 128], [0u8; 64]);
            for j in (0..QK_K).step_by(128) {
                for l in 0..32 {
                    let [a, b, c, e] = [q[j + l], q[j + l + 32], q[j + l + 64], q[j + l + 96]];
                    ql[j / 2 + l] = (a & 0x0F) | ((c & 0x0F) << 4);
                    ql[j / 2 + l + 32] = (b & 0x0F) | ((e & 0x0F) << 4);
                    qh[j / 4 + l] = (a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6);
                }
            }
            data.extend_from_slice(&ql);
            data.extend_from_slice(&qh);
            data.extend_from_slice(&scales);
            data.extend_from_slice(&d_bytes);
            expected.extend(
                (0..QK_K).map(|i| d * f64::from(scales[i / 16] as i8) * (f64::from(q[i]) - 32.0)),
            );
        }
        let mut out = vec![0f32; 3 * QK_K];
        q6_k(&data, &mut out);
        assert_bits(&out, &expected);
    }

    #[test]
    fn q8_k_is_f32_scale_times_signed_byte() {
        let mut rng = Rng::new(15);
        let q = codes(&mut rng, 256);
        let d = -0.013_f32;
        let mut data = d.to_le_bytes().to_vec();
        data.extend_from_slice(&q);
        data.extend_from_slice(&[0u8; 32]); // bsums, unused by dequantization
        let expected: Vec<f64> = q
            .iter()
            .map(|&c| f64::from(d) * f64::from(c as i8))
            .collect();
        let mut out = vec![0f32; QK_K];
        q8_k(&data, &mut out);
        assert_bits(&out, &expected);
    }
}
