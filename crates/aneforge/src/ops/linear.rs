//! Matrix multiply: `x @ W` with a baked weight (stored transposed, `transpose_y = true`),
//! `linear(W, b)` (PyTorch convention), `matmul` (tensor @ tensor), NumPy `matmul` semantics, and
//! `cumsum` along the last axis (a matmul with a baked triangular ones matrix) and the `geglu`
//! composite (two linears, gelu, mul).

use rayon::prelude::*;

use super::gemm::{sgemm, PAR_MIN_MACS};
use super::io::{expect_fp16, expect_inputs};
use super::kernel::for_each_broadcast;
use super::{Buf, Family, Op, TensorType};
use crate::error::{Error, Result};
use crate::mil::{Literal, MilArgs, MilOp};

/// The MIL op name of [`MatMul`].
pub const MIL_NAME: &str = "matmul";

/// MIL ops this family prints.
pub const MIL_OPS: &[&str] = &[MIL_NAME];

/// MIL `matmul(x, y, transpose_x, transpose_y)`; transposes swap the last two axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatMul {
    pub transpose_x: bool,
    pub transpose_y: bool,
}

/// One operand seen as a stack of matrices: batch axes, matrix extents and element strides.
struct Operand<'a> {
    batch: &'a [usize],
    /// Element strides of the batch axes in the stored buffer.
    batch_strides: &'a [usize],
    /// (rows, cols) of the (possibly transposed) matrix as multiplied.
    rows: usize,
    cols: usize,
    /// Element strides of those rows and columns in the stored buffer.
    rs: usize,
    cs: usize,
}

impl<'a> Operand<'a> {
    /// View `shape` (element `strides` per axis) as matrices; a rank-1 operand is promoted to
    /// [1, K] (`is_x`) or [K, 1] and ignores `transpose` (as MIL does); `None` for rank 0.
    fn new(shape: &'a [usize], strides: &'a [usize], transpose: bool, is_x: bool) -> Option<Self> {
        let r = shape.len();
        let (rows, cols, rs, cs) = match *shape {
            [] => return None,
            [k] if is_x => (1, k, k * strides[0], strides[0]),
            [k] => (k, 1, strides[0], 1),
            [.., r0, r1] if transpose => (r1, r0, strides[r - 1], strides[r - 2]),
            [.., r0, r1] => (r0, r1, strides[r - 2], strides[r - 1]),
        };
        let b = r.saturating_sub(2);
        Some(Operand {
            batch: &shape[..b],
            batch_strides: &strides[..b],
            rows,
            cols,
            rs,
            cs,
        })
    }

    /// The batch strides seen through a broadcast to `batch` (0 on broadcast axes).
    fn broadcast(&self, batch: &[usize]) -> Vec<usize> {
        let pad = batch.len() - self.batch.len();
        (0..batch.len())
            .map(|i| match i.checked_sub(pad) {
                Some(a) if self.batch[a] != 1 => self.batch_strides[a],
                _ => 0,
            })
            .collect()
    }
}

impl MatMul {
    /// Both operands as matrix stacks plus the broadcast batch shape, or a shape error naming both shapes.
    fn operands<'a>(
        &self,
        (xs, xst): (&'a [usize], &'a [usize]),
        (ys, yst): (&'a [usize], &'a [usize]),
    ) -> Result<(Operand<'a>, Operand<'a>, Vec<usize>)> {
        let desc = || {
            format!(
                "x {xs:?} (transpose_x = {}) and y {ys:?} (transpose_y = {})",
                self.transpose_x, self.transpose_y
            )
        };
        let (Some(x), Some(y)) = (
            Operand::new(xs, xst, self.transpose_x, true),
            Operand::new(ys, yst, self.transpose_y, false),
        ) else {
            return Err(Error::shape(
                MIL_NAME,
                format!("operands must have rank >= 1, got {}", desc()),
            ));
        };
        if x.cols != y.rows {
            return Err(Error::shape(
                MIL_NAME,
                format!(
                    "{}: inner dimensions differ (K = {} vs {})",
                    desc(),
                    x.cols,
                    y.rows
                ),
            ));
        }
        let batch = crate::shape::broadcast(MIL_NAME, x.batch, y.batch).map_err(|_| {
            Error::shape(
                MIL_NAME,
                format!(
                    "{}: batch axes {:?} and {:?} do not broadcast",
                    desc(),
                    x.batch,
                    y.batch
                ),
            )
        })?;
        Ok((x, y, batch))
    }
}

