//! The host (reference executor) cost constants: defaults, and the calibrated file written by
//! `aneforge calibrate` into the cache dir (atomically; a corrupt file is ignored with a warning).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// File name of the calibration in the cache root.
pub const CALIBRATION_FILE: &str = "host_cost_model.json";

/// Fixed µs of one compute op per kind (dispatch, allocation, the rounding pass), on top of its
/// work / rate; 0 in calibration files written before it existed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpOverhead {
    pub gemm: f64,
    pub conv: f64,
    pub elementwise: f64,
    pub reduce: f64,
    pub data: f64,
}

/// Points the calibration can store on one rate curve.
pub const CURVE_POINTS: usize = 4;

/// A rate that depends on a shape measure ([`crate::cost::NodeWork::size`]): `(size, rate)`
/// points in increasing size measured by probes (a point with size 0 is unused); between points
/// the rate is interpolated linearly in log(size) and log(rate), beyond them it is the nearest
/// point's. No point = no curve (the kind's scalar rate is used).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RateCurve {
    pub points: [[f64; 2]; CURVE_POINTS],
}

impl RateCurve {
    /// No point: the kind's scalar rate is used.
    pub const EMPTY: RateCurve = RateCurve {
        points: [[0.0; 2]; CURVE_POINTS],
    };

    /// A curve through `points` (at most [`CURVE_POINTS`], increasing size).
    pub fn new(points: &[[f64; 2]]) -> RateCurve {
        let mut c = RateCurve::default();
        for (slot, p) in c.points.iter_mut().zip(points) {
            *slot = *p;
        }
        c
    }

    fn used(&self) -> impl Iterator<Item = [f64; 2]> + '_ {
        self.points.iter().copied().filter(|p| p[0] > 0.0)
    }

    /// The rate at `size`, or `None` for an empty curve.
    pub fn rate(&self, size: f64) -> Option<f64> {
        let pts: Vec<[f64; 2]> = self.used().collect();
        let (first, last) = (pts.first()?, pts.last()?);
        if size <= first[0] {
            return Some(first[1]);
        }
        if size >= last[0] {
            return Some(last[1]);
        }
        let w = pts.windows(2).find(|w| size <= w[1][0])?;
        let t = (size.ln() - w[0][0].ln()) / (w[1][0].ln() - w[0][0].ln());
        Some((w[0][1].ln() + t * (w[1][1].ln() - w[0][1].ln())).exp())
    }

    /// Every used point has a finite size and a finite positive rate, sizes strictly increasing.
    fn validate(&self, name: &str) -> Result<()> {
        let mut prev = 0.0;
        for [size, rate] in self.used() {
            if !(size.is_finite() && size > prev && rate.is_finite() && rate > 0.0) {
                return Err(Error::value(
                    "calibration",
                    format!("{name}: point ({size}, {rate}) must have a finite size above the previous one and a finite positive rate"),
                ));
            }
            prev = size;
        }
        Ok(())
    }
}

