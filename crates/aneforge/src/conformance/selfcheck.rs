//! `aneforge selfcheck`: run fixed tiny programs through the ANE executor, compare each with the
//! reference executor, and record the machine, the e5rt symbols and which uncertain ABI
//! convention held in a JSON report; `aneforge ops` reads such a report back (the census).

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::conformance::corpus::{conformance, data};
use crate::error::{Error, Result};
use crate::exec::ane::e5rt::{create, status_stats, Conventions, Ctx, Symbol};
use crate::exec::ane::{handles, library, Ane, ESPRESSO};
use crate::exec::{reference::Reference, Executor, Loaded, PortData, PortView, Precision};
use crate::graph::{Graph, Tensor};
use crate::program::Program;
use crate::{input, DType};

/// `format` of a report.
pub const FORMAT: &str = "aneforge-selfcheck-1";
/// Largest accepted max |ane − reference| / max(1, max |reference|).
pub const TOLERANCE: f64 = 1e-2;
/// Buffers allocated and released by the release-convention probe.
const RELEASE_PROBES: usize = 64;

/// Result of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Pass,
    Fail,
    Error,
}

/// One program run on the ANE and compared with the reference executor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    /// The MIL ops its program contains (the census key).
    pub ops: Vec<String>,
    pub outcome: Outcome,
    /// max |ane − reference| over every output element (`None`: did not run, or non-finite).
    pub max_abs_error: Option<f64>,
    /// `max_abs_error` / max(1, max |reference|), compared with [`TOLERANCE`].
    pub rel_error: Option<f64>,
    /// Compile + load time on the ANE, milliseconds.
    pub load_ms: Option<f64>,
    /// Median time of one `execute` on the ANE, microseconds.
    pub latency_us: Option<f64>,
    /// `SelectedBackend` recorded in the compiled bundle's `analytics.mil`, when found.
    pub backend: Option<String>,
    pub error: Option<String>,
}

/// What was observed about the uncertain ABI conventions (ane-dispatch §10 items 1–2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConventionReport {
    pub active: Conventions,
    /// Status words checked, and how many had the upper 32 bits set while the lower 32 said success.
    pub status_words: u64,
    pub upper_half_set: u64,
    pub status_verdict: String,
    /// Probe releases that returned success, and how many of them cleared the handle variable.
    pub release_ok: usize,
    pub release_cleared: usize,
    /// `*_release` failures while dropping handles during the whole run.
    pub release_failures: u64,
    pub release_verdict: String,
}

/// The selfcheck report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub format: String,
    pub aneforge_version: String,
    pub executor: String,
    /// True only for Apple's Espresso framework on macOS; false for a fake library.
    pub hardware: bool,
    pub library: String,
    pub platform: String,
    pub macos_version: Option<String>,
    pub macos_build: Option<String>,
    pub chip: Option<String>,
    /// The `<ARCH>.bundle` name e5rt wrote (e.g. H16S), when found.
    pub ane_family: Option<String>,
    pub symbols: Vec<Symbol>,
    pub conventions: ConventionReport,
    pub checks: Vec<Check>,
    pub passed: usize,
    pub failed: usize,
}

