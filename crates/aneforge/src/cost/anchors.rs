//! The analytic per-target machine: three measured anchors (reference design, spec §4.6) and
//! the scaling of every other arch from the nearest one by core count and clock.

use crate::error::{Error, Result};
use crate::targets::{self, Family, Target};

/// One measured chip: dispatch floor, effective bandwidth and fp16 peak.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Anchor {
    pub arch: &'static str,
    pub floor_us: f64,
    /// Effective streaming bandwidth in GB/s (= 1e3 bytes per µs).
    pub bandwidth_gbs: f64,
    pub peak_tflops: f64,
}

/// The reference design's measured anchors: M1 (h13), M2 Pro (h14), M5 Pro (h17s).
pub const ANCHORS: [Anchor; 3] = [
    Anchor {
        arch: "h13",
        floor_us: 220.0,
        bandwidth_gbs: 9.0,
        peak_tflops: 3.25,
    },
    Anchor {
        arch: "h14",
        floor_us: 100.0,
        bandwidth_gbs: 48.0,
        peak_tflops: 7.3,
    },
    Anchor {
        arch: "h17s",
        floor_us: 110.0,
        bandwidth_gbs: 57.0,
        peak_tflops: 8.9,
    },
];

/// Flops per node at which the utilisation curve reaches 1: eff = peak · min(1, (f/F)^0.38).
pub const UTILISATION_FLOPS: f64 = 1.8e10;
/// Exponent of the utilisation curve.
pub const UTILISATION_EXPONENT: f64 = 0.38;
/// µs of one host-stage hand-off in a segmented plan on a device: the reference design's CUT
/// default (spec §4.6), a projection (no device hand-off has been measured).
pub const PROJECTED_CUT_US: f64 = 200.0;
/// Rows and columns from which a softmax plane (its last two axes) stops fitting on chip: the
/// reference design's attention measurements (its query-tile heuristic keeps every plane under
/// 768 rows; its cross-attention splits only from 768 query rows over 512 keys).
pub const SOFTMAX_WALL: (usize, usize) = (768, 512);
/// Multiple of a walled softmax's memory time: the reference design's measured ~2.4×
/// "materialisation wall" of untiled attention (a projection here, never measured on a device).
pub const SOFTMAX_WALL_FACTOR: f64 = 2.4;
/// The M1 fp16 anchor `project_peak` scales from (TFLOP/s).
pub const M1_PEAK_TFLOPS: f64 = 1.8;

/// Representative arch per family (the one a family-name target is costed as).
pub fn representative(family: Family) -> &'static str {
    match family {
        Family::Older => "h12",
        Family::A13 => "h13",
        Family::A14 => "h14",
        Family::A15 => "h15",
        Family::A16 => "h16s",
    }
}

/// ANE core count by the reference's suffix convention (base 4, g 8, s 16, c 32, d 64;
/// `t1` 16, `m11` 1).
pub fn cores(arch: &str) -> u32 {
    match arch {
        "t1" => 16,
        "m11" => 1,
        _ => match arch
            .trim_start_matches(|c: char| !c.is_ascii_digit())
            .trim_start_matches(|c: char| c.is_ascii_digit())
        {
            "g" => 8,
            "s" => 16,
            "c" => 32,
            "d" => 64,
            _ => 4,
        },
    }
}

/// Generation number of an arch (`h17s` → 17, `m11` → 15 as an A15-family part, `t1` → 13).
fn generation(arch: &str, family: Family) -> u32 {
    match arch {
        "m11" => 15,
        "t1" => 13,
        _ => arch
            .trim_start_matches(|c: char| !c.is_ascii_digit())
            .trim_end_matches(|c: char| !c.is_ascii_digit())
            .parse()
            .unwrap_or(match family {
                Family::Older => 12,
                _ => 13,
            }),
    }
}

/// Recorded maximum ANE clock in GHz, where the reference design's data has one.
pub fn recorded_ghz(arch: &str) -> Option<f64> {
    match generation(arch, Family::A13) {
        _ if arch == "m11" => Some(0.5),
        13 => Some(1.428),
        14 => Some(1.938),
        17 => Some(1.89),
        _ => None,
    }
}

