//! fp16 lookup tables for the costly unary ops (GELU, erf, exp, tanh, sigmoid, …): in fp16 mode
//! an op's input is an fp16 value and its output is rounded to fp16, so the op is a function of
//! 65,536 inputs, evaluated once at load with the op's own scalar kernel. A table lookup is then
//! bit-identical to the kernel followed by rounding; inputs that are not exact fp16 values
//! (possible only for unrounded constants) take the kernel and the rounding per element.

use half::f16;

use crate::ops::kernel::for_chunks;
use crate::ops::simd_fp16::{lookup, round1, TABLE_LEN};
use crate::ops::unary::Unary;

/// round_fp16(op(x)) for every fp16 bit pattern x, indexed by the bits.
pub struct Fp16Table {
    op: Unary,
    values: Box<[f32; TABLE_LEN]>,
}

impl std::fmt::Debug for Fp16Table {
    /// The op (not its 65,536 entries).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fp16Table")
            .field("op", &self.op)
            .finish_non_exhaustive()
    }
}

/// Whether `op`'s scalar kernel costs enough (a libm call or a polynomial) to be worth a table.
fn costly(op: Unary) -> bool {
    use Unary::*;
    matches!(
        op,
        Gelu | Silu
            | Sigmoid
            | Tanh
            | Exp
            | Log { .. }
            | Sin
            | Cos
            | Erf
            | Softplus
            | Elu { .. }
            | Atan
            | Tan
            | Sinh
            | Cosh
            | Asin
            | Acos
            | Atanh
            | Exp2
            | ScaledTanh { .. }
    )
}

impl Fp16Table {
    /// The table of `op`, or `None` when its kernel is cheap enough to run directly.
    pub fn new(op: Unary) -> Option<Fp16Table> {
        if !costly(op) {
            return None;
        }
        let values: Vec<f32> = (0..=u16::MAX)
            .map(|bits| round1(op.apply(f16::from_bits(bits).to_f32())))
            .collect();
        Some(Fp16Table {
            op,
            values: values.try_into().ok()?,
        })
    }

    /// The op this table evaluates.
    pub fn op(&self) -> Unary {
        self.op
    }

    /// The entries, indexed by fp16 bit pattern (read by the x86-64 epilogue lanes).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub fn values(&self) -> &[f32; TABLE_LEN] {
        &self.values
    }

    /// round_fp16(op(v)) for a value off the fp16 grid (what [`Fp16Table::eval`] computes
    /// there).
    pub fn off_grid(&self, v: f32) -> f32 {
        round1(self.op.apply(v))
    }

    /// y = round_fp16(op(x)) elementwise (`y.len() == x.len()`), on the rayon pool for large inputs.
    pub fn eval(&self, x: &[f32], y: &mut [f32]) {
        const CHUNK: usize = 4096;
        for_chunks(y, CHUNK, x, CHUNK, |yc, xc| {
            lookup(&self.values, xc, yc, |v| self.off_grid(v))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::reference::round_to_fp16;
    use crate::ops::unary::Unary::*;

    /// Every fp16 input (and off-grid f32 inputs) through the table equals the kernel followed
    /// by the executor's rounding pass, bit for bit.
    #[test]
    fn tables_match_kernel_then_rounding_on_all_fp16_inputs() {
        let ops = [
            Gelu,
            Silu,
            Sigmoid,
            Tanh,
            Exp,
            Log { eps: 0.0 },
            Erf,
            Softplus,
            Elu { alpha: 1.0 },
            Atanh,
            ScaledTanh {
                alpha: 1.5,
                beta: 0.5,
            },
        ];
        let mut x: Vec<f32> = (0..=u16::MAX).map(|b| f16::from_bits(b).to_f32()).collect();
        // Values between fp16 grid points and NaNs with payloads fp16 cannot hold.
        x.extend([
            1.000_1f32,
            -3.300_1,
            1e-9,
            70000.5,
            f32::from_bits(0x7fc0_0001),
        ]);
        for op in ops {
            let table = Fp16Table::new(op).expect("costly op");
            let mut got = vec![0f32; x.len()];
            table.eval(&x, &mut got);
            let mut want: Vec<f32> = x.iter().map(|&v| op.apply(v)).collect();
            round_to_fp16(&mut want);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.to_bits(), w.to_bits(), "{op:?} at x = {} ({i})", x[i]);
            }
        }
        assert!(Fp16Table::new(Relu).is_none());
    }
}