/// Run every check with program directories under `workdir`; `repeat` executes per latency.
pub fn run(workdir: &Path, repeat: usize) -> Result<Report> {
    let e5 = library()?;
    let ane = Ane::from_env()?;
    let relu = |shape: &[usize]| input(shape)?.relu();
    let matmul =
        input(&[1, 64])?.matmul_weight(crate::HostArray::f32(&[64, 32], &data(64 * 32, 99)))?;
    let mut checks = vec![
        compare(&ane, workdir, "relu_1x64", relu(&[1, 64])?, repeat),
        compare(&ane, workdir, "layout_1x3x7", relu(&[1, 3, 7])?, repeat),
        compare(&ane, workdir, "blobfile_matmul", matmul, repeat),
        counter(&ane, workdir, repeat),
    ];
    for mask in [0x4, 0x1] {
        let a = Ane {
            mask,
            ..ane.clone()
        };
        checks.push(compare(
            &a,
            workdir,
            &format!("mask_0x{mask:x}"),
            relu(&[1, 64])?,
            repeat,
        ));
    }
    for (case, t) in conformance()? {
        checks.push(compare(
            &ane,
            workdir,
            &format!("conformance_{case}"),
            t,
            repeat,
        ));
    }
    let conventions = probe_conventions(Ctx {
        e5,
        conv: ane.conventions,
    });
    let passed = checks.iter().filter(|c| c.outcome == Outcome::Pass).count();
    let hardware = e5.path == Path::new(ESPRESSO) && std::env::consts::OS == "macos";
    Ok(Report {
        format: FORMAT.into(),
        aneforge_version: env!("CARGO_PKG_VERSION").into(),
        executor: "ane".into(),
        hardware,
        library: e5.path.display().to_string(),
        platform: format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        macos_version: command("sw_vers", &["-productVersion"]),
        macos_build: command("sw_vers", &["-buildVersion"]),
        chip: command("sysctl", &["-n", "machdep.cpu.brand_string"]),
        ane_family: find(workdir, &family),
        symbols: e5.symbols.clone(),
        conventions,
        failed: checks.len() - passed,
        passed,
        checks,
    })
}

/// Trimmed stdout of a successful command, if any.
fn command(cmd: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|s| !s.is_empty())
}

/// `H16S` from a directory named `H16S.bundle` (an `h`, digits, then letters).
fn family(p: &Path) -> Option<String> {
    let stem = p.file_name()?.to_str()?.strip_suffix(".bundle")?;
    let rest = stem.strip_prefix(['H', 'h'])?;
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    (digits > 0 && rest[digits..].chars().all(|c| c.is_ascii_alphabetic()))
        .then(|| stem.to_uppercase())
}

/// The first `f(path)` over every path under `dir`, depth first in name order.
fn find<T>(dir: &Path, f: &dyn Fn(&Path) -> Option<T>) -> Option<T> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    entries
        .iter()
        .find_map(|p| f(p).or_else(|| if p.is_dir() { find(p, f) } else { None }))
}

/// `X` from `SelectedBackend = string("X")` in an `analytics.mil` file.
fn backend(p: &Path) -> Option<String> {
    if p.file_name()? != "analytics.mil" {
        return None;
    }
    let text = crate::program::files::read_regular_text(p).ok()?;
    let rest = &text[text.find("SelectedBackend")?..];
    let start = rest.find("string(\"")? + 8;
    Some(rest[start..start + rest[start..].find('"')?].to_string())
}

/// Deterministic data for every input port (fp16: values in [-1, 1); uint8: a byte ramp).
pub(crate) fn feed(net: &mut dyn Loaded) -> Result<()> {
    for (i, p) in net.inputs().to_vec().iter().enumerate() {
        if p.dtype == DType::Uint8 {
            let bytes: Vec<u8> = (0..p.numel()).map(|k| (k * 37 % 256) as u8).collect();
            net.set_input(i, PortData::U8(&bytes))?;
        } else {
            net.set_input(i, PortData::F32(&data(p.numel(), i as u64 + 1)))?;
        }
    }
    Ok(())
}

/// Every output of a program as f32.
pub(crate) fn outputs(net: &dyn Loaded) -> Result<Vec<f32>> {
    let mut all = Vec::new();
    for (j, p) in net.outputs().iter().enumerate() {
        let mut o = vec![0.0; p.numel()];
        net.read_output(j, &mut o)?;
        all.extend(o);
    }
    Ok(all)
}

