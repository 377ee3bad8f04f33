//! fp16 rounding of f32 values in place and lookups in tables indexed by fp16 bit patterns,
//! 8 lanes at a time with x86-64 F16C (and AVX2 for the lookups) when the CPU has it
//! (runtime-detected), else one value at a time through the `half` crate: both give the bits of
//! `half::f16::from_f32(v).to_f32()` (round to nearest even, overflow to ±inf, NaN kept NaN).

use half::f16;

/// Round one value to the nearest fp16 and widen it back (the scalar contract).
#[inline]
pub fn round1(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

/// Whether this CPU has F16C and AVX (the 8-lane conversions).
#[cfg(target_arch = "x86_64")]
fn f16c() -> bool {
    std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx")
}

/// Round every element of `v` to the nearest fp16 in place (see the module contract).
pub fn round_in_place(v: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if f16c() {
        // SAFETY: the features the function is compiled for were just detected.
        unsafe { round_f16c(v) };
        return;
    }
    v.iter_mut().for_each(|x| *x = round1(*x));
}

/// [`round_in_place`] with `vcvtps2ph` (round to nearest even) and `vcvtph2ps`, 8 lanes a step;
/// the tail of fewer than 8 takes [`round1`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
unsafe fn round_f16c(v: &mut [f32]) {
    use std::arch::x86_64::{
        _mm256_cvtph_ps, _mm256_cvtps_ph, _mm256_loadu_ps, _mm256_storeu_ps,
        _MM_FROUND_TO_NEAREST_INT,
    };
    let mut chunks = v.chunks_exact_mut(8);
    for c in &mut chunks {
        // SAFETY: `c` holds exactly 8 f32, read and written unaligned.
        unsafe {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(c.as_ptr()));
            _mm256_storeu_ps(c.as_mut_ptr(), _mm256_cvtph_ps(h));
        }
    }
    chunks
        .into_remainder()
        .iter_mut()
        .for_each(|x| *x = round1(*x));
}

/// dst[i] = src[i] widened to f32 (exact), 8 lanes a step with F16C; panics if the lengths
/// differ. `half`'s slice conversion calls its F16C kernel once per 8 values.
pub fn widen(src: &[f16], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "fp16 widen: lengths differ");
    #[cfg(target_arch = "x86_64")]
    if f16c() {
        // SAFETY: the features the function is compiled for were just detected.
        unsafe { widen_f16c(src, dst) };
        return;
    }
    dst.iter_mut().zip(src).for_each(|(d, h)| *d = h.to_f32());
}

/// dst[i] = src[i] rounded to fp16 (the module contract), 8 lanes a step with F16C; panics if
/// the lengths differ.
pub fn narrow(src: &[f32], dst: &mut [f16]) {
    assert_eq!(src.len(), dst.len(), "fp16 narrow: lengths differ");
    #[cfg(target_arch = "x86_64")]
    if f16c() {
        // SAFETY: the features the function is compiled for were just detected.
        unsafe { narrow_f16c(src, dst) };
        return;
    }
    dst.iter_mut()
        .zip(src)
        .for_each(|(d, &v)| *d = f16::from_f32(v));
}

/// [`widen`] with `vcvtph2ps`; the tail of fewer than 8 through `half`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
unsafe fn widen_f16c(src: &[f16], dst: &mut [f32]) {
    use std::arch::x86_64::{__m128i, _mm256_cvtph_ps, _mm256_storeu_ps, _mm_loadu_si128};
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (d, s) in (&mut d).zip(&mut s) {
        // SAFETY: `s` holds 8 fp16 (16 bytes) and `d` 8 f32, read and written unaligned.
        unsafe {
            let h = _mm_loadu_si128(s.as_ptr().cast::<__m128i>());
            _mm256_storeu_ps(d.as_mut_ptr(), _mm256_cvtph_ps(h));
        }
    }
    let (d, s) = (d.into_remainder(), s.remainder());
    d.iter_mut().zip(s).for_each(|(d, h)| *d = h.to_f32());
}