impl Family for MatMul {
    fn name(&self) -> &'static str {
        MIL_NAME
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        expect_inputs(MIL_NAME, inputs, 2)?;
        expect_fp16(MIL_NAME, inputs)?;
        let (xs, ys) = (&inputs[0].shape, &inputs[1].shape);
        let (xst, yst) = (crate::shape::strides(xs), crate::shape::strides(ys));
        let (x, y, mut out) = self.operands((xs, &xst), (ys, &yst))?;
        if xs.len() >= 2 {
            out.push(x.rows);
        }
        if ys.len() >= 2 {
            out.push(y.cols);
        }
        Ok(vec![TensorType::fp16(out)])
    }
    fn mil(&self) -> MilOp {
        MilOp::new(MIL_NAME, &["x", "y"])
            .param("transpose_x", Literal::Bool(self.transpose_x))
            .param("transpose_y", Literal::Bool(self.transpose_y))
    }
    fn eval(&self, ins: &[&Buf], out: &mut [Buf]) -> Result<()> {
        let views = [0, 1].map(|p| crate::shape::strides(&ins[p].shape));
        let [x, y] = [0, 1].map(|p| View {
            buf: ins[p],
            shape: &ins[p].shape,
            strides: &views[p],
        });
        self.eval_views(x, y, &mut out[0])
    }
}

/// A matmul operand: `shape` read from `buf` through element `strides` per axis (a stored
/// tensor's own row-major strides, or those of a transpose of it folded into the matmul).
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub buf: &'a Buf,
    pub shape: &'a [usize],
    pub strides: &'a [usize],
}

impl MatMul {
    /// `eval` on operands read through views; `out` is the contiguous result. Each product is
    /// one `sgemm` call whatever the strides, so a view changes no bit of the result.
    pub fn eval_views(&self, xv: View, yv: View, out: &mut Buf) -> Result<()> {
        let (x, y, batch) = self.operands((xv.shape, xv.strides), (yv.shape, yv.strides))?;
        let (m, n, k) = (x.rows, y.cols, x.cols);
        let (sx, sy) = (x.broadcast(&batch), y.broadcast(&batch));
        let mut offsets = Vec::new();
        for_each_broadcast(&batch, [&sx, &sy], |_, [i, j]| offsets.push((i, j)));
        let (xd, yd) = (&xv.buf.data, &yv.buf.data);
        let run = |(c, &(xo, yo)): (&mut [f32], &(usize, usize))| {
            sgemm(
                m,
                n,
                k,
                &xd[xo..],
                x.rs,
                x.cs,
                &yd[yo..],
                y.rs,
                y.cs,
                c,
                n,
                false,
            );
        };
        let od = &mut out.data;
        if offsets.len() > 1 && (m * n * k).saturating_mul(offsets.len()) >= PAR_MIN_MACS {
            od.par_chunks_mut(m * n)
                .zip(offsets.par_iter())
                .for_each(run);
        } else {
            od.chunks_mut(m * n).zip(offsets.iter()).for_each(run);
        }
        Ok(())
    }
}

