//! Signal ops: DFT as matmuls with constant cos/sin matrices (real or complex input, forward
//! or inverse, onesided, dft_length padding or truncation, any signal axis), and the window
//! functions (Hann, Hamming, Blackman), folded on the host once their size is known.

use std::f64::consts::PI;

use super::ops::{Args, OpFn, Value};
use super::ops_layout::axis;
use super::tensor::{Elem, HostTensor};
use crate::error::Result;
use crate::graph::build::io::constant;
use crate::graph::build::layout::concat;
use crate::graph::Tensor;
use crate::ops::io::{HostArray, HostData};

/// The mapping of signal op `op`, or None.
pub fn lookup(op: &str) -> Option<OpFn> {
    Some(match op {
        "DFT" => dft,
        "HannWindow" | "HammingWindow" | "BlackmanWindow" => window,
        _ => return None,
    })
}

/// Window of `size` samples: periodic (denominator N) or symmetric (N − 1), per the ONNX spec's
/// cosine sums; the output element type is `output_datatype` (float by default).
fn window(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let size = a
        .ints(0, "size")?
        .and_then(|v| v.first().copied())
        .ok_or_else(|| n.bad("input 0 (size) is missing or empty"))?;
    if !(1..=65536).contains(&size) {
        return Err(n.bad(format!("size {size} is outside 1..=65536")));
    }
    let periodic = n.int("periodic", 1)? != 0;
    let denom = if periodic { size } else { (size - 1).max(1) } as f64;
    let coeffs: [f64; 3] = match n.op() {
        "HannWindow" => [0.5, -0.5, 0.0],
        "HammingWindow" => [25.0 / 46.0, -21.0 / 46.0, 0.0],
        _ => [0.42, -0.5, 0.08],
    };
    let data: Vec<f64> = (0..size)
        .map(|i| {
            let t = 2.0 * PI * i as f64 / denom;
            coeffs[0] + coeffs[1] * t.cos() + coeffs[2] * (2.0 * t).cos()
        })
        .collect();
    let elem = Elem::from_code(n.int("output_datatype", 1)? as i32, &n.what)?;
    let data = data.into_iter().map(|v: f64| elem.convert(v)).collect();
    Ok(vec![Value::host(HostTensor::new(
        elem,
        vec![size as usize],
        data,
        &n.what,
    )?)])
}

/// DFT along the signal axis: input [..., N, ..., 1 | 2] (real or complex last axis), output
/// [..., K, ..., 2] with K = dft_length (or N), K/2 + 1 when onesided. Forward uses e^{-2πikn/K},
/// inverse e^{+2πikn/K} / K.
fn dft(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.ftensor(0)?;
    let rank = x.rank();
    let comps = x.shape()[rank - 1];
    if rank < 2 || !(comps == 1 || comps == 2) {
        return Err(n.bad(format!(
            "input {:?} needs a last axis of 1 (real) or 2 (complex)",
            x.shape()
        )));
    }
    let ax = if n.opset >= 20 {
        a.ints(2, "axis")?
            .and_then(|v| v.first().copied())
            .unwrap_or(-2)
    } else {
        n.int("axis", 1)?
    };
    let ax = axis(n, ax, rank)?;
    if ax == rank - 1 {
        return Err(n.bad("axis is the complex axis"));
    }
    let len = x.shape()[ax];
    let k = match a.ints(1, "dft_length")? {
        Some(v) => *v.first().ok_or_else(|| n.bad("dft_length is empty"))? as usize,
        None => len,
    };
    if k == 0 || k > 4096 {
        return Err(n.bad(format!("dft_length {k} is outside 1..=4096")));
    }
    let inverse = n.int("inverse", 0)? != 0;
    let onesided = n.int("onesided", 0)? != 0;
    if onesided && inverse {
        return Err(n.unsupported("onesided inverse DFT (the spec leaves it undefined)"));
    }
    let out_k = if onesided { k / 2 + 1 } else { k };
    // Move the signal axis last: [..., N] per component.
    let mut perm: Vec<i64> = (0..rank as i64 - 1).filter(|&i| i != ax as i64).collect();
    perm.push(ax as i64);
    perm.push(rank as i64 - 1);
    let xt = x.transpose(&perm)?; // [..., N, comps]
    let part = |c: usize| -> Result<Tensor> {
        let s = xt.shape().to_vec();
        let mut begin = vec![0; s.len()];
        begin[s.len() - 1] = c;
        let mut size = s.clone();
        size[s.len() - 1] = 1;
        let keep: Vec<i64> = s[..s.len() - 1].iter().map(|&d| d as i64).collect();
        xt.slice_by_size(&begin, &size)?.reshape(&keep)
    };
    // Matrices [N, K']: rows past dft_length are dropped (truncation), missing rows are zero (padding).
    let sign = if inverse { 1.0 } else { -1.0 };
    let scale = if inverse { 1.0 / k as f64 } else { 1.0 };
    let mat = |f: fn(f64) -> f64, s: f64| -> Result<Tensor> {
        let mut m = vec![0.0f64; len * out_k];
        for t in 0..len.min(k) {
            for j in 0..out_k {
                let theta = 2.0 * PI * ((t * j) % k) as f64 / k as f64;
                m[t * out_k + j] = s * scale * f(theta);
            }
        }
        constant(
            &n.what,
            HostArray {
                shape: &[len, out_k],
                data: HostData::F64(&m),
            },
        )
    };
    let (cos, sin) = (mat(f64::cos, 1.0)?, mat(f64::sin, sign)?);
    let re = part(0)?;
    // (re + i·im)(cos + i·sin·sign) summed over n.
    let (mut yr, mut yi) = (re.matmul(&cos)?, re.matmul(&sin)?);
    if comps == 2 {
        let im = part(1)?;
        yr = yr.sub(&im.matmul(&sin)?)?;
        yi = yi.add(&im.matmul(&cos)?)?;
    }
    let last = yr.rank() as i64;
    let y = concat(&[yr.expand_dims(&[last])?, yi.expand_dims(&[last])?], last)?;
    // Back: the signal axis returns to `ax`.
    let mut inv = vec![0i64; rank];
    for (i, &p) in perm.iter().enumerate() {
        inv[p as usize] = i as i64;
    }
    Ok(vec![Value::Graph {
        t: y.transpose(&inv)?,
        elem: a.req(0)?.elem(),
    }])
}