/// [`narrow`] with `vcvtps2ph` (round to nearest even); the tail through `half`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
unsafe fn narrow_f16c(src: &[f32], dst: &mut [f16]) {
    use std::arch::x86_64::{
        __m128i, _mm256_cvtps_ph, _mm256_loadu_ps, _mm_storeu_si128, _MM_FROUND_TO_NEAREST_INT,
    };
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (d, s) in (&mut d).zip(&mut s) {
        // SAFETY: `s` holds 8 f32 and `d` 8 fp16 (16 bytes), read and written unaligned.
        unsafe {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(s.as_ptr()));
            _mm_storeu_si128(d.as_mut_ptr().cast::<__m128i>(), h);
        }
    }
    let (d, s) = (d.into_remainder(), s.remainder());
    d.iter_mut()
        .zip(s)
        .for_each(|(d, &v)| *d = f16::from_f32(v));
}

/// Entries of a table indexed by fp16 bit pattern.
pub const TABLE_LEN: usize = 1 << 16;

/// The table entry of `v` when `v` is exactly an fp16 value, else `fallback(v)`.
#[inline]
fn lookup1(table: &[f32; TABLE_LEN], v: f32, fallback: &impl Fn(f32) -> f32) -> f32 {
    let h = f16::from_f32(v);
    if h.to_f32().to_bits() == v.to_bits() {
        table[h.to_bits() as usize]
    } else {
        fallback(v)
    }
}

/// y[i] = table[fp16 bits of x[i]] when x[i] is exactly an fp16 value (same f32 bits after a
/// round trip), else fallback(x[i]). Panics if `x` and `y` differ in length.
pub fn lookup(table: &[f32; TABLE_LEN], x: &[f32], y: &mut [f32], fallback: impl Fn(f32) -> f32) {
    assert_eq!(x.len(), y.len(), "lookup: x and y differ in length");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("f16c") && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the features the function is compiled for were just detected.
        unsafe { lookup_avx2(table, x, y, &fallback) };
        return;
    }
    y.iter_mut()
        .zip(x)
        .for_each(|(o, &v)| *o = lookup1(table, v, &fallback));
}

/// [`lookup`] 8 lanes a step with [`lookup8`]; the tail takes [`lookup1`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn lookup_avx2(
    table: &[f32; TABLE_LEN],
    x: &[f32],
    y: &mut [f32],
    fallback: &impl Fn(f32) -> f32,
) {
    use std::arch::x86_64::{_mm256_loadu_ps, _mm256_storeu_ps};
    let (mut xs, mut ys) = (x.chunks_exact(8), y.chunks_exact_mut(8));
    for (xc, yc) in (&mut xs).zip(&mut ys) {
        // SAFETY: `xc` and `yc` hold exactly 8 f32; the features `lookup8` needs are this
        // function's.
        unsafe {
            let v = lookup8(table, _mm256_loadu_ps(xc.as_ptr()), fallback);
            _mm256_storeu_ps(yc.as_mut_ptr(), v);
        }
    }
    for (o, &v) in ys.into_remainder().iter_mut().zip(xs.remainder()) {
        *o = lookup1(table, v, fallback);
    }
}

/// [`lookup1`] of 8 lanes: convert to fp16 and back; when all 8 survive the round trip gather
/// the 8 entries, else read the entry of each lane that survives and call `fallback` for the
/// others.
///
/// # Safety
/// AVX2 and F16C are available; called from a function compiled for them (always inlined
/// there).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn lookup8(
    table: &[f32; TABLE_LEN],
    v: std::arch::x86_64::__m256,
    fallback: &impl Fn(f32) -> f32,
) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
    let back = _mm256_cvtph_ps(h);
    let same = _mm256_cmpeq_epi32(_mm256_castps_si256(back), _mm256_castps_si256(v));
    let hit = _mm256_movemask_ps(_mm256_castsi256_ps(same));
    if hit == 0xff {
        // SAFETY: gather indices are u16 values, inside the 65,536-entry table.
        return unsafe { _mm256_i32gather_ps::<4>(table.as_ptr(), _mm256_cvtepu16_epi32(h)) };
    }
    let (mut bits, mut lanes) = ([0u16; 8], [0f32; 8]);
    // SAFETY: `bits` holds 8 u16 and `lanes` 8 f32, written and read unaligned.
    unsafe {
        _mm_storeu_si128(bits.as_mut_ptr().cast::<__m128i>(), h);
        _mm256_storeu_ps(lanes.as_mut_ptr(), v);
        lookup_lanes(table, hit, &bits, &mut lanes, fallback);
        _mm256_loadu_ps(lanes.as_ptr())
    }
}