/// Parse `matmul`.
pub fn from_mil(op: &str, args: &mut MilArgs) -> Option<Result<Op>> {
    match op {
        MIL_NAME => Some((|| {
            Ok(Op::MatMul(MatMul {
                transpose_x: args.bool("transpose_x")?,
                transpose_y: args.bool("transpose_y")?,
            }))
        })()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::build::linear::*;
    use crate::input;
    use crate::ops::conv::tests::mil_roundtrip;
    use crate::ops::gemm::tests::{assert_close, rand_vec};
    use crate::ops::io::HostArray;

    /// Direct-loop NumPy matmul in f64, written from the shapes and flags alone.
    fn naive(tx: bool, ty: bool, xs: &[usize], x: &[f32], ys: &[usize], y: &[f32]) -> Vec<f64> {
        let xs2 = if xs.len() == 1 {
            vec![1, xs[0]]
        } else {
            xs.to_vec()
        };
        let ys2 = if ys.len() == 1 {
            vec![ys[0], 1]
        } else {
            ys.to_vec()
        };
        let (tx, ty, xr, yr) = (tx && xs.len() > 1, ty && ys.len() > 1, xs2.len(), ys2.len());
        let (m, k) = if tx {
            (xs2[xr - 1], xs2[xr - 2])
        } else {
            (xs2[xr - 2], xs2[xr - 1])
        };
        let n = if ty { ys2[yr - 2] } else { ys2[yr - 1] };
        let rank = xr.max(yr) - 2;
        let pad = |s: &[usize]| [vec![1; rank + 2 - s.len()], s[..s.len() - 2].to_vec()].concat();
        let (bx, by) = (pad(&xs2), pad(&ys2));
        let batch: Vec<usize> = bx.iter().zip(&by).map(|(&a, &b)| a.max(b)).collect();
        let mut out = Vec::new();
        for bi in 0..batch.iter().product() {
            let (mut rem, mut fx, mut fy, mut mx, mut my) = (bi, 0, 0, 1, 1);
            for ax in (0..rank).rev() {
                let i = rem % batch[ax];
                rem /= batch[ax];
                (fx, fy) = (fx + (i % bx[ax]) * mx, fy + (i % by[ax]) * my);
                (mx, my) = (mx * bx[ax], my * by[ax]);
            }
            for i in 0..m {
                for j in 0..n {
                    let xv =
                        |p: usize| x[fx * m * k + if tx { p * m + i } else { i * k + p }] as f64;
                    let yv =
                        |p: usize| y[fy * k * n + if ty { j * k + p } else { p * n + j }] as f64;
                    out.push((0..k).map(|p| xv(p) * yv(p)).sum());
                }
            }
        }
        out
    }

    fn check(tx: bool, ty: bool, xs: &[usize], ys: &[usize], want_shape: &[usize]) {
        let mm = MatMul {
            transpose_x: tx,
            transpose_y: ty,
        };
        let shape = mm
            .infer(&[TensorType::fp16(xs.to_vec()), TensorType::fp16(ys.to_vec())])
            .unwrap()
            .remove(0)
            .shape;
        assert_eq!(shape, want_shape, "{mm:?} {xs:?} {ys:?}");
        let x = Buf {
            shape: xs.to_vec(),
            data: rand_vec(xs.iter().product(), 11),
        };
        let y = Buf {
            shape: ys.to_vec(),
            data: rand_vec(ys.iter().product(), 12),
        };
        let mut out = [Buf::zeros(&shape)];
        mm.eval(&[&x, &y], &mut out).unwrap();
        assert_close(&out[0].data, &naive(tx, ty, xs, &x.data, ys, &y.data), 1e-5);
    }

    #[test]
    fn kernel_matches_naive_on_awkward_shapes() {
        check(false, false, &[7, 5], &[5, 3], &[7, 3]);
        check(false, false, &[1, 1], &[1, 1], &[1, 1]);
        check(false, false, &[5], &[5, 3], &[3]);
        check(false, false, &[2, 7, 5], &[5], &[2, 7]);
        check(false, false, &[5], &[5], &[]);
        check(true, false, &[2, 5, 7], &[5, 3], &[2, 7, 3]);
        check(false, true, &[2, 1, 7, 5], &[3, 3, 5], &[2, 3, 7, 3]);
        check(true, true, &[3, 1, 5, 7], &[4, 9, 5], &[3, 4, 7, 9]);
        check(true, true, &[5], &[3, 5], &[3]);
        check(false, false, &[4, 64, 96], &[96, 80], &[4, 64, 80]);
    }

    #[test]
    fn infer_rejects_bad_shapes_without_panicking() {
        let mm = MatMul {
            transpose_x: false,
            transpose_y: false,
        };
        let t = |s: &[usize]| TensorType::fp16(s.to_vec());
        let err = mm.infer(&[t(&[2, 3]), t(&[4, 5])]).unwrap_err().to_string();
        assert!(
            err.contains("[2, 3]") && err.contains("[4, 5]") && err.contains("K = 3 vs 4"),
            "{err}"
        );
        assert!(mm
            .infer(&[t(&[2, 2, 3]), t(&[3, 3, 4])])
            .unwrap_err()
            .to_string()
            .contains("broadcast"));
        assert!(mm.infer(&[t(&[]), t(&[3])]).is_err());
        assert!(mm.infer(&[t(&[3])]).is_err());
        let b = TensorType {
            dtype: crate::dtype::DType::Bool,
            shape: vec![3],
        };
        assert!(mm.infer(&[b, t(&[3])]).is_err());
    }

    #[test]
    fn builders_bake_weights_and_bias() {
        let x = crate::input(&[2, 3]).unwrap();
        let w = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let y = x.matmul_weight(HostArray::f32(&[3, 2], &w)).unwrap();
        assert_eq!(y.shape(), [2, 2]);
        assert_eq!(
            *y.op(),
            Op::MatMul(MatMul {
                transpose_x: false,
                transpose_y: true
            })
        );
        let Op::Const(c) = y.node.srcs[1].op() else {
            panic!("weight is not a const")
        };
        assert_eq!(c.shape, [2, 3]);
        assert_eq!(
            c.values.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
            [1.0, 3.0, 5.0, 2.0, 4.0, 6.0]
        );
        assert!(x.matmul_weight(HostArray::f32(&[6], &w)).is_err());
        assert!(
            x.matmul_weight(HostArray::f32(&[2, 3], &w)).is_err(),
            "K mismatch"
        );
        let l = x
            .linear(
                HostArray::f32(&[2, 3], &w),
                Some(HostArray::f32(&[2], &[0.5, -0.5])),
            )
            .unwrap();
        assert_eq!(l.shape(), [2, 2]);
        assert_eq!(l.op().family().name(), "add");
        assert!(x
            .linear(
                HostArray::f32(&[2, 3], &w),
                Some(HostArray::f32(&[1, 2], &[0.5, -0.5]))
            )
            .is_err());
        assert!(
            x.linear(HostArray::f32(&[3, 2], &w), None).is_err(),
            "in mismatch"
        );
        assert_eq!(
            x.matmul(&crate::input(&[4, 3, 5]).unwrap())
                .unwrap()
                .shape(),
            [4, 2, 5]
        );
    }

    /// cumsum is linear with W[j][i] = 1 for i <= j (so y[j] = Σ_{i≤j} x[i]); other axes are errors.
    /// geglu = value · gelu(gate) from the two halves of the weight; shape errors are Err.
    #[test]
    fn geglu_splits_the_weight() {
        let (w, b) = (rand_vec(6 * 5, 40), rand_vec(6, 41));
        let y = input(&[7, 5])
            .unwrap()
            .geglu(HostArray::f32(&[6, 5], &w), Some(HostArray::f32(&[6], &b)))
            .unwrap();
        assert_eq!(
            (y.shape(), y.op().family().name()),
            (&[7usize, 3][..], "mul")
        );
        let x = input(&[2, 5]).unwrap();
        for bad in [
            x.geglu(HostArray::f32(&[5, 5], &w[..25]), None),
            x.geglu(HostArray::f32(&[30], &w), None),
            x.geglu(
                HostArray::f32(&[6, 5], &w),
                Some(HostArray::f32(&[3], &b[..3])),
            ),
            input(&[2, 4])
                .unwrap()
                .geglu(HostArray::f32(&[6, 5], &w), None),
        ] {
            assert!(bad.is_err());
        }
    }

    #[test]
    fn cumsum_bakes_a_triangular_weight() {
        let x = crate::input(&[2, 3]).unwrap();
        let y = x.cumsum(-1).unwrap();
        assert_eq!(
            (y.shape(), y.op()),
            (
                &[2usize, 3][..],
                &Op::MatMul(MatMul {
                    transpose_x: false,
                    transpose_y: true
                })
            )
        );
        let Op::Const(c) = y.node.srcs[1].op() else {
            panic!("weight is not a const")
        };
        assert_eq!(
            c.values.iter().map(|v| v.to_f32()).collect::<Vec<_>>(),
            [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
        );
        assert!(x.cumsum(1).is_ok());
        assert!(x.cumsum(0).is_err() && x.cumsum(2).is_err() && x.cumsum(-3).is_err());
        assert!(crate::input(&[1, CUMSUM_MAX_K + 1])
            .unwrap()
            .cumsum(-1)
            .is_err());
    }

    #[test]
    fn mil_round_trips() {
        for (tx, ty) in [(false, false), (true, false), (false, true), (true, true)] {
            mil_roundtrip(
                Op::MatMul(MatMul {
                    transpose_x: tx,
                    transpose_y: ty,
                }),
                from_mil,
            );
        }
    }
}
