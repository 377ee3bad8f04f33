//! Profiles as reports: N profiled calls of a loaded program folded into rows (op, output
//! shape, bytes, flops, mean µs, share of the call), a text table, Chrome trace JSON (Perfetto,
//! chrome://tracing), and `ANEFORGE_PROFILE=1`, which wraps every loaded program so its table
//! is printed on stderr when the program is dropped.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::exec::clock::Clock;
use crate::exec::profile::{Profile, Span, SpanKind};
use crate::exec::{Loaded, PortData, PortView};
use crate::program::PortSpec;

/// Most calls one profile records (spans are kept per call).
pub const MAX_PROFILE_RUNS: usize = 100_000;

/// One span position of a call, averaged over the calls.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileRow {
    pub kind: SpanKind,
    /// `add`, `stage 1 (topk)`, `program (ane)`.
    pub name: String,
    pub stage: Option<usize>,
    /// Nesting below the call (0 = directly inside it).
    pub depth: u32,
    /// Whether nothing was timed inside it (leaf rows partition the call's timed work).
    pub leaf: bool,
    /// First output shape (op rows only; empty otherwise).
    pub shape: Vec<usize>,
    pub bytes: u64,
    pub flops: u64,
    /// Mean µs per call.
    pub micros: f64,
    /// `micros` / mean µs of the whole call.
    pub share: f64,
}

/// A profile of `runs` calls: mean µs per call, the rows in call order, and the raw spans.
#[derive(Debug)]
pub struct ProfileReport {
    pub device: &'static str,
    /// The clock the spans were timed by.
    pub clock: Clock,
    pub runs: usize,
    pub call_us: f64,
    pub rows: Vec<ProfileRow>,
    pub profile: Profile,
}

/// Spans of call `run` below the call itself, in start order.
fn call_spans(p: &Profile, run: usize) -> Vec<&Span> {
    let mut v: Vec<&Span> = p
        .spans
        .iter()
        .filter(|s| s.run == run && s.kind != SpanKind::Call)
        .collect();
    v.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
    v
}

/// Fold a profile of `runs` calls (each wrapped in one [`SpanKind::Call`] span) into rows;
/// calls with different span layouts are an error.
pub fn report(device: &'static str, runs: usize, profile: Profile) -> Result<ProfileReport> {
    if runs == 0 {
        return Err(Error::value("profile", "repeat must be at least 1"));
    }
    let first = call_spans(&profile, 0);
    let mut sums = vec![0.0; first.len()];
    for run in 0..runs {
        let spans = call_spans(&profile, run);
        if spans.len() != first.len() {
            return Err(Error::Runtime {
                op: "profile".into(),
                msg: format!(
                    "call {run} recorded {} spans, call 0 recorded {}",
                    spans.len(),
                    first.len()
                ),
            });
        }
        sums.iter_mut()
            .zip(&spans)
            .for_each(|(s, span)| *s += span.dur_us);
    }
    let n = runs as f64;
    let call_total: f64 = profile
        .spans
        .iter()
        .filter(|s| s.kind == SpanKind::Call)
        .map(|s| s.dur_us)
        .sum();
    let call_us = call_total / n;
    let rows = first
        .iter()
        .zip(sums)
        .map(|(s, sum)| ProfileRow {
            kind: s.kind,
            name: s.name.clone(),
            stage: s.stage,
            depth: s.depth.saturating_sub(1),
            leaf: s.leaf,
            shape: s
                .label
                .as_ref()
                .map(|l| l.shape.clone())
                .unwrap_or_default(),
            bytes: s.label.as_ref().map_or(0, |l| l.bytes),
            flops: s.label.as_ref().map_or(0, |l| l.flops),
            micros: sum / n,
            share: if call_us > 0.0 {
                sum / n / call_us
            } else {
                0.0
            },
        })
        .collect();
    Ok(ProfileReport {
        device,
        clock: profile.clock(),
        runs,
        call_us,
        rows,
        profile,
    })
}

/// Execute `loaded` `repeat` times on its current inputs, each call one [`SpanKind::Call`]
/// span timed by `clock` (CPU time is robust on a shared machine; it sums every thread), and
/// fold the calls into a report. `repeat` must be 1..=[`MAX_PROFILE_RUNS`].
pub fn profile_calls(
    loaded: &mut dyn Loaded,
    repeat: usize,
    clock: Clock,
) -> Result<ProfileReport> {
    if repeat == 0 || repeat > MAX_PROFILE_RUNS {
        return Err(Error::value(
            "profile",
            format!("repeat must be 1..={MAX_PROFILE_RUNS}, got {repeat}"),
        ));
    }
    let mut p = Profile::with_clock(clock)?;
    for run in 0..repeat {
        profiled_call(loaded, &mut p, run)?;
    }
    report(loaded.device(), repeat, p)
}

/// One call of `loaded` recorded as call `run` of `p` (a failed call leaves no spans).
fn profiled_call(loaded: &mut dyn Loaded, p: &mut Profile, run: usize) -> Result<()> {
    p.run = run;
    let call = p.open();
    let r = loaded.execute_profiled(p);
    p.close(call, "call".into(), SpanKind::Call, None);
    if r.is_err() {
        p.spans.retain(|s| s.run != run);
    }
    r
}

fn fmt_shape(s: &[usize]) -> String {
    if s.is_empty() {
        return String::new();
    }
    let dims: Vec<String> = s.iter().map(usize::to_string).collect();
    format!("[{}]", dims.join(","))
}

