//! Ascending sort of a short lane of 16-bit keys by a bitonic sorting network on AVX2
//! registers (16 keys per register, the lane padded with `0xFFFF` to a power of two): a stage
//! whose partners sit in different registers is a vertical min/max, one inside a register is a
//! lane shuffle, min/max and blend. The values-only `sort` of short lanes runs it
//! (`host_select`); any correct sort of the same keys gives the same keys, so the scalar
//! fallback (`sort_unstable`) is bit-identical.

/// The longest lane the network sorts (32 registers).
pub const NETWORK_MAX: usize = 512;

/// Lanes per register.
const W: usize = 16;

/// `MASKS[jl][kl]`: lanes `l` of a stage comparing at distance `j = 1 << jl` inside one
/// register of a bitonic merge of blocks `k = 1 << kl` (`kl` in 1..=3; `kl = 4` stands for
/// every `k >= 16`, whose direction is per register) that keep the larger key: `0xFFFF` where
/// `(l & j != 0) != (l & k != 0)`.
const MASKS: [[[u16; W]; 5]; 4] = masks();

const fn masks() -> [[[u16; W]; 5]; 4] {
    let mut m = [[[0u16; W]; 5]; 4];
    let mut jl = 0;
    while jl < 4 {
        let mut kl = 1;
        while kl <= 4 {
            let mut l = 0;
            while l < W {
                let upper = l & (1 << jl) != 0;
                let desc = kl < 4 && l & (1 << kl) != 0;
                if upper != desc {
                    m[jl][kl][l] = 0xFFFF;
                }
                l += 1;
            }
            kl += 1;
        }
        jl += 1;
    }
    m
}

/// Sort `keys` ascending in place when the network applies (the CPU has AVX2 and the lane is
/// at most [`NETWORK_MAX`] long); false, keys untouched, otherwise.
pub fn sort_keys(keys: &mut [u16]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if keys.len() <= NETWORK_MAX && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 and the lane fits the network.
        unsafe { sort_avx2(keys) };
        return true;
    }
    let _ = keys;
    false
}

/// Compare-exchange of every lane of register `$x` with its partner at lane distance `$j`
/// (8, 4, 2 or 1): lanes set in `$mask` keep the larger key.
#[cfg(target_arch = "x86_64")]
macro_rules! exchange {
    ($x:ident, $j:tt, $mask:expr) => {{
        let p = exchange!(@partner $j, $x);
        $x = _mm256_blendv_epi8(_mm256_min_epu16($x, p), _mm256_max_epu16($x, p), $mask);
    }};
    (@partner 8, $x:ident) => { _mm256_permute2x128_si256::<0x01>($x, $x) };
    (@partner 4, $x:ident) => { _mm256_shuffle_epi32::<0x4E>($x) };
    (@partner 2, $x:ident) => { _mm256_shuffle_epi32::<0xB1>($x) };
    (@partner 1, $x:ident) => { _mm256_or_si256(_mm256_slli_epi32::<16>($x), _mm256_srli_epi32::<16>($x)) };
}

/// The bitonic network over `keys` (at most [`NETWORK_MAX`]): each register first sorts its
/// 16 lanes alone (merges of 2, 4, 8, 16; ascending in even registers, descending in odd ones),
/// then every merge of `k >= 32` runs its cross-register stages as vertical min/max and its
/// four in-register stages on one register at a time.
///
/// # Safety
/// The CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sort_avx2(keys: &mut [u16]) {
    use std::arch::x86_64::*;
    let n = keys.len();
    let size = n.next_power_of_two().max(W);
    let regs = size / W;
    let mut buf = [0xFFFFu16; NETWORK_MAX];
    buf[..n].copy_from_slice(keys);
    let mut v = [_mm256_setzero_si256(); NETWORK_MAX / W];
    for (r, reg) in v.iter_mut().enumerate().take(regs) {
        *reg = _mm256_loadu_si256(buf.as_ptr().add(r * W) as *const __m256i);
    }
    let mask = |jl: usize, kl: usize| _mm256_loadu_si256(MASKS[jl][kl].as_ptr() as *const __m256i);
    let ones = _mm256_set1_epi16(-1);
    let (m01, m12, m02, m23, m13, m03) = (
        mask(0, 1),
        mask(1, 2),
        mask(0, 2),
        mask(2, 3),
        mask(1, 3),
        mask(0, 3),
    );
    let up = [mask(0, 4), mask(1, 4), mask(2, 4), mask(3, 4)];
    let down = up.map(|m| _mm256_xor_si256(m, ones));
    for (r, reg) in v.iter_mut().enumerate().take(regs) {
        let mut x = *reg;
        exchange!(x, 1, m01);
        exchange!(x, 2, m12);
        exchange!(x, 1, m02);
        exchange!(x, 4, m23);
        exchange!(x, 2, m13);
        exchange!(x, 1, m03);
        let m = if r % 2 == 1 { &down } else { &up };
        exchange!(x, 8, m[3]);
        exchange!(x, 4, m[2]);
        exchange!(x, 2, m[1]);
        exchange!(x, 1, m[0]);
        *reg = x;
    }
    let mut k = 2 * W;
    while k <= size {
        let mut j = k / 2;
        while j >= W {
            let jr = j / W;
            for r in 0..regs {
                let p = r ^ jr;
                if p > r {
                    let (lo, hi) = (_mm256_min_epu16(v[r], v[p]), _mm256_max_epu16(v[r], v[p]));
                    let desc = (r * W) & k != 0;
                    (v[r], v[p]) = if desc { (hi, lo) } else { (lo, hi) };
                }
            }
            j /= 2;
        }
        for (r, reg) in v.iter_mut().enumerate().take(regs) {
            let mut x = *reg;
            let m = if (r * W) & k != 0 { &down } else { &up };
            exchange!(x, 8, m[3]);
            exchange!(x, 4, m[2]);
            exchange!(x, 2, m[1]);
            exchange!(x, 1, m[0]);
            *reg = x;
        }
        k *= 2;
    }
    for (r, reg) in v.iter().enumerate().take(regs) {
        _mm256_storeu_si256(buf.as_mut_ptr().add(r * W) as *mut __m256i, *reg);
    }
    keys.copy_from_slice(&buf[..n]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_sorts_every_length_up_to_the_limit_like_a_plain_sort() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for n in (0..=NETWORK_MAX).chain([NETWORK_MAX + 1]) {
            // Few distinct keys (ties) on odd lengths, the full range (0xFFFF included) on even.
            let keys: Vec<u16> = (0..n)
                .map(|_| {
                    let r = next();
                    if n % 2 == 1 {
                        (r % 7) as u16 * 0x2491
                    } else {
                        r as u16
                    }
                })
                .collect();
            let mut want = keys.clone();
            want.sort_unstable();
            let mut got = keys.clone();
            if sort_keys(&mut got) {
                assert_eq!(got, want, "n = {n}");
            } else {
                assert_eq!(
                    got, keys,
                    "n = {n}: untouched when the network does not apply"
                );
                #[cfg(target_arch = "x86_64")]
                assert!(n > NETWORK_MAX || !std::arch::is_x86_feature_detected!("avx2"));
            }
        }
    }
}