/// Per-call floor, throughputs and per-op overheads of the executor on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostConstants {
    /// Fixed time of one call (feeding, dispatch, reading outputs) in µs.
    pub floor_us: f64,
    /// Data-movement bandwidth, bytes per µs.
    pub bytes_per_us: f64,
    /// Matrix-product rate, flops per µs.
    pub gemm_flops_per_us: f64,
    /// Convolution rate, flops per µs.
    pub conv_flops_per_us: f64,
    /// Elementwise rate, elements per µs.
    pub elementwise_per_us: f64,
    /// Reduction / softmax / pooling / norm rate, elements per µs (0 = the elementwise rate).
    #[serde(default)]
    pub reduce_per_us: f64,
    /// Fixed µs per compute op, per kind (all 0 = no per-op term).
    #[serde(default)]
    pub op_us: OpOverhead,
    /// Contiguous copy rate (slices, concat, casts, a reshape whose input stays live), bytes per
    /// µs (0 = `bytes_per_us`).
    #[serde(default)]
    pub copy_bytes_per_us: f64,
    /// Matrix-product flops per µs by min(K, N) (empty = `gemm_flops_per_us`).
    #[serde(default)]
    pub gemm_curve: RateCurve,
    /// Convolution flops per µs by min(K, Cout) (empty = `conv_flops_per_us`).
    #[serde(default)]
    pub conv_curve: RateCurve,
    /// Convolution flops per µs by the conv's flops: a small conv runs below its channels' rate
    /// (its per-row and per-call work does not shrink with it), so a conv costs at the lower of
    /// this curve and `conv_curve` (empty = `conv_curve` alone).
    #[serde(default)]
    pub conv_work_curve: RateCurve,
    /// Strided-gather (permute) elements per µs by element count (empty = data bytes over
    /// `bytes_per_us`).
    #[serde(default)]
    pub permute_curve: RateCurve,
    /// Elementwise elements per µs by elements (empty = `elementwise_per_us`).
    #[serde(default)]
    pub elementwise_curve: RateCurve,
    /// Reduction elements per µs by elements (empty = `reduce_per_us`).
    #[serde(default)]
    pub reduce_curve: RateCurve,
    /// Softmax elements per µs by elements, probed on spread values (its exp is data-dependent:
    /// an fp16 table serves only evenly spaced rows; empty = `reduce_curve`).
    #[serde(default)]
    pub softmax_curve: RateCurve,
    /// Contiguous copy bytes per µs by bytes (empty = `copy_bytes_per_us`).
    #[serde(default)]
    pub copy_curve: RateCurve,
    /// Program input and output elements converted per µs at the call's ports (0 = no port term).
    #[serde(default)]
    pub port_elems_per_us: f64,
    /// Fixed µs of one host-stage hand-off in a segmented plan (region → host → region), on top
    /// of the extra region's floor and the crossing bytes.
    #[serde(default)]
    pub cut_us: f64,
    /// Unary elementwise elements per µs by elements, as its own step (empty = `elementwise_curve`).
    #[serde(default)]
    pub unary_curve: RateCurve,
    /// Elementwise elements per µs by elements of a binary op with a one-element operand
    /// (`x · k`; empty = `elementwise_curve`).
    #[serde(default)]
    pub scalar_curve: RateCurve,
    /// Elementwise elements per µs by elements of a binary op whose smaller operand repeats
    /// over the output (a bias row, a per-row statistic; empty = `elementwise_curve`).
    #[serde(default)]
    pub broadcast_curve: RateCurve,
    /// Elements per µs of an op folded into a conv's output pass (see [`super::fused`]); 0 =
    /// folded ops are costed as their own steps.
    #[serde(default)]
    pub epilogue_per_us: f64,
    /// Elements per µs of a binary op inside a fused elementwise run, after the run's first op
    /// (see [`super::fused`]); all three fused curves empty = runs are costed op by op.
    #[serde(default)]
    pub fused_binary_curve: RateCurve,
    /// Elements per µs of a unary op inside a fused elementwise run.
    #[serde(default)]
    pub fused_unary_curve: RateCurve,
    /// Elements per µs of a scalar-operand op (`x · k`) inside a fused elementwise run.
    #[serde(default)]
    pub fused_scalar_curve: RateCurve,
    /// Elements per µs of a host op of a segmented plan (probed with topk; empty = the
    /// elementwise rate).
    #[serde(default)]
    pub host_curve: RateCurve,
    /// Port elements converted per µs by the call's port elements (inputs + outputs; empty =
    /// `port_elems_per_us`).
    #[serde(default)]
    pub port_curve: RateCurve,
}

impl HostConstants {
    /// Uncalibrated defaults: the reference design's host-mode constants (floor 70 µs,
    /// 1.1e5 bytes/µs, 1.45e7 flop/µs for every compute kind, no per-op term).
    pub const DEFAULTS: HostConstants = HostConstants {
        floor_us: 70.0,
        bytes_per_us: 1.1e5,
        gemm_flops_per_us: 1.45e7,
        conv_flops_per_us: 1.45e7,
        elementwise_per_us: 1.45e7,
        reduce_per_us: 1.45e7,
        op_us: OpOverhead {
            gemm: 0.0,
            conv: 0.0,
            elementwise: 0.0,
            reduce: 0.0,
            data: 0.0,
        },
        copy_bytes_per_us: 0.0,
        gemm_curve: RateCurve::EMPTY,
        conv_curve: RateCurve::EMPTY,
        conv_work_curve: RateCurve::EMPTY,
        permute_curve: RateCurve::EMPTY,
        elementwise_curve: RateCurve::EMPTY,
        reduce_curve: RateCurve::EMPTY,
        softmax_curve: RateCurve::EMPTY,
        copy_curve: RateCurve::EMPTY,
        port_elems_per_us: 0.0,
        cut_us: 0.0,
        unary_curve: RateCurve::EMPTY,
        scalar_curve: RateCurve::EMPTY,
        broadcast_curve: RateCurve::EMPTY,
        epilogue_per_us: 0.0,
        fused_binary_curve: RateCurve::EMPTY,
        fused_unary_curve: RateCurve::EMPTY,
        fused_scalar_curve: RateCurve::EMPTY,
        host_curve: RateCurve::EMPTY,
        port_curve: RateCurve::EMPTY,
    };

