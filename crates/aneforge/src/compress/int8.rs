//! Symmetric int8 quantizers: one scale per output row (`constexpr_affine_dequantize`) or per
//! row and block of the inner axis (`constexpr_blockwise_shift_scale`).

use std::sync::Arc;

use half::f16;

use crate::ops::constexpr::Encoded;

/// Smallest positive fp16 (2^-24): the scale floor, so rows of tiny values stay exact.
const SCALE_FLOOR: f32 = 5.960_464_5e-8;

/// Per group g = `group(i)`: scale = fp16(max(max|w_g| / 127, 2^-24)), q = clip(rint(w / scale), ±127) in f32.
fn quantize(w: &[f16], groups: usize, group: impl Fn(usize) -> usize) -> (Vec<i8>, Vec<f16>) {
    let mut amax = vec![0f32; groups];
    for (i, v) in w.iter().enumerate() {
        let g = &mut amax[group(i)];
        *g = g.max(v.to_f32().abs());
    }
    let scale: Vec<f16> = amax
        .iter()
        .map(|&m| f16::from_f32((m / 127.0).max(SCALE_FLOOR)))
        .collect();
    let q = w
        .iter()
        .enumerate()
        .map(|(i, v)| {
            (v.to_f32() / scale[group(i)].to_f32())
                .round_ties_even()
                .clamp(-127.0, 127.0) as i8
        })
        .collect();
    (q, scale)
}

/// Elements after one index of `axis` (the C-order stride of that axis).
fn stride(shape: &[usize], axis: usize) -> usize {
    shape[axis + 1..].iter().product()
}

/// int8 with one scale per index of `axis` (the output channels), zero point 0.
pub fn per_axis(shape: &[usize], w: &[f16], axis: usize) -> Encoded {
    let (inner, n) = (stride(shape, axis), shape[axis]);
    let (data, scale) = quantize(w, n, |i| i / inner % n);
    Encoded::Affine {
        axis,
        data: Arc::new(data),
        scale: Arc::new(scale),
    }
}

/// int8 with one scale per block of `block` elements along `axis` (which it divides) and per index elsewhere.
pub fn blockwise(shape: &[usize], w: &[f16], axis: usize, block: usize) -> Encoded {
    let (inner, n) = (stride(shape, axis), shape[axis]);
    let mut scale_shape = shape.to_vec();
    scale_shape[axis] = n / block;
    let nb = n / block;
    let group = |i: usize| {
        let (outer, a, b) = (i / (n * inner), i / inner % n, i % inner);
        (outer * nb + a / block) * inner + b
    };
    let (data, scale) = quantize(w, crate::shape::numel(&scale_shape), group);
    Encoded::Blockwise {
        data: Arc::new(data),
        scale_shape,
        scale: Arc::new(scale),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(v: &[f32]) -> Vec<f16> {
        v.iter().map(|&x| f16::from_f32(x)).collect()
    }

    #[test]
    fn per_row_scales_and_codes_match_hand_values() {
        // Row 0: fp16 values 2.5390625, -1.26953125, 0.0100021; scale = fp16(2.5390625 / 127) =
        // 0.0199890136... (1310 · 2^-16); row 1 is all zero → floor 2^-24.
        let w = h(&[2.54, -1.27, 0.01, 0.0, 0.0, 0.0]);
        let Encoded::Affine { axis, data, scale } = per_axis(&[2, 3], &w, 0) else {
            panic!("not affine")
        };
        assert_eq!(
            (axis, scale[0].to_f32(), scale[1].to_f32()),
            (0, 1310.0 / 65536.0, SCALE_FLOOR)
        );
        // 2.5390625 / s = 127.02 → 127; -1.26953125 / s = -63.51 → -64; 0.0100021 / s = 0.5004 → 1.
        assert_eq!(*data, [127, -64, 1, 0, 0, 0]);
    }

    #[test]
    fn rows_along_a_later_axis_and_clipping() {
        // Scales per column (axis 1) of a [2, 2] weight.
        let w = h(&[1.0, -8.0, -0.5, 2.0]);
        let Encoded::Affine { data, scale, .. } = per_axis(&[2, 2], &w, 1) else {
            panic!("not affine")
        };
        assert_eq!(
            scale.iter().map(|s| s.to_f32()).collect::<Vec<_>>(),
            [
                f16::from_f32(1.0 / 127.0).to_f32(),
                f16::from_f32(8.0 / 127.0).to_f32()
            ]
        );
        assert_eq!(*data, [127, -127, -64, 32]); // -0.5 / (1/127) = -63.5 → ties to even → -64
    }

    #[test]
    fn blockwise_groups_by_row_and_inner_block() {
        // [2, 4] with blocks of 2 along axis 1: four groups, each scaled by its own max.
        let w = h(&[1.0, -0.5, 4.0, 2.0, 0.25, 0.125, -16.0, 8.0]);
        let Encoded::Blockwise {
            data,
            scale_shape,
            scale,
        } = blockwise(&[2, 4], &w, 1, 2)
        else {
            panic!("not blockwise")
        };
        assert_eq!(scale_shape, [2, 2]);
        let want: Vec<f32> = [1.0f32, 4.0, 0.25, 16.0]
            .iter()
            .map(|m| f16::from_f32(m / 127.0).to_f32())
            .collect();
        assert_eq!(scale.iter().map(|s| s.to_f32()).collect::<Vec<_>>(), want);
        assert_eq!(data[0], 127);
        assert_eq!(data[3], 64); // 2 / (4/127) = 63.5 → rounded with the fp16 scale
        assert_eq!((data[6], data[7]), (-127, 64));
        // Conv-style [Cout, Cin, kH, kW] blocks along axis 1: scale [2, 1, 1, 2].
        let Encoded::Blockwise { scale_shape, .. } = blockwise(&[2, 4, 1, 2], &h(&[1.0; 16]), 1, 4)
        else {
            panic!("not blockwise")
        };
        assert_eq!(scale_shape, [2, 1, 1, 2]);
    }
}
