//! ONNX Resize (opsets 10–19) and Upsample (7–9): nearest in every coordinate transformation
//! and rounding mode (as per-axis index maps), linear on the last two axes in the modes MIL's
//! `resize_bilinear` samples exactly; cubic and antialiasing are NotImplemented errors.

use super::ops::values::take;
use super::ops::{Args, Value};
use crate::error::Result;
use crate::ops::resize::SamplingMode;

/// Output extents and per-axis scales from the node's scales/sizes inputs or attribute.
fn targets(a: &Args, dims: &[usize]) -> Result<(Vec<usize>, Vec<f64>)> {
    let n = a.node;
    let r = dims.len();
    let scales: Option<Vec<f64>> = if n.op() == "Upsample" && n.opset < 9 {
        n.floats("scales")?
            .map(|v| v.iter().map(|&s| s as f64).collect())
    } else {
        let i = if n.op() == "Upsample" || n.opset < 11 {
            1
        } else {
            2
        };
        a.host(i, "scales")?
            .filter(|h| h.numel() > 0)
            .map(|h| h.data.clone())
    };
    let sizes = if n.op() == "Resize" && n.opset >= 11 {
        a.ints(3, "sizes")?.filter(|s| !s.is_empty())
    } else {
        None
    };
    let axes: Vec<usize> = match if n.op() == "Resize" && n.opset >= 18 {
        n.ints("axes")?
    } else {
        None
    } {
        Some(ax) => ax
            .iter()
            .map(|&v| crate::shape::axis(&n.what, v, r))
            .collect::<Result<_>>()?,
        None => (0..r).collect(),
    };
    if n.string("keep_aspect_ratio_policy", "stretch")? != "stretch" {
        return Err(n.unsupported("keep_aspect_ratio_policy other than stretch"));
    }
    let (mut out, mut sc) = (dims.to_vec(), vec![1.0; r]);
    match (scales, sizes) {
        (Some(s), _) if s.len() == axes.len() => {
            for (k, &ax) in axes.iter().enumerate() {
                if s[k].is_nan() || s[k] <= 0.0 {
                    return Err(n.bad(format!("scale {} must be > 0", s[k])));
                }
                sc[ax] = s[k];
                out[ax] = (dims[ax] as f64 * s[k]).floor() as usize;
            }
        }
        (None, Some(s)) if s.len() == axes.len() => {
            for (k, &ax) in axes.iter().enumerate() {
                if s[k] < 1 || s[k] > 65536 {
                    return Err(n.bad(format!("size {} must be in 1..=65536", s[k])));
                }
                out[ax] = s[k] as usize;
                sc[ax] = s[k] as f64 / dims[ax] as f64;
            }
        }
        _ => return Err(n.bad("needs scales or sizes with one value per resized axis")),
    }
    if out.contains(&0) {
        return Err(n.unsupported("a resize to a zero-size tensor"));
    }
    Ok((out, sc))
}

/// The ONNX source coordinate of output index `i` (extent `inp` → `out`, scale `s`).
fn source(mode: &str, i: usize, inp: usize, out: usize, s: f64) -> f64 {
    let i = i as f64;
    match mode {
        "half_pixel" => (i + 0.5) / s - 0.5,
        "pytorch_half_pixel" => {
            if out > 1 {
                (i + 0.5) / s - 0.5
            } else {
                0.0
            }
        }
        // ONNX divides by the unrounded resized length (input extent · scale).
        "align_corners" => {
            let len = inp as f64 * s;
            if out > 1 {
                i * (inp as f64 - 1.0) / (len - 1.0)
            } else {
                0.0
            }
        }
        "tf_half_pixel_for_nn" => (i + 0.5) / s,
        _ => i / s,
    }
}

/// ONNX Resize / Upsample.
pub fn resize(a: &Args) -> Result<Vec<Value>> {
    let n = a.node;
    let x = a.req(0)?;
    let dims = x.dims();
    let (out, sc) = targets(a, &dims)?;
    let mode = n.string("mode", "nearest")?;
    let ctm = if n.op() == "Upsample" || n.opset < 11 {
        "asymmetric".to_string()
    } else {
        n.string("coordinate_transformation_mode", "half_pixel")?
    };
    if n.int("antialias", 0)? != 0 {
        return Err(n.unsupported("antialias = 1"));
    }
    if ctm == "tf_crop_and_resize" {
        return Err(n.unsupported("coordinate_transformation_mode tf_crop_and_resize"));
    }
    match mode.as_str() {
        "nearest" => {
            let nearest = if n.op() == "Upsample" || n.opset < 11 {
                "floor".to_string()
            } else {
                n.string("nearest_mode", "round_prefer_floor")?
            };
            let mut y = x.clone();
            for ax in 0..dims.len() {
                if out[ax] == dims[ax] && sc[ax] == 1.0 {
                    continue;
                }
                let idx: Vec<usize> = (0..out[ax])
                    .map(|i| {
                        let c = source(&ctm, i, dims[ax], out[ax], sc[ax]);
                        let r = match nearest.as_str() {
                            "floor" => c.floor(),
                            "ceil" => c.ceil(),
                            "round_prefer_ceil" => (c + 0.5).floor(),
                            _ => (c - 0.5).ceil(),
                        };
                        r.clamp(0.0, dims[ax] as f64 - 1.0) as usize
                    })
                    .collect();
                y = take(&y, ax, &idx)?;
            }
            Ok(vec![y])
        }
        "linear" | "bilinear" => {
            let r = dims.len();
            if r < 3 || (0..r - 2).any(|ax| out[ax] != dims[ax]) {
                return Err(n.unsupported("linear resize of axes other than the last two"));
            }
            let exact_ratio =
                (r - 2..r).all(|ax| (dims[ax] as f64 / out[ax] as f64 - 1.0 / sc[ax]).abs() < 1e-9);
            // MIL's align-corners sampling divides by the integer output extent.
            let whole_len =
                (r - 2..r).all(|ax| (dims[ax] as f64 * sc[ax] - out[ax] as f64).abs() < 1e-9);
            let sampling = match ctm.as_str() {
                "align_corners" if whole_len => SamplingMode::StrictAlignCorners,
                "asymmetric" if exact_ratio => SamplingMode::Default,
                "half_pixel" | "pytorch_half_pixel" if exact_ratio && out[r - 2] > 1 && out[r - 1] > 1 => SamplingMode::UnalignCorners,
                other => return Err(n.unsupported(&format!("linear resize with coordinate_transformation_mode {other} at scales {:?} (MIL resize_bilinear cannot sample it exactly)", &sc[r - 2..]))),
            };
            let t = super::ops::to_graph(n, x)?;
            let y = t.resize_bilinear_sampled(out[r - 2], out[r - 1], sampling)?;
            Ok(vec![Value::Graph {
                t: y,
                elem: x.elem(),
            }])
        }
        "cubic" => Err(n.unsupported("cubic resize")),
        other => Err(n.bad(format!("mode = '{other}' is not nearest, linear or cubic"))),
    }
}
