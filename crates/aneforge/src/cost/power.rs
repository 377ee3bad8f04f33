//! Energy from macOS `powermetrics`: a parser for its text output (samplers `cpu_power`,
//! `gpu_power`, `ane_power`) and the mJ-per-call arithmetic, idle-subtracted (an idle window
//! sampled before the calls). Sampling itself needs macOS and root.

use crate::error::{Error, Result};

/// One `*** Sampled system activity ... (N ms elapsed) ***` block's power rails.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PowerSample {
    pub elapsed_ms: f64,
    pub cpu_mw: Option<f64>,
    pub gpu_mw: Option<f64>,
    pub ane_mw: Option<f64>,
    /// `Combined Power (CPU + GPU + ANE)`, else the sum of the rails present.
    pub combined_mw: Option<f64>,
}

/// Energy over a sampled window.
#[derive(Clone, Debug, PartialEq)]
pub struct Energy {
    pub samples: usize,
    pub window_ms: f64,
    /// Σ power · elapsed over the samples, in mJ, per rail.
    pub ane_mj: f64,
    pub combined_mj: f64,
}

/// `123 mW` / `1.5 W` after the label's colon, in mW.
fn milliwatts(rest: &str, line: usize) -> Result<f64> {
    let mut it = rest.split_whitespace();
    let (v, unit) = (it.next().unwrap_or(""), it.next().unwrap_or(""));
    let v: f64 = v
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| {
            Error::value(
                "powermetrics",
                format!(
                    "line {line}: power '{}' is not a non-negative number",
                    rest.trim()
                ),
            )
        })?;
    match unit {
        "mW" => Ok(v),
        "W" => Ok(v * 1e3),
        u => Err(Error::value(
            "powermetrics",
            format!("line {line}: unknown power unit '{u}'"),
        )),
    }
}

/// Parse powermetrics text output into its samples; a sample without an elapsed time, a
/// malformed number, or text with no sample is an error naming the line.
pub fn parse_powermetrics(text: &str) -> Result<Vec<PowerSample>> {
    let mut samples: Vec<PowerSample> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let n = i + 1;
        if line.starts_with("*** Sampled system activity") {
            let elapsed = line
                .rsplit_once(" elapsed)")
                .and_then(|(head, _)| head.rsplit_once('('))
                .map(|(_, v)| v.trim_end_matches("ms").trim())
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v > 0.0)
                .ok_or_else(|| {
                    Error::value(
                        "powermetrics",
                        format!("line {n}: sample header without '(<ms>ms elapsed)': {line}"),
                    )
                })?;
            samples.push(PowerSample {
                elapsed_ms: elapsed,
                ..Default::default()
            });
            continue;
        }
        let Some((label, rest)) = line.split_once(':') else {
            continue;
        };
        let slot = match label {
            "CPU Power" => 0,
            "GPU Power" => 1,
            "ANE Power" => 2,
            l if l.starts_with("Combined Power") => 3,
            _ => continue,
        };
        let s = samples.last_mut().ok_or_else(|| {
            Error::value(
                "powermetrics",
                format!("line {n}: '{label}' before any sample header"),
            )
        })?;
        let v = Some(milliwatts(rest, n)?);
        match slot {
            0 => s.cpu_mw = v,
            1 => s.gpu_mw = v,
            2 => s.ane_mw = v,
            _ => s.combined_mw = v,
        }
    }
    if samples.is_empty() {
        return Err(Error::value(
            "powermetrics",
            "no '*** Sampled system activity' sample in the output",
        ));
    }
    for s in &mut samples {
        if s.combined_mw.is_none() {
            let rails = [s.cpu_mw, s.gpu_mw, s.ane_mw];
            if rails.iter().any(Option::is_some) {
                s.combined_mw = Some(rails.iter().flatten().sum());
            }
        }
    }
    Ok(samples)
}

/// Energy of the samples: Σ mW · ms / 1000 = mJ (rails a sample lacks count as 0).
pub fn energy(samples: &[PowerSample]) -> Energy {
    let mj = |f: fn(&PowerSample) -> Option<f64>| {
        samples
            .iter()
            .map(|s| f(s).unwrap_or(0.0) * s.elapsed_ms / 1e3)
            .sum()
    };
    Energy {
        samples: samples.len(),
        window_ms: samples.iter().map(|s| s.elapsed_ms).sum(),
        ane_mj: mj(|s| s.ane_mw),
        combined_mj: mj(|s| s.combined_mw),
    }
}

/// Energy per call with the idle draw subtracted: (mean busy power − mean idle power) × the
/// calls' duration / calls, per rail.
#[derive(Clone, Debug, PartialEq)]
pub struct CallEnergy {
    pub calls: usize,
    /// Mean power of the idle window sampled before the calls, mW.
    pub idle_ane_mw: f64,
    pub idle_combined_mw: f64,
    /// Mean power while the calls ran, mW.
    pub busy_ane_mw: f64,
    pub busy_combined_mw: f64,
    /// Net mJ per call (negative when the calls drew less than idle: within the noise).
    pub ane_mj: f64,
    pub combined_mj: f64,
}

/// Mean power of `e` in mW per rail (`(ane, combined)`); an empty window is an error naming `what`.
fn mean_mw(e: &Energy, what: &str) -> Result<(f64, f64)> {
    if e.samples == 0 || e.window_ms <= 0.0 {
        return Err(Error::value(
            "powermetrics",
            format!("the {what} window has no samples"),
        ));
    }
    Ok((
        e.ane_mj / e.window_ms * 1e3,
        e.combined_mj / e.window_ms * 1e3,
    ))
}

/// Idle-subtracted energy of `calls` calls that took `calls_s` seconds, from the samples of
/// an idle window (before the calls) and of the busy window (around them). No samples in
/// either window, `calls` = 0 or a non-positive / non-finite duration is a value error.
pub fn idle_subtracted(
    idle: &[PowerSample],
    busy: &[PowerSample],
    calls: usize,
    calls_s: f64,
) -> Result<CallEnergy> {
    if calls == 0 || !(calls_s.is_finite() && calls_s > 0.0) {
        return Err(Error::value(
            "powermetrics",
            format!("need ≥ 1 call over a positive duration, got {calls} calls in {calls_s} s"),
        ));
    }
    let (idle_ane_mw, idle_combined_mw) = mean_mw(&energy(idle), "idle")?;
    let (busy_ane_mw, busy_combined_mw) = mean_mw(&energy(busy), "busy")?;
    // mW × s = mJ.
    let per_call = |busy: f64, idle: f64| (busy - idle) * calls_s / calls as f64;
    Ok(CallEnergy {
        calls,
        idle_ane_mw,
        idle_combined_mw,
        busy_ane_mw,
        busy_combined_mw,
        ane_mj: per_call(busy_ane_mw, idle_ane_mw),
        combined_mj: per_call(busy_combined_mw, idle_combined_mw),
    })
}

/// Whether `powermetrics` can be sampled here; else the "unavailable" error naming what is missing.
pub fn check_available() -> Result<()> {
    let unavailable = |reason: &str| Error::Unavailable {
        executor: "powermetrics",
        step: "energy measurement".into(),
        reason: format!("unavailable: needs macOS and root ({reason})"),
    };
    if !cfg!(target_os = "macos") {
        return Err(unavailable(&format!("this is {}", std::env::consts::OS)));
    }
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .ok()
        .is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        return Err(unavailable("not running as root; use sudo"));
    }
    Ok(())
}
