//! Python bindings of aneforge (`aneforge._core`): thin wrappers over the core builders,
//! `compile` / `load` and the loaded `Model`. No logic lives here: every check is the core's,
//! and core errors surface as ValueError / TypeError / NotImplementedError / RuntimeError / OSError.

mod census;
mod convert;
mod corpus;
mod errors;
mod model;
mod models;
mod numerics;
mod ops;
mod targets;
mod tensor;
mod train;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<tensor::PyTensor>()?;
    tensor::install_unary_methods(m)?;
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
    m.add_function(wrap_pyfunction!(ops::local_response_norm, m)?)?;
    m.add_function(wrap_pyfunction!(ops::lrn, m)?)?;
    m.add_function(wrap_pyfunction!(ops::einsum, m)?)?;
    m.add_function(wrap_pyfunction!(ops::einsum_native, m)?)?;
    m.add_function(wrap_pyfunction!(ops::affine, m)?)?;
    m.add_function(wrap_pyfunction!(model::compile, m)?)?;
    m.add_function(wrap_pyfunction!(model::load, m)?)?;
    m.add_function(wrap_pyfunction!(model::export, m)?)?;
    m.add_function(wrap_pyfunction!(targets::preflight, m)?)?;
    m.add_function(wrap_pyfunction!(train::_backward, m)?)?;
    m.add_function(wrap_pyfunction!(train::_mse, m)?)?;
    m.add_function(wrap_pyfunction!(train::_softmax_cross_entropy, m)?)?;
    m.add_function(wrap_pyfunction!(census::capabilities, m)?)?;
    m.add_function(wrap_pyfunction!(corpus::conformance_corpus, m)?)?;
    m.add_function(wrap_pyfunction!(corpus::mlpackage_schema, m)?)?;
    m.add_function(wrap_pyfunction!(corpus::mil_op_names, m)?)?;
    m.add_function(wrap_pyfunction!(corpus::unary_ops, m)?)?;
    m.add_class::<numerics::FftPlan>()?;
    m.add_function(wrap_pyfunction!(numerics::fft_plan, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::numerics_compile_count, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::linalg_conjugate_gradient, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::linalg_jacobi, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::linalg_iterative_refine, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::linalg_qr, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::linalg_cholesky, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::linalg_dominant_eig, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::linalg_dominant_svd, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::precision_risk, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::reduce_sum_to_matmul, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::special, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::linalg_lu, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::linalg_least_squares, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::linalg_gmres, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::linalg_eigh, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::linalg_svd, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::linalg_pca, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::dsp_window, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::dsp_convolve, m)?)?;
    m.add_function(wrap_pyfunction!(numerics::dsp_stft, m)?)?;
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
