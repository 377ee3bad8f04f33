//! The 32-element legacy blocks: Q4_0, Q4_1, Q5_0, Q5_1 (4/5-bit codes with an f16 scale,
//! and an f16 minimum for the `_1` kinds) and Q8_0 (int8 codes with an f16 scale).
//! Element `j < 16` takes the low nibble of byte `j`, element `j + 16` its high nibble;
//! the fifth bit of element `j` is bit `j` of the little-endian u32 `qh`.

use super::{f16_at, for_blocks};

/// The 4-bit code of element `j` (0..32) from the 16 packed bytes `qs`.
pub(super) fn nibble(qs: &[u8], j: usize) -> u8 {
    (qs[j % 16] >> (4 * (j / 16))) & 0x0F
}

/// The 5-bit code of element `j`: its nibble plus bit `j` of `qh` as bit 4.
pub(super) fn five_bits(qs: &[u8], qh: u32, j: usize) -> u8 {
    nibble(qs, j) | ((((qh >> j) & 1) as u8) << 4)
}

/// Q4_0 (18 bytes: d, qs[16]): `d * (q - 8)`.
pub fn q4_0(data: &[u8], out: &mut [f32]) {
    for_blocks(data, out, |b: &[u8; 18], y: &mut [f32; 32]| {
        let d = f16_at(b, 0);
        for (j, y) in y.iter_mut().enumerate() {
            *y = d * f32::from(nibble(&b[2..], j) as i8 - 8);
        }
    });
}

/// Q4_1 (20 bytes: d, m, qs[16]): `d * q + m`.
pub fn q4_1(data: &[u8], out: &mut [f32]) {
    for_blocks(data, out, |b: &[u8; 20], y: &mut [f32; 32]| {
        let (d, m) = (f16_at(b, 0), f16_at(b, 2));
        for (j, y) in y.iter_mut().enumerate() {
            *y = d * f32::from(nibble(&b[4..], j)) + m;
        }
    });
}

/// Q5_0 (22 bytes: d, qh u32, qs[16]): `d * (q - 16)`.
pub fn q5_0(data: &[u8], out: &mut [f32]) {
    for_blocks(data, out, |b: &[u8; 22], y: &mut [f32; 32]| {
        let d = f16_at(b, 0);
        let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
        for (j, y) in y.iter_mut().enumerate() {
            *y = d * f32::from(five_bits(&b[6..], qh, j) as i8 - 16);
        }
    });
}

/// Q5_1 (24 bytes: d, m, qh u32, qs[16]): `d * q + m`.
pub fn q5_1(data: &[u8], out: &mut [f32]) {
    for_blocks(data, out, |b: &[u8; 24], y: &mut [f32; 32]| {
        let (d, m) = (f16_at(b, 0), f16_at(b, 2));
        let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        for (j, y) in y.iter_mut().enumerate() {
            *y = d * f32::from(five_bits(&b[8..], qh, j)) + m;
        }
    });
}

