//! `argmax` / `argmin`: the int32 index of the first largest (smallest) element along one axis,
//! NumPy semantics (ties and NaN: the first occurrence; NaN counts as the extreme).

use super::host::{check_axis, expect_dtypes, lanes, HostKernel, HostRef, HostTensor};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::TensorType;

/// `argmax` (`max = true`) or `argmin` along `axis` (non-negative), keeping it as extent 1 when `keepdims`.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ArgReduce {
    pub max: bool,
    pub axis: usize,
    pub keepdims: bool,
}

impl HostKernel for ArgReduce {
    fn name(&self) -> &'static str {
        if self.max {
            "argmax"
        } else {
            "argmin"
        }
    }

    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_dtypes(self.name(), inputs, &[DType::Fp16])?;
        let s = &inputs[0].shape;
        check_axis(self.name(), self.axis, s)?;
        let mut shape = s.clone();
        if self.keepdims {
            shape[self.axis] = 1;
        } else {
            shape.remove(self.axis);
        }
        Ok(vec![TensorType {
            dtype: DType::Int32,
            shape,
        }])
    }

    fn run(&self, inputs: &[HostRef<'_>], outputs: &mut [HostTensor]) -> Result<()> {
        let x = inputs[0].f32s(self.name())?;
        let (outer, n, inner) = lanes(inputs[0].shape, self.axis);
        let out = outputs[0].i32s_mut(self.name())?;
        // `better(candidate, best)`: strictly more extreme, NaN beating every number.
        let better = |c: f32, b: f32| {
            if b.is_nan() {
                false
            } else if c.is_nan() {
                true
            } else if self.max {
                c > b
            } else {
                c < b
            }
        };
        for o in 0..outer {
            for i in 0..inner {
                let base = o * n * inner + i;
                let mut best = 0;
                for j in 1..n {
                    if better(x[base + j * inner], x[base + best * inner]) {
                        best = j;
                    }
                }
                out[o * inner + i] = best as i32;
            }
        }
        Ok(())
    }
}
