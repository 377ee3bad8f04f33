//! Host ops (placeholder module until the host-op framework lands; replaced at merge).

pub mod bridge;
pub mod checks;
pub mod sample;
pub mod scan;
pub mod scatter;
pub mod select;

/// The (outer, extent, inner) split of `shape` around `axis`.
pub fn lanes(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}