/// Q8_0 (34 bytes: d, qs[32] as i8): `q * d`.
pub fn q8_0(data: &[u8], out: &mut [f32]) {
    for_blocks(data, out, |b: &[u8; 34], y: &mut [f32; 32]| {
        let d = f16_at(b, 0);
        for (y, &q) in y.iter_mut().zip(&b[2..]) {
            *y = f32::from(q as i8) * d;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::testutil::{assert_bits, Rng};

    /// ggml's packing of 32 codes: byte j holds code j (low nibble) and code j + 16 (high).
    fn pack_nibbles(q: &[u8; 32]) -> [u8; 16] {
        std::array::from_fn(|j| (q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4))
    }

    /// ggml's `qh`: bit j is bit 4 of code j.
    fn pack_high_bits(q: &[u8; 32]) -> [u8; 4] {
        let mut qh = 0u32;
        for (j, &code) in q.iter().enumerate() {
            qh |= u32::from(code >> 4) << j;
        }
        qh.to_le_bytes()
    }

    /// One random block's logical content: codes, scale and minimum (bytes and exact value).
    struct Block {
        q: [u8; 32],
        d_bytes: [u8; 2],
        d: f64,
        m_bytes: [u8; 2],
        m: f64,
    }

    /// `blocks` random blocks with codes below `levels`.
    fn random_blocks(seed: u64, levels: u32, blocks: usize) -> Vec<Block> {
        let mut rng = Rng::new(seed);
        (0..blocks)
            .map(|_| {
                let q = std::array::from_fn(|_| rng.below(levels));
                let (d_bytes, d) = rng.scale();
                let (m_bytes, m) = rng.scale();
                Block {
                    q,
                    d_bytes,
                    d,
                    m_bytes,
                    m,
                }
            })
            .collect()
    }

    /// Decode `data` with `kernel` into 32 values per block.
    fn decode(kernel: fn(&[u8], &mut [f32]), data: &[u8], blocks: usize) -> Vec<f32> {
        let mut out = vec![0f32; 32 * blocks];
        kernel(data, &mut out);
        out
    }

    #[test]
    fn q4_0_is_scale_times_code_minus_8() {
        let blocks = random_blocks(1, 16, 5);
        let mut data = Vec::new();
        let mut expected = Vec::new();
        for Block { q, d_bytes, d, .. } in &blocks {
            data.extend_from_slice(d_bytes);
            data.extend_from_slice(&pack_nibbles(q));
            expected.extend(q.iter().map(|&c| d * (f64::from(c) - 8.0)));
        }
        assert_bits(&decode(q4_0, &data, 5), &expected);
    }

    #[test]
    fn q4_1_is_scale_times_code_plus_min() {
        let blocks = random_blocks(2, 16, 5);
        let mut data = Vec::new();
        let mut expected = Vec::new();
        for Block {
            q,
            d_bytes,
            d,
            m_bytes,
            m,
        } in &blocks
        {
            data.extend_from_slice(d_bytes);
            data.extend_from_slice(m_bytes);
            data.extend_from_slice(&pack_nibbles(q));
            expected.extend(q.iter().map(|&c| d * f64::from(c) + m));
        }
        assert_bits(&decode(q4_1, &data, 5), &expected);
    }

    #[test]
    fn q5_0_is_scale_times_code_minus_16() {
        let blocks = random_blocks(3, 32, 5);
        let mut data = Vec::new();
        let mut expected = Vec::new();
        for Block { q, d_bytes, d, .. } in &blocks {
            data.extend_from_slice(d_bytes);
            data.extend_from_slice(&pack_high_bits(q));
            data.extend_from_slice(&pack_nibbles(q));
            expected.extend(q.iter().map(|&c| d * (f64::from(c) - 16.0)));
        }
        assert_bits(&decode(q5_0, &data, 5), &expected);
    }

    #[test]
    fn q5_1_is_scale_times_code_plus_min() {
        let blocks = random_blocks(4, 32, 5);
        let mut data = Vec::new();
        let mut expected = Vec::new();
        for Block {
            q,
            d_bytes,
            d,
            m_bytes,
            m,
        } in &blocks
        {
            data.extend_from_slice(d_bytes);
            data.extend_from_slice(m_bytes);
            data.extend_from_slice(&pack_high_bits(q));
            data.extend_from_slice(&pack_nibbles(q));
            expected.extend(q.iter().map(|&c| d * f64::from(c) + m));
        }
        assert_bits(&decode(q5_1, &data, 5), &expected);
    }

    #[test]
    fn q8_0_is_signed_byte_times_scale() {
        let blocks = random_blocks(5, 256, 5);
        let mut data = Vec::new();
        let mut expected = Vec::new();
        for Block { q, d_bytes, d, .. } in &blocks {
            data.extend_from_slice(d_bytes);
            data.extend_from_slice(q);
            expected.extend(q.iter().map(|&c| f64::from(c as i8) * d));
        }
        assert_bits(&decode(q8_0, &data, 5), &expected);
    }
}
