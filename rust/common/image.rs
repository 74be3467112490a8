// SPDX-License-Identifier: GPL-2.0

//! Lines of the oprofilefs `images` file: what each image id (our dcookie) names.
//!
//! One line per id, in the order ids were created: `ID PATH\n`, `ID` in decimal (1, 2, ...; never
//! 0 = `NO_COOKIE` nor `~0` = `INVALID_COOKIE`), `PATH` the absolute path (`d_path`) taken when
//! the id was created (a later rename or unlink does not change it; an image deleted before that
//! ends in ` (deleted)`, as in `/proc/PID/maps`). A newline or backslash inside a path is written
//! as the octal escape `\012` or `\134`, so every line is one image; other bytes are as is.

/// Escaped form of a byte, if it needs one.
fn escape(b: u8) -> Option<&'static [u8; 4]> {
    match b {
        b'\n' => Some(b"\\012"),
        b'\\' => Some(b"\\134"),
        _ => None,
    }
}

/// Bytes [`write_line`] needs for `id` and `path`.
pub fn line_len(id: u32, path: &[u8]) -> usize {
    let digits = {
        let (mut n, mut v) = (1, id);
        while v >= 10 {
            v /= 10;
            n += 1;
        }
        n
    };
    let escaped: usize = path
        .iter()
        .map(|&b| if escape(b).is_some() { 4 } else { 1 })
        .sum();
    digits + 1 + escaped + 1
}

/// Writes the line of `id` and `path` into `out`, returning its length ([`line_len`]), or
/// `None` (writing nothing useful) if `out` is shorter.
pub fn write_line(id: u32, path: &[u8], out: &mut [u8]) -> Option<usize> {
    let out = out.get_mut(..line_len(id, path))?;
    let mut num = [0u8; 21];
    let d = super::parse::format_ulong(id.into(), &mut num);
    let d = &d[..d.len() - 1];
    let mut n = d.len();
    out.get_mut(..n)?.copy_from_slice(d);
    *out.get_mut(n)? = b' ';
    n += 1;
    for &b in path {
        match escape(b) {
            Some(e) => {
                out.get_mut(n..n + 4)?.copy_from_slice(e);
                n += 4;
            }
            None => {
                *out.get_mut(n)? = b;
                n += 1;
            }
        }
    }
    *out.get_mut(n)? = b'\n';
    Some(n + 1)
}

/// Why a line of the `images` file did not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineError {
    /// No `ID PATH` shape (missing space, empty path).
    Shape,
    /// The id is not a decimal number in `1..u32::MAX`.
    BadId,
    /// A backslash not starting `\012` or `\134`.
    BadEscape,
}

/// Parses one line (without its newline) into the id and the unescaped path, written to
/// `path_out` (at least as long as the line); returns the id and the path length.
pub fn parse_line(line: &[u8], path_out: &mut [u8]) -> Result<(u32, usize), LineError> {
    let sp = line
        .iter()
        .position(|&b| b == b' ')
        .ok_or(LineError::Shape)?;
    let (id, path) = (&line[..sp], &line[sp + 1..]);
    if id.is_empty() || path.is_empty() {
        return Err(LineError::Shape);
    }
    let mut v: u32 = 0;
    for &b in id {
        if !b.is_ascii_digit() {
            return Err(LineError::BadId);
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u32::from(b - b'0')))
            .ok_or(LineError::BadId)?;
    }
    if v == 0 || v == u32::MAX {
        return Err(LineError::BadId);
    }
    let mut i = 0;
    let mut n = 0;
    while i < path.len() {
        let b = if path[i] == b'\\' {
            let b = match path.get(i..i + 4) {
                Some(b"\\012") => b'\n',
                Some(b"\\134") => b'\\',
                _ => return Err(LineError::BadEscape),
            };
            i += 4;
            b
        } else {
            i += 1;
            path[i - 1]
        };
        *path_out.get_mut(n).ok_or(LineError::Shape)? = b;
        n += 1;
    }
    Ok((v, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: u32, path: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; line_len(id, path)];
        assert_eq!(write_line(id, path, &mut out), Some(out.len()));
        out
    }

    #[test]
    fn plain_and_escaped_lines_round_trip() {
        assert_eq!(line(1, b"/bin/busybox"), b"1 /bin/busybox\n");
        assert_eq!(line(42, b"/tmp/a b\nc\\d"), b"42 /tmp/a b\\012c\\134d\n");
        for (id, p) in [
            (7u32, &b"/x/y (deleted)"[..]),
            (4_000_000_000, b"/a\\012\n\\"),
        ] {
            let l = line(id, p);
            let mut out = vec![0u8; l.len()];
            let (got, n) = parse_line(&l[..l.len() - 1], &mut out).unwrap();
            assert_eq!((got, &out[..n]), (id, p));
        }
    }

    #[test]
    fn short_buffer_and_bad_lines() {
        let mut small = [0u8; 5];
        assert_eq!(write_line(1, b"/bin/sh", &mut small), None);
        let mut out = [0u8; 64];
        assert_eq!(parse_line(b"12", &mut out), Err(LineError::Shape));
        assert_eq!(parse_line(b"12 ", &mut out), Err(LineError::Shape));
        assert_eq!(parse_line(b"x1 /a", &mut out), Err(LineError::BadId));
        assert_eq!(parse_line(b"0 /a", &mut out), Err(LineError::BadId));
        assert_eq!(
            parse_line(b"99999999999 /a", &mut out),
            Err(LineError::BadId)
        );
        assert_eq!(parse_line(b"3 /a\\n", &mut out), Err(LineError::BadEscape));
        assert_eq!(parse_line(b"3 /a\\01", &mut out), Err(LineError::BadEscape));
    }
}