    /// Every rate finite and positive, the floor, per-op terms, `reduce_per_us`,
    /// `copy_bytes_per_us`, `cut_us` and `epilogue_per_us` finite and ≥ 0, the curves valid; else a value error
    /// naming the field.
    pub fn validate(&self) -> Result<()> {
        let o = &self.op_us;
        let fields = [
            ("floor_us", self.floor_us, true),
            ("bytes_per_us", self.bytes_per_us, false),
            ("gemm_flops_per_us", self.gemm_flops_per_us, false),
            ("conv_flops_per_us", self.conv_flops_per_us, false),
            ("elementwise_per_us", self.elementwise_per_us, false),
            ("reduce_per_us", self.reduce_per_us, true),
            ("op_us.gemm", o.gemm, true),
            ("op_us.conv", o.conv, true),
            ("op_us.elementwise", o.elementwise, true),
            ("op_us.reduce", o.reduce, true),
            ("op_us.data", o.data, true),
            ("copy_bytes_per_us", self.copy_bytes_per_us, true),
            ("cut_us", self.cut_us, true),
            ("port_elems_per_us", self.port_elems_per_us, true),
            ("epilogue_per_us", self.epilogue_per_us, true),
        ];
        for (name, v, zero_ok) in fields {
            if !v.is_finite() || v < 0.0 || (v == 0.0 && !zero_ok) {
                return Err(Error::value(
                    "calibration",
                    format!("{name} must be finite and positive, got {v}"),
                ));
            }
        }
        self.gemm_curve.validate("gemm_curve")?;
        self.conv_curve.validate("conv_curve")?;
        self.conv_work_curve.validate("conv_work_curve")?;
        self.permute_curve.validate("permute_curve")?;
        self.elementwise_curve.validate("elementwise_curve")?;
        self.reduce_curve.validate("reduce_curve")?;
        self.softmax_curve.validate("softmax_curve")?;
        self.copy_curve.validate("copy_curve")?;
        self.unary_curve.validate("unary_curve")?;
        self.scalar_curve.validate("scalar_curve")?;
        self.broadcast_curve.validate("broadcast_curve")?;
        self.fused_binary_curve.validate("fused_binary_curve")?;
        self.fused_unary_curve.validate("fused_unary_curve")?;
        self.fused_scalar_curve.validate("fused_scalar_curve")?;
        self.host_curve.validate("host_curve")?;
        self.port_curve.validate("port_curve")
    }
}

/// Path of the calibration file under the cache root.
pub fn calibration_path() -> PathBuf {
    crate::program::cache_root().join(CALIBRATION_FILE)
}

/// Write `c` atomically to the calibration file (creating the cache root).
pub fn save(c: &HostConstants) -> Result<PathBuf> {
    c.validate()?;
    let path = calibration_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    let text =
        serde_json::to_string_pretty(c).map_err(|e| Error::value("calibration", e.to_string()))?;
    crate::program::write_atomic(&path, |w| std::io::Write::write_all(w, text.as_bytes()))?;
    Ok(path)
}

/// The stored calibration: `Ok(None)` when there is none; a file that does not parse or holds
/// non-finite/non-positive values is an error naming the file (callers warn and ignore it).
pub fn load() -> Result<Option<HostConstants>> {
    let path = calibration_path();
    if !path.exists() {
        return Ok(None);
    }
    let text = crate::program::files::read_regular_text(&path)?;
    let c: HostConstants = serde_json::from_str(&text)
        .map_err(|e| Error::format(&path, None, format!("not a host calibration: {e}")))?;
    c.validate()
        .map_err(|e| Error::format(&path, None, e.to_string()))?;
    Ok(Some(c))
}
