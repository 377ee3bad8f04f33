//! Python bindings of aneforge (`aneforge._core`): thin wrappers over the core builders,
//! `compile` / `load` and the loaded `Model`. No logic lives here: every check is the core's,
//! and core errors surface as ValueError / TypeError / NotImplementedError / RuntimeError / OSError.

mod convert;
mod errors;
mod model;
mod models;
mod ops;
mod targets;
mod tensor;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<tensor::PyTensor>()?;
    m.add_class::<model::Model>()?;
    m.add_function(wrap_pyfunction!(ops::input, m)?)?;
    m.add_function(wrap_pyfunction!(ops::image_input, m)?)?;
    m.add_function(wrap_pyfunction!(ops::constant, m)?)?;
    m.add_function(wrap_pyfunction!(ops::conv, m)?)?;
    m.add_function(wrap_pyfunction!(ops::conv_transpose, m)?)?;
    m.add_function(wrap_pyfunction!(ops::dynamic_conv, m)?)?;
    m.add_function(wrap_pyfunction!(ops::geglu, m)?)?;
    m.add_function(wrap_pyfunction!(ops::sdpa, m)?)?;
    m.add_function(wrap_pyfunction!(ops::mha, m)?)?;
    m.add_function(wrap_pyfunction!(ops::cross_attention, m)?)?;
    m.add_function(wrap_pyfunction!(ops::concat, m)?)?;
    m.add_function(wrap_pyfunction!(ops::stack, m)?)?;
    m.add_function(wrap_pyfunction!(ops::gather, m)?)?;
    m.add_function(wrap_pyfunction!(ops::crop, m)?)?;
    m.add_function(wrap_pyfunction!(ops::space_to_depth, m)?)?;
    m.add_function(wrap_pyfunction!(ops::depth_to_space, m)?)?;
    m.add_function(wrap_pyfunction!(ops::pixel_shuffle, m)?)?;
    m.add_function(wrap_pyfunction!(ops::pixel_unshuffle, m)?)?;
    m.add_function(wrap_pyfunction!(ops::resize_nearest_neighbor, m)?)?;
    m.add_function(wrap_pyfunction!(ops::resize_bilinear, m)?)?;
    m.add_function(wrap_pyfunction!(ops::upsample_bilinear, m)?)?;
    m.add_function(wrap_pyfunction!(ops::split, m)?)?;
    m.add_function(wrap_pyfunction!(ops::select, m)?)?;
    m.add_function(wrap_pyfunction!(ops::maximum, m)?)?;
    m.add_function(wrap_pyfunction!(ops::minimum, m)?)?;
    m.add_function(wrap_pyfunction!(ops::batch_norm, m)?)?;
    m.add_function(wrap_pyfunction!(ops::instance_norm, m)?)?;
    m.add_function(wrap_pyfunction!(model::compile, m)?)?;
    m.add_function(wrap_pyfunction!(model::load, m)?)?;
    m.add_function(wrap_pyfunction!(model::export, m)?)?;
    m.add_function(wrap_pyfunction!(targets::preflight, m)?)?;
    m.add_class::<models::PyEncoder>()?;
    m.add_class::<models::PyVision>()?;
    m.add_function(wrap_pyfunction!(models::load_encoder, m)?)?;
    m.add_function(wrap_pyfunction!(models::load_resnet, m)?)?;
    m.add_function(wrap_pyfunction!(models::load_vit, m)?)?;
    m.add_function(wrap_pyfunction!(models::load_espcn, m)?)?;
    m.add_class::<models::PyGpt2>()?;
    m.add_function(wrap_pyfunction!(models::load_gpt2, m)?)?;
    Ok(())
}
