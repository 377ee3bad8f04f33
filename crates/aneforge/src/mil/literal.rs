//! MIL literal values (`fp16(0x1.8p+1)`, `fp32(0x1.8p+1)`, `int32(3)`, `int8(0)`, `bool(true)`, `string("x")`,
//! `tensor<int32, [2]>([1, 1])`) and the fp16 hex-float spelling.

use half::f16;

/// A compile-time parameter value printed as a `const()` statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    /// An fp16 scalar, stored as the f32 value of the fp16-rounded number.
    Fp16(f32),
    /// An fp32 scalar.
    Fp32(f32),
    /// A signed 32-bit integer scalar.
    Int32(i32),
    /// A signed 8-bit integer scalar (constexpr zero points).
    Int8(i8),
    /// An unsigned 32-bit integer scalar.
    Uint32(u32),
    /// A boolean scalar.
    Bool(bool),
    /// A string scalar.
    Str(String),
    /// A rank-1 int32 tensor.
    Ints(Vec<i32>),
}

impl Literal {
    /// The MIL type of the literal (`fp16`, `tensor<int32, [n]>` ...).
    pub fn mil_type(&self) -> String {
        match self {
            Literal::Fp16(_) => "fp16".into(),
            Literal::Fp32(_) => "fp32".into(),
            Literal::Int32(_) => "int32".into(),
            Literal::Int8(_) => "int8".into(),
            Literal::Uint32(_) => "uint32".into(),
            Literal::Bool(_) => "bool".into(),
            Literal::Str(_) => "string".into(),
            Literal::Ints(v) => format!("tensor<int32, [{}]>", v.len()),
        }
    }

    /// The MIL value spelling.
    pub fn mil_value(&self) -> String {
        match self {
            Literal::Fp16(v) => format!("fp16({})", hex_f16(*v)),
            Literal::Fp32(v) => format!("fp32({})", hex_f32(*v)),
            Literal::Int32(v) => format!("int32({v})"),
            Literal::Int8(v) => format!("int8({v})"),
            Literal::Uint32(v) => format!("uint32({v})"),
            Literal::Bool(v) => format!("bool({v})"),
            Literal::Str(s) => format!("string(\"{s}\")"),
            Literal::Ints(v) => {
                let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
                format!("tensor<int32, [{}]>([{}])", v.len(), items.join(", "))
            }
        }
    }
}

/// Round an f32 to the nearest fp16 and back (round-to-nearest-even, overflow to ±inf).
pub fn round_f16(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

/// C99 hex float of the fp16-rounded value, shortest form: `0x1.8p+1`, `-0x1p-14`, `0x0p+0`.
pub fn hex_f16(v: f32) -> String {
    let bits = f16::from_f32(v).to_bits() as u32;
    hex_float(bits >> 15 != 0, (bits >> 10) & 0x1f, bits & 0x3ff, 10, 15)
}

/// C99 hex float of an f32, shortest form (as [`hex_f16`], up to 6 fraction digits).
pub fn hex_f32(v: f32) -> String {
    let bits = v.to_bits();
    hex_float(
        bits >> 31 != 0,
        (bits >> 23) & 0xff,
        bits & 0x7f_ffff,
        23,
        127,
    )
}

/// Hex spelling of an IEEE binary value from its sign, biased exponent field and `mbits`-bit mantissa.
fn hex_float(neg: bool, exp: u32, man: u32, mbits: u32, bias: i32) -> String {
    let sign = if neg { "-" } else { "" };
    let top = 1u32 << mbits;
    if exp == (2 * bias + 1) as u32 {
        return if man == 0 {
            format!("{sign}inf")
        } else {
            "nan".into()
        };
    }
    if exp == 0 && man == 0 {
        return format!("{sign}0x0p+0");
    }
    // Normalise subnormals so the leading digit is 1.
    let (mut e, mut m) = if exp == 0 {
        (1 - bias, man)
    } else {
        (exp as i32 - bias, man | top)
    };
    while m & top == 0 {
        m <<= 1;
        e -= 1;
    }
    // Fraction bits left-aligned to whole hex digits, trailing zeros dropped.
    let ndig = mbits.div_ceil(4) as usize;
    let frac = (m & (top - 1)) << (4 * ndig as u32 - mbits);
    let mut digits = format!("{frac:0ndig$x}");
    while digits.ends_with('0') {
        digits.pop();
    }
    let esign = if e >= 0 { "+" } else { "-" };
    if digits.is_empty() {
        format!("{sign}0x1p{esign}{}", e.abs())
    } else {
        format!("{sign}0x1.{digits}p{esign}{}", e.abs())
    }
}

/// Parse a C99 hex float (as written by [`hex_f16`]) or a decimal; `None` if malformed.
pub fn parse_float(s: &str) -> Option<f64> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = if body == "inf" {
        f64::INFINITY
    } else if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        let (mant, exp) = hex.split_once(['p', 'P'])?;
        let exp: i32 = exp.parse().ok()?;
        let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
        if int.is_empty() || int.len() > 8 || frac.len() > 12 {
            return None;
        }
        let mut m = u64::from_str_radix(int, 16).ok()? as f64;
        for (i, c) in frac.chars().enumerate() {
            m += c.to_digit(16)? as f64 / 16f64.powi(i as i32 + 1);
        }
        m * 2f64.powi(exp)
    } else {
        body.parse().ok()?
    };
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_spelling_of_fp16_values() {
        assert_eq!(hex_f16(3.0), "0x1.8p+1");
        assert_eq!(hex_f16(1.0), "0x1p+0");
        assert_eq!(hex_f16(10.0), "0x1.4p+3");
        assert_eq!(hex_f16(-0.5), "-0x1p-1");
        assert_eq!(hex_f16(0.0), "0x0p+0");
        assert_eq!(hex_f16(0.1), "0x1.998p-4"); // fp16(0.1) = 0.0999755859375
        assert_eq!(hex_f16(65504.0), "0x1.ffcp+15");
        assert_eq!(hex_f16(2f32.powi(-24)), "0x1p-24"); // smallest subnormal
    }

    /// fp32 literals print as hex floats and parse back bit-exactly (normal, subnormal, extremes).
    #[test]
    fn fp32_literals_round_trip() {
        assert_eq!(Literal::Fp32(2.0).mil_value(), "fp32(0x1p+1)");
        assert_eq!(Literal::Fp32(0.1).mil_value(), "fp32(0x1.99999ap-4)");
        assert_eq!(Literal::Fp32(1.5).mil_type(), "fp32");
        for v in [
            0.0,
            -0.0,
            1.0,
            -3.75,
            0.1,
            1e-40,
            f32::MIN_POSITIVE,
            f32::MAX,
            f32::from_bits(1),
        ] {
            let s = hex_f32(v);
            assert_eq!(parse_float(&s).unwrap() as f32, v, "{v} printed as {s}");
        }
    }

    #[test]
    fn every_finite_fp16_round_trips_through_hex() {
        for bits in 0u16..=0xffff {
            let h = f16::from_bits(bits);
            if !h.is_finite() {
                continue;
            }
            let s = hex_f16(h.to_f32());
            let back = parse_float(&s).unwrap();
            assert_eq!(back, h.to_f64(), "bits {bits:#06x} printed as {s}");
        }
    }
}