/// The anchor with the nearest generation (ties go to the older anchor).
pub fn nearest_anchor(arch: &str, family: Family) -> &'static Anchor {
    let g = generation(arch, family) as i64;
    ANCHORS
        .iter()
        .min_by_key(|a| (generation(a.arch, Family::A13) as i64 - g).abs())
        .expect("three anchors")
}

/// A target's analytic machine and how it was obtained.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    pub arch: &'static str,
    pub floor_us: f64,
    /// Bytes per µs.
    pub bytes_per_us: f64,
    /// Peak flops per µs (before the utilisation curve).
    pub peak_flops_per_us: f64,
    /// `measured anchor h14`, `scaled from h14 (cores 16/4, clock 1.89/1.938 GHz)` or
    /// `projected from h17s (clock not recorded; cores 4/16)`.
    pub provenance: String,
}

/// Resolve `target` (arch, family or M-series chip name, see [`targets::parse_target`]) to its
/// arch: family names cost their representative.
pub fn resolve(target: &str) -> Result<(&'static str, Family)> {
    let Target { arch, family } = targets::parse_target(target)?;
    targets::require_mil(family, arch)?;
    let arch = arch.unwrap_or_else(|| representative(family));
    Ok((arch, family))
}

/// The analytic machine of `target`: an anchor as measured, else scaled from the nearest anchor
/// (bandwidth by core ratio, floor by inverse clock ratio, peak by cores × clock ratio); an arch
/// whose clock is not recorded keeps the anchor's clock and is labelled projected.
pub fn machine(target: &str) -> Result<Machine> {
    let (arch, family) = resolve(target)?;
    let a = nearest_anchor(arch, family);
    let scale = |floor_ratio: f64, core_ratio: f64, clock_ratio: f64, provenance: String| Machine {
        arch,
        floor_us: a.floor_us * floor_ratio,
        bytes_per_us: a.bandwidth_gbs * 1e3 * core_ratio,
        peak_flops_per_us: a.peak_tflops * 1e6 * core_ratio * clock_ratio,
        provenance,
    };
    if a.arch == arch {
        return Ok(scale(1.0, 1.0, 1.0, format!("measured anchor {arch}")));
    }
    let (ca, ct) = (cores(a.arch), cores(arch));
    let ga = recorded_ghz(a.arch).ok_or_else(|| {
        Error::value(
            "estimate",
            format!("anchor {} has no recorded clock", a.arch),
        )
    })?;
    let core_ratio = f64::from(ct) / f64::from(ca);
    Ok(match recorded_ghz(arch) {
        Some(gt) => scale(
            ga / gt,
            core_ratio,
            gt / ga,
            format!(
                "scaled from {} (cores {ct}/{ca}, clock {gt}/{ga} GHz)",
                a.arch
            ),
        ),
        None => scale(
            1.0,
            core_ratio,
            1.0,
            format!(
                "projected from {} (clock not recorded, taken as the anchor's; cores {ct}/{ca})",
                a.arch
            ),
        ),
    })
}

/// Projected fp16 peak of an arch from the 1.8 TFLOP/s M1 anchor (4 cores at 1.428 GHz),
/// scaled by cores × clock (an unrecorded clock is taken from the nearest anchor).
#[derive(Clone, Debug, PartialEq)]
pub struct PeakProjection {
    pub arch: &'static str,
    pub tflops: f64,
    pub rel_m1: f64,
    pub cores: u32,
    pub ghz: f64,
    /// Whether the clock is recorded for this arch (else taken from the nearest anchor).
    pub clock_recorded: bool,
}

/// [`PeakProjection`] of `target` (arch or family name; unknown names and pre-MIL families are errors).
pub fn project_peak(target: &str) -> Result<PeakProjection> {
    let (arch, family) = resolve(target)?;
    let recorded = recorded_ghz(arch);
    let ghz = match recorded {
        Some(g) => g,
        None => recorded_ghz(nearest_anchor(arch, family).arch).unwrap_or(1.428),
    };
    let cores = cores(arch);
    let rel_m1 = f64::from(cores) * ghz / (4.0 * 1.428);
    Ok(PeakProjection {
        arch,
        tflops: M1_PEAK_TFLOPS * rel_m1,
        rel_m1,
        cores,
        ghz,
        clock_recorded: recorded.is_some(),
    })
}
