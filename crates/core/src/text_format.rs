//! The text form of a fingerprint: 16 lowercase hex digits out; in, 16 hex digits (optionally after
//! `0x`/`0X`, either case) or 64 binary digits, most significant bit first. Surrounding whitespace is
//! ignored, as PostgreSQL's integer input does. Anything else is rejected; a fixed-width type has no
//! "out of range" case, so 15 or 17 digits are a syntax error too.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError;

/// Displays as a full sentence, ready to be an error DETAIL.
impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Expected 16 hexadecimal digits (optionally after 0x) or 64 binary digits.")
    }
}

impl std::error::Error for ParseError {}

/// Parses the text form of a fingerprint.
pub fn parse_fingerprint(input: &str) -> Result<u64, ParseError> {
    let s = input.trim_matches(|c: char| c.is_ascii_whitespace());
    if s.len() == 64 && s.bytes().all(|b| b == b'0' || b == b'1') {
        return u64::from_str_radix(s, 2).map_err(|_| ParseError);
    }
    let hex = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
    if hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return u64::from_str_radix(hex, 16).map_err(|_| ParseError);
    }
    Err(ParseError)
}

/// The canonical output: 16 lowercase hex digits, no prefix.
pub fn format_hex(fp: u64) -> String {
    format!("{fp:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_hex() {
        for fp in [0u64, 1, !0, 0x0123_4567_89ab_cdef] {
            assert_eq!(parse_fingerprint(&format_hex(fp)), Ok(fp));
        }
        assert_eq!(format_hex(0xAB), "00000000000000ab");
    }

    #[test]
    fn accepts_prefix_case_whitespace_and_binary() {
        assert_eq!(parse_fingerprint("0x0123456789ABCDEF"), Ok(0x0123_4567_89ab_cdef));
        assert_eq!(parse_fingerprint("0X0123456789abcdef"), Ok(0x0123_4567_89ab_cdef));
        assert_eq!(parse_fingerprint("  0123456789abcdef\n"), Ok(0x0123_4567_89ab_cdef));
        let bits = format!("{:064b}", 0x8000_0000_0000_0001u64);
        assert_eq!(parse_fingerprint(&bits), Ok(0x8000_0000_0000_0001));
        // 16 characters of 0/1 are hex, not binary.
        assert_eq!(parse_fingerprint("1000000000000001"), Ok(0x1000_0000_0000_0001));
    }

    #[test]
    fn rejects_everything_else() {
        for bad in [
            "",
            "zz",
            "0x",
            "123456789abcdef",
            "0123456789abcdef0",
            "0x0123456789abcdeg",
            "+123456789abcdef",
            "-123456789abcdef",
            "0x 0123456789abcdef",
            "0b0101",
            &"2".repeat(64),
            &"0".repeat(63),
            &"1".repeat(65),
            "0123456789abcdéf",
        ] {
            assert_eq!(parse_fingerprint(bad), Err(ParseError), "{bad:?}");
        }
    }
}
