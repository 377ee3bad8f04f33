//! f32 GEMM with arbitrary strides over the `gemm` crate (filled by the linear/conv work).
