//! `oprof decode`: the stream as a list of its records, each with its byte offset.

use crate::input::stream::{walk, Stream};
use crate::input::validate::{self, Limits};
use anyhow::{Context, Result};
use oprofile_common::event::Decoder;
use std::path::Path;

/// `oprof decode`: a line per record of the stream file `path` with its byte offset, once
/// the stream passed the checks of `limits` ([`validate::check`]). With `force` the records
/// around the bad ones and a `skipped` line per skipped range, and a note of what was skipped.
pub fn listing(path: &Path, limits: &Limits, force: bool) -> Result<(String, Option<String>)> {
    if force {
        return forced_listing(path, limits);
    }
    validate::check(path, limits, false)?;
    let st = Stream::read(path, limits.word_bytes)?;
    let mut out = String::new();
    walk(&st, |off, rec, _| {
        out.push_str(&format!("{off:>8}: {rec:x?}\n"))
    })
    .with_context(|| format!("decoding {}", path.display()))?;
    Ok((out, None))
}

/// `oprof decode --force`: the records that pass the checks, in order with a line per skipped
/// range, and a note of what was skipped.
fn forced_listing(path: &Path, limits: &Limits) -> Result<(String, Option<String>)> {
    let wb = limits.word_bytes;
    let (words, kept) = validate::read_kept(path, limits)?;
    let mut out = String::new();
    let mut skips = kept.skipped.ranges.iter().peekable();
    let skip_line =
        |s: &validate::Skip| format!("{:>8}: skipped {} bytes: {}\n", s.offset, s.bytes, s.reason);
    for r in &kept.ranges {
        while let Some(s) = skips.next_if(|s| s.offset < (r.start * wb) as u64) {
            out.push_str(&skip_line(s));
        }
        // Kept ranges decode (they passed the checks).
        for (at, rec) in Decoder::new(&words[r.clone()], wb).map_while(Result::ok) {
            out.push_str(&format!("{:>8}: {rec:x?}\n", (r.start + at) * wb));
        }
    }
    out.extend(skips.map(skip_line));
    let note = (!kept.skipped.ranges.is_empty()).then(|| kept.skipped.note(path));
    Ok((out, note))
}
