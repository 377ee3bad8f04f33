//! Per-family numeric limits (the reference's `LIMITS` table) and what each one bounds.

use super::Family;

/// A numeric limit of the ANE compiler that differs by family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Limit {
    /// Extent of every non-channel axis of every value (all axes of values that are not rank 4).
    MaxTensorDim,
    /// Extent of axis 1 (channels) of rank-4 values.
    ChannelExtent,
    /// Element count of a transpose's input (equal to its output's).
    TransposeExtent,
    /// Kernel width (last weight axis) of a convolution.
    ConvKwMax,
    /// The reference table's reduction/transpose extent; tabled only (its preflight does not check it, nor does ours).
    ReductionTransposeExtent,
}

impl Limit {
    /// Every limit, in table order.
    pub const ALL: [Limit; 5] = [
        Limit::MaxTensorDim,
        Limit::ChannelExtent,
        Limit::TransposeExtent,
        Limit::ConvKwMax,
        Limit::ReductionTransposeExtent,
    ];

    /// The reference's name of the limit (`max_tensor_dim` ...).
    pub fn name(self) -> &'static str {
        match self {
            Limit::MaxTensorDim => "max_tensor_dim",
            Limit::ChannelExtent => "channel_extent",
            Limit::TransposeExtent => "transpose_extent",
            Limit::ConvKwMax => "conv_kw_max",
            Limit::ReductionTransposeExtent => "reduction_transpose_extent",
        }
    }
}

/// The value of `l` on `family` (OLDER, which has no MIL programs, reports A13's).
pub fn limit(l: Limit, family: Family) -> usize {
    let a16 = family == Family::A16;
    match l {
        Limit::MaxTensorDim if a16 => 65536,
        Limit::MaxTensorDim => 16384,
        Limit::ChannelExtent => 65536,
        Limit::TransposeExtent if a16 => (1 << 24) - 1,
        Limit::TransposeExtent => (1 << 23) - 1,
        Limit::ConvKwMax if a16 => 15,
        Limit::ConvKwMax => 13,
        Limit::ReductionTransposeExtent if family >= Family::A15 => 384,
        Limit::ReductionTransposeExtent => 192,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_table() {
        let row = |l| [Family::A13, Family::A14, Family::A15, Family::A16].map(|f| limit(l, f));
        assert_eq!(row(Limit::MaxTensorDim), [16384, 16384, 16384, 65536]);
        assert_eq!(row(Limit::ChannelExtent), [65536; 4]);
        assert_eq!(
            row(Limit::TransposeExtent),
            [8388607, 8388607, 8388607, 16777215]
        );
        assert_eq!(row(Limit::ConvKwMax), [13, 13, 13, 15]);
        assert_eq!(row(Limit::ReductionTransposeExtent), [192, 192, 384, 384]);
        assert_eq!(
            Limit::ALL.map(|l| limit(l, Family::Older)),
            Limit::ALL.map(|l| limit(l, Family::A13))
        );
        assert_eq!(Limit::ALL.map(Limit::name)[4], "reduction_transpose_extent");
    }
}
