//! Python builders of the bridge layers (`aneforge::graph::build::bridge`): cross_product,
//! cross_correlation, cost_volume, fps, radius_search, minmax_norm, the block rearranges,
//! flatten, input_view, dynamic_slice, scaled_elementwise and the runtime-mask `sdpa`.

use pyo3::prelude::*;

use crate::convert::{ints, tensor};
use crate::host_ops::tensors;
use crate::tensor::{wrap, PyTensor};
use aneforge::graph::build::bridge;

type R = PyResult<PyTensor>;

/// a x b per 3-vector on the last axis (same shapes [..., 3]).
#[pyfunction]
pub fn cross_product(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> R {
    let [a, b] = tensors("cross_product", [(a, "a"), (b, "b")])?;
    wrap(bridge::cross_product(&a, &b))
}

/// Valid, unflipped 2-D correlation of x [H, W] with template [Th, Tw].
#[pyfunction]
pub fn cross_correlation(x: &Bound<'_, PyAny>, template: &Bound<'_, PyAny>) -> R {
    let [x, t] = tensors("cross_correlation", [(x, "x"), (template, "template")])?;
    wrap(bridge::cross_correlation(&x, &t))
}

/// |aux[x] - reference[x + d]| for d in 0..=disparity_range: [R + 1, Wa].
#[pyfunction]
pub fn cost_volume(
    aux: &Bound<'_, PyAny>,
    reference: &Bound<'_, PyAny>,
    disparity_range: i64,
) -> R {
    let [a, r] = tensors("cost_volume", [(aux, "aux"), (reference, "reference")])?;
    wrap(bridge::cost_volume(&a, &r, disparity_range))
}

/// Greedy farthest point sampling of points [N, 3] from point 0: [k, 3].
#[pyfunction]
pub fn fps(points: &Bound<'_, PyAny>, k: i64) -> R {
    wrap(bridge::fps(&tensor(points, "fps", "points")?, k))
}

/// 0/1 membership [N, M] of points [N, 3] within radius of centroids [M, 3].
#[pyfunction]
pub fn radius_search(points: &Bound<'_, PyAny>, centroids: &Bound<'_, PyAny>, radius: f64) -> R {
    let [p, c] = tensors(
        "radius_search",
        [(points, "points"), (centroids, "centroids")],
    )?;
    wrap(bridge::radius_search(&p, &c, radius))
}

/// (x - min) / (max - min + eps) along "width" or "height" of x [N, C, H, W].
#[pyfunction]
#[pyo3(signature = (x, dimension="width", eps=1e-4))]
pub fn minmax_norm(x: &Bound<'_, PyAny>, dimension: &str, eps: f32) -> R {
    wrap(tensor(x, "minmax_norm", "x")?.minmax_norm(dimension, eps))
}

/// scale * (x OP z) for same-shaped x, z; op in add, sub, mul, min, max.
#[pyfunction]
#[pyo3(signature = (x, z, op="add", scale=1.0))]
pub fn scaled_elementwise(x: &Bound<'_, PyAny>, z: &Bound<'_, PyAny>, op: &str, scale: f32) -> R {
    let [x, z] = tensors("scaled_elementwise", [(x, "x"), (z, "z")])?;
    wrap(bridge::scaled_elementwise(&x, &z, op, scale))
}

/// [N, C, H, W] -> [N*bh*bw, C, H/bh, W/bw] (TensorFlow order).
#[pyfunction]
#[pyo3(signature = (x, bh=2, bw=2))]
pub fn space_to_batch(x: &Bound<'_, PyAny>, bh: i64, bw: i64) -> R {
    wrap(tensor(x, "space_to_batch", "x")?.space_to_batch(bh, bw))
}

/// [N*bh*bw, C, H, W] -> [N, C, H*bh, W*bw] (inverse of space_to_batch).
#[pyfunction]
#[pyo3(signature = (x, bh=2, bw=2))]
pub fn batch_to_space(x: &Bound<'_, PyAny>, bh: i64, bw: i64) -> R {
    wrap(tensor(x, "batch_to_space", "x")?.batch_to_space(bh, bw))
}

/// [N, C, H, W] -> [N, bh*bw*C, H/bh, W/bw] (blocks outside channels).
#[pyfunction]
#[pyo3(signature = (x, bh=2, bw=2))]
pub fn space_to_channel(x: &Bound<'_, PyAny>, bh: i64, bw: i64) -> R {
    wrap(tensor(x, "space_to_channel", "x")?.space_to_channel(bh, bw))
}

/// [N, bh*bw*C, H, W] -> [N, C, H*bh, W*bw] (inverse of space_to_channel).
#[pyfunction]
#[pyo3(signature = (x, bh=2, bw=2))]
pub fn channel_to_space(x: &Bound<'_, PyAny>, bh: i64, bw: i64) -> R {
    wrap(tensor(x, "channel_to_space", "x")?.channel_to_space(bh, bw))
}

/// The row-major elements of x as [numel].
#[pyfunction]
pub fn flatten(x: &Bound<'_, PyAny>) -> R {
    wrap(tensor(x, "flatten", "x")?.flatten())
}

/// Elements offset .. offset + size of the flattened x: [size].
#[pyfunction]
pub fn input_view(x: &Bound<'_, PyAny>, offset: i64, size: i64) -> R {
    wrap(tensor(x, "input_view", "x")?.input_view(offset, size))
}

/// The box start[d] .. start[d] + sizes[d] with an int32 start [rank] read at run time.
#[pyfunction]
pub fn dynamic_slice(
    x: &Bound<'_, PyAny>,
    start: &Bound<'_, PyAny>,
    sizes: &Bound<'_, PyAny>,
) -> R {
    let [x, start] = tensors("dynamic_slice", [(x, "x"), (start, "start")])?;
    wrap(x.dynamic_slice(&start, &ints(sizes, "dynamic_slice", "sizes")?))
}

/// The host attention over the last two axes with an optional runtime additive mask Tensor.
pub fn sdpa_host(
    q: aneforge::Tensor,
    k: aneforge::Tensor,
    v: aneforge::Tensor,
    mask: Option<aneforge::Tensor>,
    scale: Option<f32>,
) -> R {
    wrap(bridge::sdpa_host(&q, &k, &v, mask.as_ref(), scale))
}

/// Add this file's functions to the module (`sdpa` is bound in `ops.rs`, which calls `sdpa_host`).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cross_product, m)?)?;
    m.add_function(wrap_pyfunction!(cross_correlation, m)?)?;
    m.add_function(wrap_pyfunction!(cost_volume, m)?)?;
    m.add_function(wrap_pyfunction!(fps, m)?)?;
    m.add_function(wrap_pyfunction!(radius_search, m)?)?;
    m.add_function(wrap_pyfunction!(minmax_norm, m)?)?;
    m.add_function(wrap_pyfunction!(scaled_elementwise, m)?)?;
    m.add_function(wrap_pyfunction!(space_to_batch, m)?)?;
    m.add_function(wrap_pyfunction!(batch_to_space, m)?)?;
    m.add_function(wrap_pyfunction!(space_to_channel, m)?)?;
    m.add_function(wrap_pyfunction!(channel_to_space, m)?)?;
    m.add_function(wrap_pyfunction!(flatten, m)?)?;
    m.add_function(wrap_pyfunction!(input_view, m)?)?;
    m.add_function(wrap_pyfunction!(dynamic_slice, m)?)?;
    Ok(())
}