/// (max abs error, relative error) of `got` against `want`; non-finite when they disagree on NaN or ±inf.
pub(crate) fn errors(got: &[f32], want: &[f32]) -> (f64, f64) {
    let mut max = 0.0f64;
    for (&a, &r) in got.iter().zip(want) {
        if a == r || (a.is_nan() && r.is_nan()) {
            continue;
        }
        max = max
            .max(((a as f64) - (r as f64)).abs())
            .max(if a.is_finite() && r.is_finite() {
                0.0
            } else {
                f64::INFINITY
            });
    }
    let scale = want
        .iter()
        .filter(|v| v.is_finite())
        .fold(1.0f64, |m, &v| m.max((v as f64).abs()));
    (max, max / scale)
}

/// The median time of `n` executes, microseconds.
fn latency(net: &mut dyn Loaded, n: usize) -> Result<Option<f64>> {
    let mut t = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        net.execute()?;
        t.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    t.sort_by(f64::total_cmp);
    Ok(t.get(n / 2).copied())
}

/// Run `body` as the check `name`; an error it returns becomes the check's outcome.
fn check(name: &str, body: impl FnOnce(&mut Check) -> Result<()>) -> Check {
    let mut c = Check {
        name: name.into(),
        ops: Vec::new(),
        outcome: Outcome::Error,
        max_abs_error: None,
        rel_error: None,
        load_ms: None,
        latency_us: None,
        backend: None,
        error: None,
    };
    if let Err(e) = body(&mut c) {
        (c.outcome, c.error) = (Outcome::Error, Some(e.to_string()));
    }
    c
}

/// Record (abs, rel) errors and the outcome they imply.
fn judge(c: &mut Check, (abs, rel): (f64, f64)) {
    c.max_abs_error = abs.is_finite().then_some(abs);
    c.rel_error = rel.is_finite().then_some(rel);
    c.outcome = if rel <= TOLERANCE {
        Outcome::Pass
    } else {
        Outcome::Fail
    };
}

/// Write `t`'s program into `workdir/name` and load it on `ane`, timing the load.
fn prepare(
    ane: &Ane,
    workdir: &Path,
    t: Tensor,
    c: &mut Check,
) -> Result<(Program, PathBuf, Box<dyn Loaded>)> {
    // The host's opset: macOS 14 rejects ios18 programs.
    let opset = crate::targets::Opset::resolve(None)?;
    let program = Program::lower_for(
        crate::passes::for_opset(Graph::from_outputs(&[(None, t)])?, opset)?,
        opset,
    )?;
    let names: std::collections::BTreeSet<&str> = program
        .graph
        .nodes
        .iter()
        .map(|n| n.op.family().name())
        .filter(|&n| n != "input")
        .collect();
    c.ops = names.into_iter().map(String::from).collect();
    let dir = program.write_to(&workdir.join(&c.name))?;
    let t0 = Instant::now();
    let net = ane.load(&program, &dir, Precision::Fp16)?;
    c.load_ms = Some(t0.elapsed().as_secs_f64() * 1e3);
    Ok((program, dir, net))
}

/// Run `t` on the ANE and on the reference executor with the same inputs and compare.
fn compare(ane: &Ane, workdir: &Path, name: &str, t: Tensor, repeat: usize) -> Check {
    check(name, |c| {
        let (program, dir, mut net) = prepare(ane, workdir, t, c)?;
        let mut reference = Reference.load(&program, &dir, Precision::Fp16)?;
        feed(net.as_mut())?;
        feed(reference.as_mut())?;
        net.execute()?;
        reference.execute()?;
        judge(
            c,
            errors(&outputs(net.as_ref())?, &outputs(reference.as_ref())?),
        );
        c.latency_us = latency(net.as_mut(), repeat)?;
        c.backend = find(&dir.join("cache"), &backend);
        Ok(())
    })
}

