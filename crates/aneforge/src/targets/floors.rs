//! Op floors (the oldest family that runs an op natively) and an op's status on a family.

use super::Family;

/// How a family handles an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Runs as is.
    Native,
    /// Below its floor but rewritten from other ops before lowering.
    Decompose,
    /// Below its floor with no rewrite: compiling for the family is an error.
    Reject,
}

impl Status {
    /// `native`, `decompose` or `reject`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Native => "native",
            Status::Decompose => "decompose",
            Status::Reject => "reject",
        }
    }
}

/// MIL ops with a floor above A13: (op, floor, status below the floor). Everything else: A13, native.
const FLOORS: &[(&str, Family, Status)] = &[
    ("sin", Family::A15, Status::Decompose),
    ("cos", Family::A15, Status::Decompose),
    ("random_uniform", Family::A15, Status::Reject),
    ("random_normal", Family::A15, Status::Reject),
    ("random_bernoulli", Family::A15, Status::Reject),
    ("topk", Family::A14, Status::Reject),
    ("argsort", Family::A14, Status::Reject),
    ("crop_resize", Family::A14, Status::Reject),
    ("resample", Family::A14, Status::Reject),
    ("affine", Family::A14, Status::Reject),
];

/// The oldest family that runs MIL op `op` natively.
pub fn op_floor(op: &str) -> Family {
    FLOORS
        .iter()
        .find(|(name, ..)| *name == op)
        .map_or(Family::A13, |(_, floor, _)| *floor)
}

/// The status of MIL op `op` on `family` (nothing runs on OLDER).
pub fn op_status(op: &str, family: Family) -> Status {
    match FLOORS.iter().find(|(name, ..)| *name == op) {
        Some((_, floor, below)) if family < *floor => *below,
        _ if family == Family::Older => Status::Reject,
        _ => Status::Native,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_and_status() {
        use Family::*;
        let row = |op| [A13, A14, A15, A16].map(|f| op_status(op, f));
        assert_eq!(
            row("sin"),
            [
                Status::Decompose,
                Status::Decompose,
                Status::Native,
                Status::Native
            ]
        );
        assert_eq!(row("cos"), row("sin"));
        assert_eq!(
            row("topk"),
            [
                Status::Reject,
                Status::Native,
                Status::Native,
                Status::Native
            ]
        );
        assert_eq!(
            row("random_uniform"),
            [
                Status::Reject,
                Status::Reject,
                Status::Native,
                Status::Native
            ]
        );
        assert_eq!(row("conv"), [Status::Native; 4]);
        assert_eq!(
            (op_floor("sin"), op_floor("argsort"), op_floor("matmul")),
            (A15, A14, A13)
        );
        assert_eq!(op_status("relu", Older), Status::Reject);
        assert_eq!(
            [Status::Native, Status::Decompose, Status::Reject].map(Status::name),
            ["native", "decompose", "reject"]
        );
    }
}
