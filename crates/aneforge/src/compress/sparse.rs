//! Sparse encoding (lossless): a uint1 mask of the non-zero elements (LSB first) and the
//! non-zero fp16 values in C order; `-0.0` counts as zero.

use std::sync::Arc;

use half::f16;

use crate::mil::blob::{BlobType, Packed};
use crate::ops::constexpr::Encoded;

/// Number of non-zero elements.
pub fn nnz(w: &[f16]) -> usize {
    w.iter().filter(|v| v.to_f32() != 0.0).count()
}

/// The mask and the packed non-zero values of `w`.
pub fn encode(w: &[f16]) -> Encoded {
    let mask = Packed::pack(
        BlobType::Uint1,
        w.iter().map(|v| u8::from(v.to_f32() != 0.0)),
    );
    let values = w.iter().copied().filter(|v| v.to_f32() != 0.0).collect();
    Encoded::Sparse {
        mask,
        values: Arc::new(values),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_bits_and_values_in_order() {
        let w: Vec<f16> = [0.0f32, 1.5, -0.0, -2.0, 0.0, 0.0, 0.0, 0.0, 3.0]
            .iter()
            .map(|&x| f16::from_f32(x))
            .collect();
        assert_eq!(nnz(&w), 3);
        let Encoded::Sparse { mask, values } = encode(&w) else {
            panic!("not sparse")
        };
        assert_eq!(mask.bytes(), [0b0000_1010, 0b0000_0001]);
        assert_eq!(
            values.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
            [1.5, -2.0, 3.0]
        );
    }
}