/// Resident state: `x' = x + 1` with the output aliased onto the input counts 1, 2, 3 in place.
fn counter(ane: &Ane, workdir: &Path, repeat: usize) -> Check {
    check("aliased_counter", |c| {
        let (_, _, mut net) = prepare(ane, workdir, input(&[1, 64])?.add_scalar(1.0)?, c)?;
        let (out, inp) = (net.outputs()[0].name.clone(), net.inputs()[0].name.clone());
        net.alias(&out, &inp)?;
        let mut worst = 0.0f64;
        for k in 1..=3 {
            net.execute()?;
            if let PortView::F16(v) = net.input_view(0)? {
                worst = v
                    .iter()
                    .fold(worst, |m, x| m.max((x.to_f64() - k as f64).abs()));
            }
        }
        judge(c, (worst, worst));
        c.latency_us = latency(net.as_mut(), repeat)?;
        Ok(())
    })
}

/// Allocate and release buffers under the active conventions and summarise what held.
fn probe_conventions(ctx: Ctx) -> ConventionReport {
    let (mut ok, mut cleared) = (0, 0);
    for _ in 0..RELEASE_PROBES {
        let released =
            create!(ctx, out, e5rt_buffer_object_alloc(out, 64, 0) => e5rt_buffer_object_release)
                .and_then(|h| h.release());
        if let Ok(c) = released {
            ok += 1;
            cleared += usize::from(c);
        }
    }
    let (words, upper) = status_stats();
    let status_verdict = match (upper, ctx.conv.status) {
        (0, _) => format!("the upper 32 bits were zero in all {words} status words: 32- and 64-bit readings agree"),
        (u, s) => format!("the upper 32 bits were set in {u} of {words} successful status words: only the 32-bit reading works (active: {s:?})"),
    };
    let release_verdict = format!(
        "release by {}: {ok} of {RELEASE_PROBES} probe releases succeeded ({cleared} cleared the handle variable); {} release failures during the run",
        format!("{:?}", ctx.conv.release).to_lowercase(),
        handles::release_failures()
    );
    ConventionReport {
        active: ctx.conv,
        status_words: words,
        upper_half_set: upper,
        status_verdict,
        release_ok: ok,
        release_cleared: cleared,
        release_failures: handles::release_failures(),
        release_verdict,
    }
}

/// Read a report for the census; one not produced on ANE hardware is refused with the reason.
pub fn read_hardware_report(path: &Path) -> Result<Report> {
    let text = crate::program::files::read_regular_text(path)?;
    let r: Report =
        serde_json::from_str(&text).map_err(|e| Error::format(path, None, e.to_string()))?;
    if r.format != FORMAT
        || r.executor != "ane"
        || !r.hardware
        || r.library != ESPRESSO
        || !r.platform.starts_with("macos/")
    {
        return Err(Error::format(path, None, format!("not a hardware selfcheck report (format {}, executor {}, hardware {}, library {}, platform {}); the census only takes reports produced on a Mac's ANE", r.format, r.executor, r.hardware, r.library, r.platform)));
    }
    Ok(r)
}

/// Hardware status of every MIL op over the report's programs that contain it: `pass` /
/// `fail` with the count and the max error, else `unverified`.
pub fn census(report: Option<&Report>) -> Vec<(&'static str, String)> {
    let checks: &[Check] = report.map_or(&[], |r| &r.checks);
    crate::ops::mil_op_names()
        .into_iter()
        .map(|op| {
            let with: Vec<&Check> = checks
                .iter()
                .filter(|c| c.ops.iter().any(|o| o == op))
                .collect();
            let passed = with.iter().filter(|c| c.outcome == Outcome::Pass).count();
            let worst = with
                .iter()
                .map(|c| c.max_abs_error.unwrap_or(f64::INFINITY))
                .fold(0.0, f64::max);
            let status = match with.len() {
                0 => "unverified".to_string(),
                n if passed == n => format!("pass ({n} programs, max error {worst:.3e})"),
                n => format!("fail ({passed} of {n} programs passed, max error {worst:.3e})"),
            };
            (op, status)
        })
        .collect()
}