/// The lanes of [`lookup8`] when some are off the fp16 grid (lane i's bit in `hit` clear):
/// out of line, so that the gather path keeps its vectors in registers.
#[cfg(target_arch = "x86_64")]
#[cold]
#[inline(never)]
fn lookup_lanes(
    table: &[f32; TABLE_LEN],
    hit: i32,
    bits: &[u16; 8],
    lanes: &mut [f32; 8],
    fallback: &impl Fn(f32) -> f32,
) {
    for (lane, (o, &b)) in lanes.iter_mut().zip(bits).enumerate() {
        *o = match (hit >> lane) & 1 == 1 {
            true => table[b as usize],
            false => fallback(*o),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bits of `half`'s software conversion (independent of any CPU feature): f32 → f16 → f32.
    fn soft(v: f32) -> u32 {
        let h = half_soft_from_f32(v.to_bits());
        half_soft_to_f32(h)
    }

    /// IEEE binary32 → binary16, round to nearest even, written from the formats alone.
    fn half_soft_from_f32(x: u32) -> u16 {
        let sign = ((x >> 16) & 0x8000) as u16;
        let exp = ((x >> 23) & 0xff) as i32;
        let man = x & 0x007f_ffff;
        if exp == 0xff {
            // inf stays inf; NaN keeps its top payload bits and is made quiet.
            return sign
                | 0x7c00
                | if man == 0 {
                    0
                } else {
                    0x0200 | (man >> 13) as u16
                };
        }
        // Value = 1.man × 2^(exp−127) (normal) as a 24-bit integer significand.
        let (sig, e) = if exp == 0 {
            (man, -126 - 23)
        } else {
            (man | 0x0080_0000, exp - 127 - 23)
        };
        if sig == 0 {
            return sign;
        }
        // fp16 quantum at this magnitude: 2^-24 for subnormals, else 2^(e16 − 10).
        let top = 31 - sig.leading_zeros() as i32 + e; // floor(log2 |v|)
        let q = (top - 10).max(-24);
        let shift = q - e;
        let rounded = if shift <= 0 {
            (sig as u64) << (-shift)
        } else if shift >= 40 {
            0
        } else {
            let s = sig as u64;
            let (keep, rest, half) = (s >> shift, s & ((1u64 << shift) - 1), 1u64 << (shift - 1));
            keep + u64::from(rest > half || (rest == half && keep & 1 == 1))
        };
        // value = rounded × 2^q; encode.
        let mut m = rounded;
        let mut qe = q;
        while m >= 2048 {
            m >>= 1;
            qe += 1;
        }
        if m < 1024 {
            return sign | m as u16; // subnormal (q = −24)
        }
        let e16 = qe + 10 + 15;
        if e16 >= 31 {
            return sign | 0x7c00;
        }
        sign | ((e16 as u16) << 10) | (m as u16 & 0x3ff)
    }

    /// IEEE binary16 → binary32 bits (exact).
    fn half_soft_to_f32(h: u16) -> u32 {
        let sign = ((h & 0x8000) as u32) << 16;
        let exp = ((h >> 10) & 0x1f) as u32;
        let man = (h & 0x3ff) as u32;
        match (exp, man) {
            (0, 0) => sign,
            (0, _) => sign | (((man as f32) * 2f32.powi(-24)).to_bits()),
            (31, _) => sign | 0x7f80_0000 | (man << 13),
            _ => sign | ((exp + 112) << 23) | (man << 13),
        }
    }

    /// Every fp16 value, its f32 neighbours and exact midpoints, the overflow edge, NaNs with
    /// payloads, and a million xorshift bit patterns: the fast path, `round1` and an
    /// independent bit-level conversion agree bit for bit; lengths cover the < 8 tail.
    #[test]
    fn rounding_matches_an_independent_conversion() {
        let mut x: Vec<f32> = Vec::new();
        for b in 0..=u16::MAX {
            let v = f16::from_bits(b).to_f32();
            let bits = v.to_bits();
            x.extend([
                v,
                f32::from_bits(bits.wrapping_add(1)),
                f32::from_bits(bits.wrapping_sub(1)),
            ]);
            x.push(f32::from_bits(bits | 0x1000)); // halfway to the next fp16 (normal range)
        }
        x.extend([
            65504.0f32,
            65519.99,
            65520.0,
            1e-8,
            -2.98e-8,
            f32::from_bits(0x7fa0_0001),
        ]);
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1 << 20 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            x.push(f32::from_bits(s as u32));
        }
        for len in [x.len(), 7, 13] {
            let mut got = x[..len].to_vec();
            round_in_place(&mut got);
            for (v, g) in x.iter().zip(&got) {
                assert_eq!(g.to_bits(), round1(*v).to_bits(), "fast vs half at {v:e}");
                assert_eq!(
                    g.to_bits(),
                    soft(*v),
                    "fast vs soft at {v:e} ({:#x})",
                    v.to_bits()
                );
            }
        }
    }

    /// `narrow` on f32 values around every fp16 (exact, ±1 ulp, halfway), overflow, NaN
    /// payloads and random bit patterns, and `widen` on every fp16 bit pattern, equal the
    /// independent bit-level conversions (up to the quieting of signalling NaNs), at lengths
    /// with and without a tail of < 8.
    #[test]
    fn slice_conversions_match_an_independent_conversion() {
        let mut x: Vec<f32> = (0..=u16::MAX)
            .flat_map(|b| {
                let bits = f16::from_bits(b).to_f32().to_bits();
                [0, 1, u32::MAX, 0x1000].map(|d| f32::from_bits(bits.wrapping_add(d)))
            })
            .collect();
        x.extend([65519.99f32, 65520.0, 1e-8, f32::from_bits(0x7fa0_0001)]);
        let mut s = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..1 << 18 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            x.push(f32::from_bits(s as u32));
        }
        let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
        for len in [x.len(), 7, 21] {
            let mut h = vec![f16::ZERO; len];
            narrow(&x[..len], &mut h);
            for (v, g) in x.iter().zip(&h) {
                let want = half_soft_from_f32(v.to_bits());
                assert_eq!(g.to_bits(), want, "narrow at {v:e} ({:#x})", v.to_bits());
            }
            let mut w = vec![0.0f32; len.min(all.len())];
            widen(&all[..w.len()], &mut w);
            for (h, g) in all.iter().zip(&w) {
                // F16C quiets a signalling NaN (as `half`'s F16C path does): payload kept.
                let quiet = |b: u32| if h.is_nan() { b | 0x0040_0000 } else { b };
                let want = quiet(half_soft_to_f32(h.to_bits()));
                assert_eq!(quiet(g.to_bits()), want, "widen {:#x}", h.to_bits());
            }
        }
    }

    /// Every fp16 input (in runs of 8 so the gather path is taken, and mixed with off-grid
    /// values so the per-element path is too) reads its own entry; off-grid values and NaN
    /// payloads fp16 cannot hold take the fallback.
    #[test]
    fn lookup_reads_the_entry_of_exact_fp16_values_only() {
        let table: Box<[f32; TABLE_LEN]> = (0..TABLE_LEN)
            .map(|b| b as f32 + 0.5)
            .collect::<Vec<_>>()
            .try_into()
            .unwrap();
        let fallback = |v: f32| -(v.to_bits() as f32);
        let mut x: Vec<f32> = (0..=u16::MAX).map(|b| f16::from_bits(b).to_f32()).collect();
        let off = [
            1.000_1f32,
            -3.300_1,
            1e-9,
            70000.5,
            f32::from_bits(0x7fc0_0001),
        ];
        for (i, v) in off.iter().enumerate() {
            x.insert(1000 * i + 3, *v);
        }
        x.extend(off);
        let mut got = vec![0f32; x.len()];
        lookup(&table, &x, &mut got, fallback);
        for (v, g) in x.iter().zip(&got) {
            let h = f16::from_f32(*v);
            let want = if h.to_f32().to_bits() == v.to_bits() {
                h.to_bits() as f32 + 0.5
            } else {
                fallback(*v)
            };
            assert_eq!(
                g.to_bits(),
                want.to_bits(),
                "x = {v:e} ({:#x})",
                v.to_bits()
            );
        }
        let hits = got.iter().filter(|g| g.fract() == 0.5).count();
        assert_eq!(
            hits, TABLE_LEN,
            "every fp16 pattern (NaNs included) hits the table"
        );
    }
}
