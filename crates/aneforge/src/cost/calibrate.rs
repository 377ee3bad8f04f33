//! `aneforge calibrate`: measure the reference executor on this machine (per-call floor,
//! bandwidth, gemm / conv flop rates, elementwise rate) from one probe program per constant.

use std::time::{Duration, Instant};

use super::host::HostConstants;
use super::work::graph_work;
use crate::compile::{compile, CompileOptions, Device};
use crate::error::{Error, Result};
use crate::exec::PortData;
use crate::graph::{Graph, Tensor};
use crate::ops::io::HostArray;
use crate::{conv2d, input, ConvOptions};

/// One probe: its name, the constant it measures and the median µs per call.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    pub name: &'static str,
    pub median_us: f64,
    /// Bytes (bandwidth probe) or flops / elements (rate probes) of its one compute node.
    pub work: f64,
}

/// Median µs per call of `outputs` on the reference executor: warm up, then repeat until
/// `budget` has passed (at least 5 calls).
pub fn median_call_us(outputs: &[Tensor], budget: Duration) -> Result<f64> {
    let outs: Vec<(Option<String>, Tensor)> = outputs.iter().map(|t| (None, t.clone())).collect();
    let opts = CompileOptions {
        device: Device::Reference,
        ..CompileOptions::default()
    };
    let mut net = compile(&outs, &opts)?;
    let data: Vec<Vec<f32>> = net
        .inputs()
        .iter()
        .map(|p| {
            let n: usize = p.shape.iter().product();
            (0..n).map(|i| ((i % 17) as f32 - 8.0) / 8.0).collect()
        })
        .collect();
    let ports: Vec<PortData> = data.iter().map(|d| PortData::F32(d)).collect();
    net.run(&ports)?;
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 5 || (start.elapsed() < budget && times.len() < 10_000) {
        let t = Instant::now();
        net.run(&ports)?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i % 13) as f32 - 6.0) / 16.0).collect()
}

/// The work of the one compute node of `y` (bytes for the data probe, flops otherwise).
fn probe_work(y: &Tensor, bytes: bool) -> Result<f64> {
    let g = Graph::from_outputs(&[(None, y.clone())])?;
    let w = graph_work(&g);
    Ok(w.iter()
        .map(|n| if bytes { n.bytes } else { n.flops } as f64)
        .sum())
}

/// Measure every constant; `budget` is the time spent per probe.
pub fn calibrate(budget: Duration) -> Result<(HostConstants, Vec<Probe>)> {
    let tiny = input(&[1, 8])?.add_scalar(1.0)?;
    let floor = median_call_us(std::slice::from_ref(&tiny), budget)?;

    let x = input(&[1, 512, 1024])?;
    let data = x.transpose(&[0, 2, 1])?;
    let gemm_x = input(&[256, 256])?;
    let w = ramp(256 * 256);
    let gemm = gemm_x.matmul(&crate::constant(
        "calibrate",
        HostArray::f32(&[256, 256], &w),
    )?)?;
    let conv_x = input(&[1, 32, 32, 32])?;
    let cw = ramp(32 * 32 * 9);
    let conv = conv2d(
        &conv_x,
        HostArray::f32(&[32, 32, 3, 3], &cw),
        None,
        ConvOptions::default(),
    )?;
    let ew = input(&[1, 512, 512])?;
    let elementwise = ew.mul(&ew.add_scalar(0.5)?)?;

    let mut probes = Vec::new();
    let mut rate = |name: &'static str, y: &Tensor, bytes: bool| -> Result<f64> {
        let median = median_call_us(std::slice::from_ref(y), budget)?;
        let work = probe_work(y, bytes)?;
        probes.push(Probe {
            name,
            median_us: median,
            work,
        });
        let net = median - floor;
        if net <= 0.0 {
            return Err(Error::Runtime {
                op: "calibrate".into(),
                msg: format!("probe {name} ran in {median:.1} µs, not above the {floor:.1} µs floor; rerun on an idle machine"),
            });
        }
        Ok(work / net)
    };
    let bytes_per_us = rate("data", &data, true)?;
    let gemm_flops_per_us = rate("gemm", &gemm, false)?;
    let conv_flops_per_us = rate("conv", &conv, false)?;
    // Two elementwise nodes (add, mul): their summed element counts over the net time.
    let elementwise_per_us = rate("elementwise", &elementwise, false)?;
    let c = HostConstants {
        floor_us: floor,
        bytes_per_us,
        gemm_flops_per_us,
        conv_flops_per_us,
        elementwise_per_us,
    };
    c.validate()?;
    probes.insert(
        0,
        Probe {
            name: "floor",
            median_us: floor,
            work: 0.0,
        },
    );
    Ok((c, probes))
}
