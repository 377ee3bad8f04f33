//! Builders for the unary ops: one method per row of the native table ([`crate::unary_rows!`])
//! and of the composite table below (ops built from existing ops, no MIL op of their own), plus
//! [`Tensor::unary_named`] and [`unary_builders`], which the Python methods read.

use crate::error::{Error, Result};
use crate::graph::Tensor;
use crate::ops::unary::{OpRow, Unary, UNARY_OPS};
use crate::ops::Op;

/// Expands the rows of [`crate::unary_rows!`] into one builder method each.
macro_rules! define_unary_builders {
    ($( $(#[doc = $doc:literal])* $name:ident $variant:ident
        $({ $($field:ident : $arg:literal $(= $default:literal)?),+ })?
        $([mode = $mode:literal])? ; )+) => {
        /// Native unary builders (one MIL op each); parameters are fp16-rounded and must be finite.
        impl Tensor {
            $(
                $(#[doc = $doc])*
                pub fn $name(&self $($(, $field: f32)+)?) -> Result<Tensor> {
                    self.unary(Unary::$variant { $($($field),+)? })
                }
            )+
        }
    };
}

crate::unary_rows!(define_unary_builders);

/// The composite unary table: each row is a doc, a method name and its body over `x` built from
/// existing ops (gradients come from those ops' rules). Generates the methods and
/// [`COMPOSITE_UNARY_OPS`].
macro_rules! composite_unary {
    ($( $(#[doc = $doc:literal])* $name:ident($x:ident) => $body:expr ; )*) => {
        /// Composite unary builders.
        impl Tensor {
            $(
                $(#[doc = $doc])*
                pub fn $name(&self) -> Result<Tensor> {
                    let $x = self;
                    $body
                }
            )*
        }

        /// The registry rows of the composite unary ops, in table order.
        pub const COMPOSITE_UNARY_OPS: &[OpRow] = &[$(OpRow {
            name: stringify!($name),
            doc: concat!($($doc),*),
            params: &[],
        }),*];

        /// The composite builders, in the order of [`COMPOSITE_UNARY_OPS`].
        const COMPOSITE_BUILDERS: &[fn(&Tensor) -> Result<Tensor>] = &[$(Tensor::$name),*];
    };
}

composite_unary! {
    /// ONNX HardSwish, x·relu6(x + 3)/6 = x·clip(x/6 + 1/2, 0, 1): x times `sigmoid_hard(1/6, 1/2)`.
    hardswish(x) => x.mul(&x.sigmoid_hard(1.0 / 6.0, 0.5)?);
    /// Mish, x·tanh(softplus(x)).
    mish(x) => x.mul(&x.softplus()?.tanh()?);
}

/// Every unary builder: the native rows, then the composite rows.
pub fn unary_builders() -> Vec<OpRow> {
    UNARY_OPS
        .iter()
        .chain(COMPOSITE_UNARY_OPS)
        .copied()
        .collect()
}

impl Tensor {
    fn unary(&self, u: Unary) -> Result<Tensor> {
        Tensor::apply1(Op::Unary(u.validated()?), vec![self.clone()])
    }

    /// The unary builder called `name` (a row of [`unary_builders`]) with its parameters in
    /// table order; errors name the op for an unknown name or a wrong parameter count.
    pub fn unary_named(&self, name: &str, params: &[f32]) -> Result<Tensor> {
        if let Some(i) = COMPOSITE_UNARY_OPS.iter().position(|r| r.name == name) {
            if params.is_empty() {
                return COMPOSITE_BUILDERS[i](self);
            }
        }
        match Unary::from_params(name, params) {
            Some(u) => self.unary(u),
            None => Err(match unary_builders().iter().find(|r| r.name == name) {
                Some(row) => Error::value(
                    name,
                    format!(
                        "takes {} parameter(s), got {}",
                        row.params.len(),
                        params.len()
                    ),
                ),
                None => Error::value(name, "is not a unary op"),
            }),
        }
    }
}
