//! Plain float storage: F32 (copied), F16 (widened exactly), BF16 (the 16 stored bits become
//! the high half of an f32, so NaN payloads survive as in `gguf`).

use super::{f16_at, for_blocks};

/// Little-endian f32 values.
pub fn f32_le(data: &[u8], out: &mut [f32]) {
    for_blocks(data, out, |b: &[u8; 4], y: &mut [f32; 1]| {
        y[0] = f32::from_le_bytes(*b);
    });
}

/// Little-endian IEEE half values.
pub fn f16_le(data: &[u8], out: &mut [f32]) {
    for_blocks(data, out, |b: &[u8; 2], y: &mut [f32; 1]| {
        y[0] = f16_at(b, 0);
    });
}

/// Little-endian bfloat16 values.
pub fn bf16_le(data: &[u8], out: &mut [f32]) {
    for_blocks(data, out, |b: &[u8; 2], y: &mut [f32; 1]| {
        y[0] = f32::from_bits(u32::from(u16::from_le_bytes(*b)) << 16);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_reads_little_endian_bytes() {
        let mut out = [0f32; 2];
        f32_le(&[0, 0, 0x80, 0x3F, 0, 0, 0x20, 0xC1], &mut out);
        assert_eq!(out, [1.0, -10.0]);
    }

    #[test]
    fn f16_widens_exactly_including_subnormals_and_infinity() {
        // 0x3C00 = 1, 0xC500 = -5, 0x0001 = 2^-24 (smallest subnormal), 0x7C00 = +inf.
        let bytes = [0x00, 0x3C, 0x00, 0xC5, 0x01, 0x00, 0x00, 0x7C];
        let mut out = [0f32; 4];
        f16_le(&bytes, &mut out);
        assert_eq!(out, [1.0, -5.0, 2f32.powi(-24), f32::INFINITY]);
    }

    #[test]
    fn bf16_is_the_high_half_of_an_f32() {
        // 0x3F80 = 1, 0xC0A0 = -5, 0x3E20 = 0.15625, 0x7FC1 = a NaN with payload bit 16.
        let bytes = [0x80, 0x3F, 0xA0, 0xC0, 0x20, 0x3E, 0xC1, 0x7F];
        let mut out = [0f32; 4];
        bf16_le(&bytes, &mut out);
        assert_eq!(out[..3], [1.0, -5.0, 0.15625]);
        assert_eq!(out[3].to_bits(), 0x7FC1_0000);
    }
}
