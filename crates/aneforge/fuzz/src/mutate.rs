//! A deterministic mutation fuzzer (no libFuzzer needed): a SplitMix64 stream picks a seed input
//! and applies 1–4 byte- and token-level mutations (bit flips, interesting integers written
//! over 1/2/4/8 bytes, inserted, deleted and duplicated ranges, truncation, and digit runs of
//! text replaced by boundary numbers such as 0, -1, 65536, 2^31, 2^32 + 1).

/// SplitMix64: a tiny deterministic generator.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A value in 0..n (n ≥ 1).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const INTERESTING: [u64; 12] = [
    0,
    1,
    0x7f,
    0xff,
    0x7fff,
    0xffff,
    65536,
    65537,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    u64::MAX,
];

const NUMBERS: [&str; 10] = [
    "0",
    "-1",
    "1",
    "65536",
    "65537",
    "2147483648",
    "4294967297",
    "99999999999999999999",
    "1e309",
    "nan",
];

/// Applies one random mutation to `b` in place.
pub fn mutate_once(b: &mut Vec<u8>, r: &mut Rng) {
    let len = b.len();
    match r.below(8) {
        0 if len > 0 => {
            let i = r.below(len);
            b[i] ^= 1 << r.below(8);
        }
        1 if len > 0 => {
            let width = [1, 2, 4, 8][r.below(4)];
            let v = INTERESTING[r.below(INTERESTING.len())].to_le_bytes();
            let i = r.below(len);
            let n = width.min(len - i);
            b[i..i + n].copy_from_slice(&v[..n]);
        }
        2 => {
            let i = r.below(len + 1);
            b.insert(i, r.next() as u8);
        }
        3 if len > 0 => {
            let i = r.below(len);
            let n = 1 + r.below((len - i).min(16));
            b.drain(i..i + n);
        }
        4 if len > 0 && len < 1 << 20 => {
            let i = r.below(len);
            let n = 1 + r.below((len - i).min(64));
            let chunk = b[i..i + n].to_vec();
            let at = r.below(len + 1);
            b.splice(at..at, chunk);
        }
        5 if len > 0 => b.truncate(r.below(len)),
        _ => {
            // Replace a run of ASCII digits (picked at random) by a boundary number.
            let digits: Vec<usize> = (0..len).filter(|&i| b[i].is_ascii_digit()).collect();
            if digits.is_empty() {
                return;
            }
            let start = digits[r.below(digits.len())];
            let end = (start..len)
                .find(|&i| !b[i].is_ascii_digit())
                .unwrap_or(len);
            let s = NUMBERS[r.below(NUMBERS.len())].as_bytes();
            b.splice(start..end, s.iter().copied());
        }
    }
}

/// Runs `target` on `iters` mutants of `seeds` drawn from `seed`; returns the executions done.
/// A panic in `target` propagates (the caller reports it with the input, see [`describe`]).
pub fn run(seeds: &[Vec<u8>], iters: u64, seed: u64, target: &dyn Fn(&[u8])) -> u64 {
    let mut r = Rng(seed);
    for s in seeds {
        target(s);
    }
    for _ in 0..iters {
        let mut b = seeds[r.below(seeds.len())].clone();
        for _ in 0..1 + r.below(4) {
            mutate_once(&mut b, &mut r);
        }
        let input = b.clone();
        let hook = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| target(&input)));
        if let Err(p) = hook {
            eprintln!("crash input ({} bytes): {}", input.len(), describe(&input));
            std::panic::resume_unwind(p);
        }
    }
    seeds.len() as u64 + iters
}

/// The input as escaped text (for the crash report and a regression test).
pub fn describe(b: &[u8]) -> String {
    b.iter()
        .flat_map(|&c| std::ascii::escape_default(c))
        .map(char::from)
        .collect()
}