impl ProfileReport {
    /// The text table: one line per row (nested rows indented), then the share of the call
    /// the leaf rows account for.
    pub fn table(&self) -> String {
        let mut t = format!(
            "device: {}, {} call(s), {:.1} µs per call (mean, {} clock)\n{:<28} {:>6} {:<18} {:>12} {:>14} {:>11} {:>7}\n",
            self.device, self.runs, self.call_us, self.clock.name(), "op", "stage", "output shape", "bytes", "flops", "µs", "share"
        );
        for r in &self.rows {
            let stage = r.stage.map(|s| s.to_string()).unwrap_or_default();
            let name = format!("{}{}", "  ".repeat(r.depth as usize), r.name);
            let _ = writeln!(
                t,
                "{name:<28} {stage:>6} {:<18} {:>12} {:>14} {:>11.2} {:>6.1}%",
                fmt_shape(&r.shape),
                r.bytes,
                r.flops,
                r.micros,
                r.share * 100.0
            );
        }
        let timed: f64 = self.rows.iter().filter(|r| r.leaf).map(|r| r.share).sum();
        let _ = writeln!(
            t,
            "leaf rows: {:.1}% of the call (the rest is feeding, rounding and hand-offs)",
            timed * 100.0
        );
        t
    }

    /// Chrome trace JSON: one complete (`"ph": "X"`) event per span, µs timestamps, nested by
    /// time (call ⊃ stage ⊃ program/op); args carry the call index, stage and work.
    pub fn chrome_trace(&self) -> Value {
        let mut spans: Vec<&Span> = self.profile.spans.iter().collect();
        spans.sort_by(|a, b| {
            a.start_us
                .total_cmp(&b.start_us)
                .then(a.depth.cmp(&b.depth))
        });
        let events: Vec<Value> = spans
            .iter()
            .map(|s| {
                let mut args = json!({ "run": s.run });
                if let Some(k) = s.stage {
                    args["stage"] = json!(k);
                }
                if let Some(l) = &s.label {
                    args["shape"] = json!(l.shape);
                    args["bytes"] = json!(l.bytes);
                    args["flops"] = json!(l.flops);
                }
                json!({
                    "name": s.name, "cat": s.kind.name(), "ph": "X", "pid": 1, "tid": 1,
                    "ts": s.start_us, "dur": s.dur_us, "args": args,
                })
            })
            .collect();
        json!({ "traceEvents": events, "displayTimeUnit": "ms",
                "otherData": { "device": self.device, "runs": self.runs } })
    }

    /// Write [`ProfileReport::chrome_trace`] to `path` atomically.
    pub fn write_trace(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string(&self.chrome_trace())
            .map_err(|e| Error::value("profile", e.to_string()))?;
        crate::program::write_atomic(path, |w| std::io::Write::write_all(w, text.as_bytes()))
    }
}

/// Whether `ANEFORGE_PROFILE` asks for profiling (set, non-empty, not `0`).
pub fn env_enabled() -> bool {
    std::env::var("ANEFORGE_PROFILE").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// `loaded` itself, or with `ANEFORGE_PROFILE=1` wrapped so every call is profiled (the first
/// [`MAX_PROFILE_RUNS`]) and the table is printed on stderr when the program is dropped.
pub fn wrap_from_env(loaded: Box<dyn Loaded>) -> Box<dyn Loaded> {
    if env_enabled() {
        Box::new(EnvProfiled {
            inner: loaded,
            profile: Profile::new(),
            runs: 0,
        })
    } else {
        loaded
    }
}

/// A loaded program profiled on every call (`ANEFORGE_PROFILE=1`).
struct EnvProfiled {
    inner: Box<dyn Loaded>,
    profile: Profile,
    runs: usize,
}

impl Loaded for EnvProfiled {
    fn device(&self) -> &'static str {
        self.inner.device()
    }
    fn inputs(&self) -> &[PortSpec] {
        self.inner.inputs()
    }
    fn outputs(&self) -> &[PortSpec] {
        self.inner.outputs()
    }
    fn set_input(&mut self, index: usize, data: PortData) -> Result<()> {
        self.inner.set_input(index, data)
    }
    fn execute(&mut self) -> Result<()> {
        if self.runs >= MAX_PROFILE_RUNS {
            return self.inner.execute();
        }
        profiled_call(self.inner.as_mut(), &mut self.profile, self.runs)?;
        self.runs += 1;
        Ok(())
    }
    fn read_output(&self, index: usize, out: &mut [f32]) -> Result<()> {
        self.inner.read_output(index, out)
    }
    fn read_output_i32(&self, index: usize, out: &mut [i32]) -> Result<()> {
        self.inner.read_output_i32(index, out)
    }
    fn alias(&mut self, output: &str, input: &str) -> Result<()> {
        self.inner.alias(output, input)
    }
    fn input_view(&mut self, index: usize) -> Result<PortView<'_>> {
        self.inner.input_view(index)
    }
    fn output_view(&mut self, index: usize) -> Result<PortView<'_>> {
        self.inner.output_view(index)
    }
}

impl Drop for EnvProfiled {
    fn drop(&mut self) {
        if self.runs == 0 {
            return;
        }
        let p = std::mem::take(&mut self.profile);
        match report(self.inner.device(), self.runs, p) {
            Ok(r) => eprint!("ANEFORGE_PROFILE\n{}", r.table()),
            Err(e) => eprintln!("ANEFORGE_PROFILE: {e}"),
        }
    }
}
