//! Builders: the [`Tensor`](crate::Tensor) methods and free functions that add op nodes to the
//! lazy graph, one file per op family (argument checks live here, shape rules in `ops/`).

pub mod affine;
pub mod attention;
pub mod bridge;
pub mod channel;
pub mod conv;
pub mod conv_transpose;
pub mod einsum;
pub mod elementwise;
pub mod host;
pub mod indexing;
pub mod io;
pub mod layout;
pub mod linear;
pub mod norm;
pub mod pool;
pub mod rearrange;
pub mod reduce;
pub mod resize;
pub mod unary;
