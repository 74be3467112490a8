//! Test fixtures shared by the unit tests (`src/**/tests*.rs`) and the integration tests
//! (`tests/*.rs`): streams made of records, as the module writes them. Not for the tool itself.

use crate::input::stream::Stream;
use oprofile_common::event::{escape_code, Record};

/// `records` as words of `word_bytes` bytes (`usize` encoding widened; 4-byte words keep the
/// low 32 bits, as a 32-bit kernel writes them). Panics on a record that does not encode.
pub fn words(records: &[Record], word_bytes: usize) -> Vec<u64> {
    let mask = escape_code(word_bytes);
    let mut out = vec![];
    for r in records {
        let mut w = [0usize; 7];
        let n = r.encode(&mut w).unwrap();
        out.extend(w[..n].iter().map(|&x| x as u64 & mask));
    }
    out
}

/// `words` as a little-endian byte stream of `word_bytes`-byte words.
pub fn bytes(words: &[u64], word_bytes: usize) -> Vec<u8> {
    words
        .iter()
        .flat_map(|w| w.to_le_bytes()[..word_bytes].to_vec())
        .collect()
}

/// `records` as a 32-bit little-endian stream (ARM32's `/dev/oprofile/buffer`).
pub fn bytes32(records: &[Record]) -> Vec<u8> {
    bytes(&words(records, 4), 4)
}

/// `records` as a decoded 32-bit stream.
pub fn stream(records: &[Record]) -> Stream {
    Stream::from_bytes(&bytes32(records), 4).unwrap()
}

/// `n` bytes of deterministic noise (xorshift64): no stream as the module writes one.
pub fn noise(n: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
