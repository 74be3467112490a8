// SPDX-License-Identifier: GPL-2.0

//! Parsing of values written to oprofilefs files.
//!
//! Legacy `oprofilefs.c` used `simple_strtoul(buf, NULL, 0)`, which silently turned junk into 0
//! and accepted octal. We accept exactly: an unsigned decimal number, or `0x`/`0X` followed by hex
//! digits, optionally followed by a single `\n` (what `echo` appends). Anything else, including an
//! empty value, a sign, inner spaces or a value that does not fit, is an error the kernel reports
//! as `EINVAL`. A leading `0` does not mean octal: `010` is ten.

/// Why a written value was refused. The module maps every variant to `EINVAL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// No digits (empty write, only `\n`, or a bare `0x`).
    Empty,
    /// A byte that is not a digit of the number's base, e.g. `-1`, `12abc`, ` 5`.
    Invalid,
    /// The number does not fit the target type (`u64` here; callers range-check further).
    Overflow,
}

/// Parses `buf` (the bytes of one write) as an unsigned number, see the module docs.
pub fn parse_ulong(buf: &[u8]) -> Result<u64, ParseError> {
    let body = match buf.split_last() {
        Some((b'\n', rest)) => rest,
        _ => buf,
    };
    let (digits, radix) = match body {
        [b'0', b'x' | b'X', rest @ ..] => (rest, 16),
        _ => (body, 10),
    };
    if digits.is_empty() {
        return Err(ParseError::Empty);
    }
    let mut value: u64 = 0;
    for &b in digits {
        let d = match (b as char).to_digit(radix) {
            Some(d) => d,
            None => return Err(ParseError::Invalid),
        };
        value = value
            .checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or(ParseError::Overflow)?;
    }
    Ok(value)
}

/// Parses `buf` and checks `min <= value <= max`; out of range is [`ParseError::Overflow`].
pub fn parse_ulong_in(buf: &[u8], min: u64, max: u64) -> Result<u64, ParseError> {
    let v = parse_ulong(buf)?;
    if v < min || v > max {
        return Err(ParseError::Overflow);
    }
    Ok(v)
}

/// Divides `v` by 10, returning quotient and remainder, with 32-bit divisions only.
///
/// 32-bit ARM kernels do not export the 64-bit division helper (`__aeabi_uldivmod`), so the
/// module cannot use `u64 / 10`; long division over 16-bit chunks keeps every step in `u32`.
pub fn div_rem_10(v: u64) -> (u64, u8) {
    let mut q: u64 = 0;
    let mut rem: u32 = 0;
    for shift in [48u32, 32, 16, 0] {
        let cur = (rem << 16) | ((v >> shift) as u32 & 0xffff);
        q |= u64::from(cur / 10) << shift;
        rem = cur % 10;
    }
    (q, rem as u8)
}

/// Formats `value` as legacy `"%lu\n"` into `out`, returning the used prefix.
pub fn format_ulong(value: u64, out: &mut [u8; 21]) -> &[u8] {
    let mut tmp = [0u8; 20];
    let mut n = 0;
    let mut v = value;
    loop {
        let (q, r) = div_rem_10(v);
        tmp[n] = b'0' + r;
        n += 1;
        v = q;
        if v == 0 {
            break;
        }
    }
    for i in 0..n {
        out[i] = tmp[n - 1 - i];
    }
    out[n] = b'\n';
    &out[..n + 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_decimal_hex_and_newline() {
        assert_eq!(parse_ulong(b"0"), Ok(0));
        assert_eq!(parse_ulong(b"131072\n"), Ok(131072));
        assert_eq!(parse_ulong(b"0x20000"), Ok(0x20000));
        assert_eq!(parse_ulong(b"0XfF\n"), Ok(255));
        assert_eq!(parse_ulong(b"010"), Ok(10));
        assert_eq!(parse_ulong(b"18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn rejects_junk() {
        for bad in [
            &b""[..],
            b"\n",
            b"0x",
            b"0x\n",
            b"-1",
            b"+1",
            b" 1",
            b"1 ",
            b"1\n\n",
            b"12abc",
            b"abc",
            b"0x1g",
            b"1\r\n",
            b"1.5",
            b"\n1",
        ] {
            assert!(
                parse_ulong(bad).is_err(),
                "accepted {:?}",
                core::str::from_utf8(bad)
            );
        }
        assert_eq!(parse_ulong(b""), Err(ParseError::Empty));
        assert_eq!(parse_ulong(b"-1"), Err(ParseError::Invalid));
    }

    #[test]
    fn rejects_overflow() {
        assert_eq!(
            parse_ulong(b"18446744073709551616"),
            Err(ParseError::Overflow)
        );
        assert_eq!(
            parse_ulong(b"0x10000000000000000"),
            Err(ParseError::Overflow)
        );
        assert_eq!(parse_ulong_in(b"5", 1, 4), Err(ParseError::Overflow));
        assert_eq!(parse_ulong_in(b"0", 1, 4), Err(ParseError::Overflow));
        assert_eq!(parse_ulong_in(b"4\n", 1, 4), Ok(4));
    }

    #[test]
    fn div_rem_10_matches_native() {
        for v in [
            0u64,
            9,
            10,
            65535,
            65536,
            655359,
            u32::MAX as u64,
            1 << 40,
            u64::MAX,
            u64::MAX - 7,
        ] {
            assert_eq!(div_rem_10(v), (v / 10, (v % 10) as u8), "{v}");
        }
    }

    #[test]
    fn format_round_trips() {
        let mut b = [0u8; 21];
        assert_eq!(format_ulong(0, &mut b), b"0\n");
        assert_eq!(format_ulong(131072, &mut b), b"131072\n");
        let s = format_ulong(u64::MAX, &mut b).to_vec();
        assert_eq!(parse_ulong(&s), Ok(u64::MAX));
    }
}
