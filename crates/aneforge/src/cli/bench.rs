//! `aneforge bench DIR [-n N] [--power]`: the median latency of N calls of a program directory
//! on seeded inputs, and with `--power` (macOS, root) the idle-subtracted energy per call from
//! `powermetrics`.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::emit;
use crate::compile::{load_dir_with, CompileOptions, Compiled};
use crate::cost::power;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::exec::PortData;

/// Seeded inputs for every port: values in [-1, 1) for fp16 ports, 0..=255 for uint8 ports.
enum Feed {
    F32(Vec<f32>),
    U8(Vec<u8>),
}

fn seeded_feeds(net: &Compiled) -> Vec<Feed> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    net.inputs()
        .iter()
        .map(|p| match p.dtype {
            DType::Uint8 => Feed::U8((0..p.numel()).map(|_| (next() >> 56) as u8).collect()),
            _ => Feed::F32(
                (0..p.numel())
                    .map(|_| (next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
                    .collect(),
            ),
        })
        .collect()
}

/// Median and total seconds of `n` calls (after one warm-up call).
fn time_calls(net: &mut Compiled, ports: &[PortData], n: usize) -> Result<(f64, f64)> {
    net.run(ports)?;
    let mut times = Vec::with_capacity(n);
    let start = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        net.run(ports)?;
        times.push(t.elapsed().as_secs_f64());
    }
    let total = start.elapsed().as_secs_f64();
    times.sort_by(f64::total_cmp);
    Ok((times[n / 2], total))
}

/// How long the idle draw is sampled before the calls.
const IDLE_WINDOW: Duration = Duration::from_millis(1000);

/// Run `work` while `powermetrics` samples the CPU, GPU and ANE rails every 100 ms: the parsed
/// samples and `work`'s result (its error comes first).
fn sample_power<T>(work: impl FnOnce() -> Result<T>) -> Result<(Vec<power::PowerSample>, T)> {
    let mut child = Command::new("powermetrics")
        .args(["--samplers", "cpu_power,gpu_power,ane_power", "-i", "100"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| Error::io("powermetrics", e))?;
    let result = work();
    let _ = child.kill();
    let mut text = String::new();
    if let Some(mut s) = child.stdout.take() {
        s.read_to_string(&mut text)
            .map_err(|e| Error::io("powermetrics", e))?;
    }
    let _ = child.wait();
    let result = result?;
    Ok((power::parse_powermetrics(&text)?, result))
}

/// Load `dir`, time `n` calls and print the median; with `power`, sample powermetrics around them.
pub(super) fn bench(dir: &Path, n: usize, power_flag: bool, opts: &CompileOptions) -> Result<()> {
    if n == 0 {
        return Err(Error::value("bench", "-n must be at least 1"));
    }
    if power_flag {
        power::check_available()?;
    }
    let mut net = load_dir_with(dir, opts)?;
    let feeds = seeded_feeds(&net);
    let ports: Vec<PortData> = feeds
        .iter()
        .map(|f| match f {
            Feed::F32(v) => PortData::F32(v),
            Feed::U8(v) => PortData::U8(v),
        })
        .collect();
    let mut out = format!("program: {}\ndevice: {}\n", dir.display(), net.device());
    let (median, _) = if power_flag {
        // The idle draw first (nothing of ours running), then the calls.
        let (idle, ()) = sample_power(|| {
            std::thread::sleep(IDLE_WINDOW);
            Ok(())
        })?;
        let (busy, timed) = sample_power(|| time_calls(&mut net, &ports, n))?;
        let (median, total) = timed;
        let e = power::idle_subtracted(&idle, &busy, n, total)?;
        out += &format!(
            "energy: {:.3} mJ per call combined (CPU + GPU + ANE), {:.3} mJ ANE rail, idle-subtracted (idle {:.0} mW combined, {:.0} mW ANE over {} samples; busy {:.0} mW combined, {:.0} mW ANE over {} samples)\n",
            e.combined_mj,
            e.ane_mj,
            e.idle_combined_mw,
            e.idle_ane_mw,
            idle.len(),
            e.busy_combined_mw,
            e.busy_ane_mw,
            busy.len()
        );
        (median, total)
    } else {
        time_calls(&mut net, &ports, n)?
    };
    out = format!(
        "{out}median per call: {:.1} µs over {n} calls\n",
        median * 1e6
    );
    emit(&out);
    Ok(())
}
