//! ARM EHABI unwind tables: `.ARM.exidx` / `.ARM.extab` and the unwind opcodes of the compact
//! personality routines.
//!
//! Follows "Exception Handling ABI for the ARM Architecture" (IHI 0038): §5 (prel31 offsets),
//! §6 (the index table `.ARM.exidx`: pairs of words, the function start as a prel31 offset,
//! then `EXIDX_CANTUNWIND` (1), an inline entry (bit 31 set: compact model 0) or a prel31
//! offset of the entry in `.ARM.extab`), §6.3 (the compact models: personality index 0 =
//! `__aeabi_unwind_cpp_pr0` (su16: three opcode bytes), 1 and 2 = `__aeabi_unwind_cpp_pr1/2`
//! (lu16/lu32: a count of further words, then two opcode bytes and those words)), §9.3 (the
//! frame unwinding instructions) and §10 (the generic model: a prel31 personality routine
//! address). Generic-model entries are read the way gcc's personality routines
//! (`__gxx_personality_v0`, `__gcc_personality_v0`) lay them out, as Linux and libgcc do: the
//! word after the personality address holds the count of further opcode words in its top
//! byte and three opcode bytes.
//!
//! Addresses are in the ELF's own virtual address space. Opcodes only move `vsp` (the virtual
//! stack pointer) and load core registers r0–r15 from the stack; VFP and iWMMXt pops only move
//! `vsp` (their values are not needed to find callers).

use super::Stack;
use std::rc::Rc;

/// What an index table entry says about its functions (§6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `EXIDX_CANTUNWIND`: the functions cannot be unwound.
    CantUnwind,
    /// A compact model 0 entry held in the index word itself (bit 31 set).
    Inline(u32),
    /// The address of the entry in `.ARM.extab`.
    Extab(u64),
}

/// The `.ARM.exidx` table of one image, with the `.ARM.extab` bytes it points into.
#[derive(Debug, Clone, Default)]
pub struct Exidx {
    /// (function start, entry), sorted by function start; bit 0 (Thumb) of starts cleared.
    entries: Vec<(u64, Entry)>,
    /// The end of the last entry's range: the table does not give it (see [`Exidx::lookup`]).
    last_end: u64,
    /// `.ARM.extab`: (address, bytes).
    extab: Option<(u64, Rc<[u8]>)>,
}

/// Why an entry's opcodes cannot be had or run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// `EXIDX_CANTUNWIND`, or the refuse-to-unwind opcode (`0x80 0x00`).
    CantUnwind,
    /// A malformed or reserved entry or opcode, or a pointer outside `.ARM.extab`.
    BadTable,
    /// A stack read outside the snapshot.
    StackOutside,
}

/// Decodes a prel31 offset (§5): a 31-bit signed offset from `place`, the address of the word.
pub fn prel31(word: u32, place: u64) -> u64 {
    // Sign-extend bit 30 into bit 31, then into 64 bits.
    let off = ((word << 1) as i32 >> 1) as i64;
    place.wrapping_add_signed(off)
}

fn word_at(bytes: &[u8], off: usize) -> Option<u32> {
    let b = bytes.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

impl Exidx {
    /// Reads an index table of `data` at address `addr`, with `.ARM.extab` (`extab`: address and
    /// bytes) and `last_end`, where the last entry's range is taken to end (the table does not
    /// say; the caller bounds it by the function symbol or section at its start). Entries whose
    /// function word has bit 31 set are malformed and skipped.
    pub fn parse(data: &[u8], addr: u64, extab: Option<(u64, Rc<[u8]>)>, last_end: u64) -> Exidx {
        let mut entries = Vec::with_capacity(data.len() / 8);
        for (i, pair) in data.chunks_exact(8).enumerate() {
            let place = addr.wrapping_add(8 * i as u64);
            let (Some(w0), Some(w1)) = (word_at(pair, 0), word_at(pair, 4)) else {
                continue;
            };
            if w0 & 0x8000_0000 != 0 {
                continue;
            }
            let entry = match w1 {
                1 => Entry::CantUnwind,
                w if w & 0x8000_0000 != 0 => Entry::Inline(w),
                w => Entry::Extab(prel31(w, place.wrapping_add(4))),
            };
            entries.push((prel31(w0, place) & !1, entry));
        }
        entries.sort_by_key(|e| e.0);
        Exidx {
            entries,
            last_end,
            extab,
        }
    }

    /// The function starts and entries, sorted.
    pub fn entries(&self) -> &[(u64, Entry)] {
        &self.entries
    }

    /// The entry covering `addr` and its range: from its function start to the next entry's
    /// (for the last entry, to the end given to [`Exidx::parse`]).
    pub fn lookup(&self, addr: u64) -> Option<(Entry, std::ops::Range<u64>)> {
        let i = self
            .entries
            .partition_point(|e| e.0 <= addr)
            .checked_sub(1)?;
        let (start, entry) = self.entries[i];
        let end = self.entries.get(i + 1).map_or(self.last_end, |e| e.0);
        (addr < end).then_some((entry, start..end))
    }

    fn extab_word(&self, addr: u64) -> Result<u32, Stop> {
        let (base, bytes) = self.extab.as_ref().ok_or(Stop::BadTable)?;
        let off = addr
            .checked_sub(*base)
            .and_then(|o| usize::try_from(o).ok())
            .ok_or(Stop::BadTable)?;
        word_at(bytes, off).ok_or(Stop::BadTable)
    }

    /// The unwind opcode bytes of `entry`, in execution order (§6.3, §10 as gcc lays it out).
    pub fn opcodes(&self, entry: Entry) -> Result<Vec<u8>, Stop> {
        match entry {
            Entry::CantUnwind => Err(Stop::CantUnwind),
            // Inline entries can only be compact model 0 (index bits 24-30 zero).
            Entry::Inline(w) if w & 0x7F00_0000 == 0 => {
                Ok(vec![(w >> 16) as u8, (w >> 8) as u8, w as u8])
            }
            Entry::Inline(_) => Err(Stop::BadTable),
            Entry::Extab(at) => self.extab_opcodes(at),
        }
    }

    fn extab_opcodes(&self, at: u64) -> Result<Vec<u8>, Stop> {
        let w0 = self.extab_word(at)?;
        let (first, more, words_at) = if w0 & 0x8000_0000 == 0 {
            // Generic model: personality address, then gcc's count + three opcode bytes.
            let w1 = self.extab_word(at.wrapping_add(4))?;
            (
                vec![(w1 >> 16) as u8, (w1 >> 8) as u8, w1 as u8],
                w1 >> 24,
                at.wrapping_add(8),
            )
        } else {
            match (w0 >> 24) & 0x7F {
                0 => (vec![(w0 >> 16) as u8, (w0 >> 8) as u8, w0 as u8], 0, 0),
                1 | 2 => (
                    vec![(w0 >> 8) as u8, w0 as u8],
                    (w0 >> 16) & 0xFF,
                    at.wrapping_add(4),
                ),
                _ => return Err(Stop::BadTable),
            }
        };
        let mut ops = first;
        for k in 0..u64::from(more) {
            let w = self.extab_word(words_at.wrapping_add(4 * k))?;
            ops.extend_from_slice(&w.to_be_bytes());
        }
        Ok(ops)
    }
}

/// One decoded unwind instruction (§9.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `vsp = vsp + n` (bytes).
    VspAdd(u32),
    /// `vsp = vsp - n` (bytes).
    VspSub(u32),
    /// Pop the core registers of the mask (bit n = rn) from `vsp` upward, lowest first.
    Pop(u16),
    /// `vsp = r[n]`.
    SetVsp(u8),
    /// Pop VFP registers `d[first]`..`d[first+count-1]`: `vsp += 8 * count`, plus 4 for the
    /// FSTMFDX format (`fstmx`).
    PopVfp { first: u8, count: u8, fstmx: bool },
    /// Pop iWMMXt data registers `wR[first]`.. (8 bytes each).
    PopWr { first: u8, count: u8 },
    /// Pop iWMMXt control registers wCGR0-3 of the mask (4 bytes each).
    PopWcgr(u8),
    /// `finish` (`0xb0`).
    Finish,
    /// Refuse to unwind (`0x80 0x00`).
    Refuse,
    /// A spare or reserved encoding (the bytes as read).
    Spare(u8, u8),
}

/// Decodes the first instruction of `ops`: it and its length in bytes; `None` when `ops` is
/// empty or the instruction is cut short.
pub fn decode(ops: &[u8]) -> Option<(Op, usize)> {
    let b = *ops.first()?;
    let next = || ops.get(1).copied();
    Some(match b {
        0x00..=0x3F => (Op::VspAdd((u32::from(b & 0x3F) << 2) + 4), 1),
        0x40..=0x7F => (Op::VspSub((u32::from(b & 0x3F) << 2) + 4), 1),
        0x80..=0x8F => {
            let mask = (u16::from(b & 0x0F) << 8) | u16::from(next()?);
            (
                if mask == 0 {
                    Op::Refuse
                } else {
                    Op::Pop(mask << 4)
                },
                2,
            )
        }
        0x9D | 0x9F => (Op::Spare(b, 0), 1),
        0x90..=0x9F => (Op::SetVsp(b & 0x0F), 1),
        0xA0..=0xAF => {
            let upto: u16 = (1 << ((b & 7) + 1)) - 1;
            let lr = if b & 8 != 0 { 1 << 14 } else { 0 };
            (Op::Pop((upto << 4) | lr), 1)
        }
        0xB0 => (Op::Finish, 1),
        0xB1 => match next()? {
            m @ 0x01..=0x0F => (Op::Pop(u16::from(m)), 2),
            m => (Op::Spare(b, m), 2),
        },
        0xB2 => uleb_vsp(&ops[1..])?,
        0xB3 => {
            let s = next()?;
            (
                Op::PopVfp {
                    first: s >> 4,
                    count: (s & 0xF) + 1,
                    fstmx: true,
                },
                2,
            )
        }
        0xB4..=0xB7 => (Op::Spare(b, 0), 1),
        0xB8..=0xBF => (
            Op::PopVfp {
                first: 8,
                count: (b & 7) + 1,
                fstmx: true,
            },
            1,
        ),
        0xC0..=0xC5 => (
            Op::PopWr {
                first: 10,
                count: (b & 7) + 1,
            },
            1,
        ),
        0xC6 => {
            let s = next()?;
            (
                Op::PopWr {
                    first: s >> 4,
                    count: (s & 0xF) + 1,
                },
                2,
            )
        }
        0xC7 => match next()? {
            m @ 0x01..=0x0F => (Op::PopWcgr(m), 2),
            m => (Op::Spare(b, m), 2),
        },
        0xC8 | 0xC9 => {
            let s = next()?;
            let base = if b == 0xC8 { 16 } else { 0 };
            (
                Op::PopVfp {
                    first: base + (s >> 4),
                    count: (s & 0xF) + 1,
                    fstmx: false,
                },
                2,
            )
        }
        0xD0..=0xD7 => (
            Op::PopVfp {
                first: 8,
                count: (b & 7) + 1,
                fstmx: false,
            },
            1,
        ),
        _ => (Op::Spare(b, 0), 1),
    })
}

/// `0xb2 uleb128`: `vsp = vsp + 0x204 + (uleb128 << 2)`.
fn uleb_vsp(rest: &[u8]) -> Option<(Op, usize)> {
    let mut v: u64 = 0;
    for (i, &b) in rest.iter().enumerate().take(5) {
        v |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            let n = u32::try_from(v.checked_mul(4)?.checked_add(0x204)?).ok()?;
            return Some((Op::VspAdd(n), i + 2));
        }
    }
    None
}

/// Decodes every instruction of `ops` up to and including the first `finish` (the rest is
/// padding); a truncated instruction ends the list.
pub fn decode_all(ops: &[u8]) -> Vec<Op> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some((op, n)) = ops.get(at..).and_then(decode) {
        out.push(op);
        at += n;
        if op == Op::Finish {
            break;
        }
    }
    out
}

/// The bytes the instructions move `vsp` by when `SetVsp` does not occur: the frame's size as
/// the prologue pushed it (`None` with a `SetVsp`, a `VspSub` below the start or a bad op).
pub fn frame_size(ops: &[Op]) -> Option<u32> {
    let mut size: u32 = 0;
    for op in ops {
        size = match *op {
            Op::VspAdd(n) => size.checked_add(n)?,
            Op::VspSub(n) => size.checked_sub(n)?,
            Op::Pop(mask) => size.checked_add(4 * mask.count_ones())?,
            Op::PopVfp { count, fstmx, .. } => {
                size.checked_add(8 * u32::from(count) + 4 * u32::from(fstmx))?
            }
            Op::PopWr { count, .. } => size.checked_add(8 * u32::from(count))?,
            Op::PopWcgr(m) => size.checked_add(4 * m.count_ones())?,
            Op::Finish => return Some(size),
            Op::SetVsp(_) | Op::Refuse | Op::Spare(..) => return None,
        };
    }
    Some(size)
}

/// Runs the instructions `ops` on the core registers `r` (r13 = SP: the initial `vsp`) reading
/// `stack` (§9.3): afterwards r13 = the final `vsp`, and r15 = the popped PC, or r14 when no
/// instruction loaded r15.
pub fn execute(ops: &[Op], r: &mut [u32; 16], stack: &Stack<'_>) -> Result<(), Stop> {
    let mut vsp = r[13];
    let mut pc_set = false;
    for op in ops {
        vsp = match *op {
            Op::VspAdd(n) => vsp.checked_add(n).ok_or(Stop::StackOutside)?,
            Op::VspSub(n) => vsp.checked_sub(n).ok_or(Stop::StackOutside)?,
            Op::Pop(mask) => {
                pc_set |= mask & (1 << 15) != 0;
                pop(mask, vsp, r, stack)?
            }
            Op::SetVsp(n) => r[usize::from(n)],
            Op::PopVfp { count, fstmx, .. } => {
                add(vsp, 8 * u32::from(count) + 4 * u32::from(fstmx))?
            }
            Op::PopWr { count, .. } => add(vsp, 8 * u32::from(count))?,
            Op::PopWcgr(m) => add(vsp, 4 * m.count_ones())?,
            Op::Finish => break,
            Op::Refuse => return Err(Stop::CantUnwind),
            Op::Spare(..) => return Err(Stop::BadTable),
        };
    }
    r[13] = vsp;
    if !pc_set {
        r[15] = r[14];
    }
    Ok(())
}

fn add(vsp: u32, n: u32) -> Result<u32, Stop> {
    vsp.checked_add(n).ok_or(Stop::StackOutside)
}

/// Pops the registers of `mask` from `vsp`; returns the new `vsp` (the loaded r13 when r13 is
/// in the mask, as §9.3 says).
fn pop(mask: u16, mut vsp: u32, r: &mut [u32; 16], stack: &Stack<'_>) -> Result<u32, Stop> {
    let mut loaded_sp = None;
    for (n, reg) in r.iter_mut().enumerate() {
        if mask & (1 << n) == 0 {
            continue;
        }
        let v = stack.read_u32(vsp).ok_or(Stop::StackOutside)?;
        if n == 13 {
            loaded_sp = Some(v);
        } else {
            *reg = v;
        }
        vsp = add(vsp, 4)?;
    }
    Ok(loaded_sp.unwrap_or(vsp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prel31_sign_extends() {
        assert_eq!(prel31(0x7FFF_FFFC, 0x1000), 0x1000 - 4);
        assert_eq!(prel31(0x10, 0x1000), 0x1010);
        // Bit 31 is not part of the offset.
        assert_eq!(prel31(0x8000_0010, 0x1000), 0x1010);
    }

    #[test]
    fn decodes_every_form() {
        let d = |b: &[u8]| decode(b).unwrap();
        assert_eq!(d(&[0x02]), (Op::VspAdd(12), 1));
        assert_eq!(d(&[0x3F]), (Op::VspAdd(256), 1));
        assert_eq!(d(&[0x41]), (Op::VspSub(8), 1));
        assert_eq!(d(&[0x84, 0x00]), (Op::Pop(1 << 14), 2));
        assert_eq!(d(&[0x80, 0x01]), (Op::Pop(1 << 4), 2));
        assert_eq!(d(&[0x80, 0x00]), (Op::Refuse, 2));
        assert_eq!(d(&[0x97]), (Op::SetVsp(7), 1));
        assert_eq!(d(&[0x9D]), (Op::Spare(0x9D, 0), 1));
        assert_eq!(d(&[0xA8]), (Op::Pop((1 << 4) | (1 << 14)), 1));
        assert_eq!(d(&[0xAA]), (Op::Pop(0b111 << 4 | 1 << 14), 1));
        assert_eq!(d(&[0xA3]), (Op::Pop(0b1111 << 4), 1));
        assert_eq!(d(&[0xB1, 0x0F]), (Op::Pop(0xF), 2));
        assert_eq!(d(&[0xB1, 0x00]), (Op::Spare(0xB1, 0), 2));
        assert_eq!(d(&[0xB2, 0x00]), (Op::VspAdd(0x204), 2));
        assert_eq!(d(&[0xB2, 0x81, 0x01]), (Op::VspAdd(0x204 + (0x81 << 2)), 3));
        assert_eq!(
            d(&[0xB3, 0x12]),
            (
                Op::PopVfp {
                    first: 1,
                    count: 3,
                    fstmx: true
                },
                2
            )
        );
        assert_eq!(
            d(&[0xB9]),
            (
                Op::PopVfp {
                    first: 8,
                    count: 2,
                    fstmx: true
                },
                1
            )
        );
        assert_eq!(
            d(&[0xC8, 0x01]),
            (
                Op::PopVfp {
                    first: 16,
                    count: 2,
                    fstmx: false
                },
                2
            )
        );
        assert_eq!(
            d(&[0xC9, 0x80]),
            (
                Op::PopVfp {
                    first: 8,
                    count: 1,
                    fstmx: false
                },
                2
            )
        );
        assert_eq!(
            d(&[0xD7]),
            (
                Op::PopVfp {
                    first: 8,
                    count: 8,
                    fstmx: false
                },
                1
            )
        );
        assert_eq!(
            d(&[0xC1]),
            (
                Op::PopWr {
                    first: 10,
                    count: 2
                },
                1
            )
        );
        assert_eq!(d(&[0xC7, 0x03]), (Op::PopWcgr(3), 2));
        assert_eq!(d(&[0xFF]), (Op::Spare(0xFF, 0), 1));
        assert_eq!(decode(&[0x84]), None, "cut short");
        assert_eq!(decode(&[0xB2, 0x80]), None, "unterminated uleb128");
        assert_eq!(
            decode_all(&[0xA8, 0xB0, 0xB0, 0x02]),
            vec![Op::Pop(1 << 4 | 1 << 14), Op::Finish]
        );
    }

    fn stack_of(sp: u32, words: &[u32]) -> Vec<u8> {
        let _ = sp;
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn executes_pops_and_vsp() {
        // sub sp, #8; vpush {d8}; push {r4, r5, lr}: vsp+8, pop d8, pop {r4, r5, r14}.
        let words = [0, 0, 0xD8D8, 0xD8D8, 0x44, 0x55, 0x1235];
        let bytes = stack_of(0x1000, &words);
        let stack = Stack {
            sp: 0x1000,
            bytes: &bytes,
        };
        let ops = decode_all(&[0x01, 0xC9, 0x80, 0xA9, 0xB0]);
        assert_eq!(frame_size(&ops), Some(28));
        let mut r = [0u32; 16];
        r[13] = 0x1000;
        r[14] = 0xDEAD;
        execute(&ops, &mut r, &stack).unwrap();
        assert_eq!(
            (r[4], r[5], r[13], r[14], r[15]),
            (0x44, 0x55, 0x101C, 0x1235, 0x1235)
        );
        // pop {r4, pc} loads pc; lr stays.
        let mut r = [0u32; 16];
        r[13] = 0x1010;
        r[14] = 0xDEAD;
        execute(&decode_all(&[0x88, 0x01]), &mut r, &stack).unwrap();
        assert_eq!((r[4], r[13], r[14], r[15]), (0x44, 0x1018, 0xDEAD, 0x55));
        // vsp = r7, then a pop beyond the snapshot.
        let mut r = [0u32; 16];
        r[7] = 0x101C;
        assert_eq!(
            execute(&decode_all(&[0x97, 0x84, 0x00]), &mut r, &stack),
            Err(Stop::StackOutside)
        );
        // A pop with r13 in the mask sets vsp to the loaded value.
        let mut r = [0u32; 16];
        r[13] = 0x1010;
        execute(&[Op::Pop(1 << 13 | 1 << 14)], &mut r, &stack).unwrap();
        assert_eq!((r[13], r[14]), (0x44, 0x55));
        assert_eq!(
            execute(&[Op::Refuse], &mut r, &stack),
            Err(Stop::CantUnwind)
        );
        assert_eq!(
            execute(&[Op::Spare(0xFF, 0)], &mut r, &stack),
            Err(Stop::BadTable)
        );
    }

    #[test]
    fn reads_index_and_extab() {
        // Three entries at 0x100: inline (fn 0x1000), extab lu16 (fn 0x1041: Thumb), cantunwind.
        let place = 0x100u64;
        let rel = |to: u64, at: u64| (to.wrapping_sub(at) as u32) & 0x7FFF_FFFF;
        let extab_at = 0x200u64;
        let words = [
            rel(0x1000, place),
            0x8002_8400,
            rel(0x1041, place + 8),
            rel(extab_at, place + 12),
            rel(0x1100, place + 16),
            1,
        ];
        let idx: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        // lu16 with one more word: 0x81 01 | a8 b0, then 0x3f 0x3f b0 b0; then a generic entry;
        // a reserved personality index; lu32 (model 2) without further words: 0x82 00 | a8 b0.
        let extab: Vec<u8> = [
            0x8101_A83Fu32,
            0x3FB0_B0B0,
            0x7FFF_0000,
            0x0100_A8B0,
            0xB0B0_B0B0,
            0x8200_A8B0,
        ]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
        let t = Exidx::parse(&idx, place, Some((extab_at, Rc::from(extab))), 0x1200);
        assert_eq!(t.lookup(0xFFF), None);
        let (e, range) = t.lookup(0x1000).unwrap();
        assert_eq!((e, range), (Entry::Inline(0x8002_8400), 0x1000..0x1040));
        let (e, range) = t.lookup(0x1050).unwrap();
        assert_eq!((e, range), (Entry::Extab(extab_at), 0x1040..0x1100));
        assert_eq!(
            t.opcodes(e).unwrap(),
            vec![0xA8, 0x3F, 0x3F, 0xB0, 0xB0, 0xB0]
        );
        assert_eq!(t.lookup(0x11FF).unwrap().0, Entry::CantUnwind);
        assert_eq!(t.lookup(0x1200), None, "past the last entry's end");
        assert_eq!(t.opcodes(Entry::CantUnwind), Err(Stop::CantUnwind));
        assert_eq!(
            t.opcodes(Entry::Inline(0x8002_8400)).unwrap(),
            vec![0x02, 0x84, 0x00]
        );
        assert_eq!(
            t.opcodes(Entry::Inline(0x8100_0000)),
            Err(Stop::BadTable),
            "inline model 1"
        );
        // Generic model at extab + 8: personality prel31, then count 1 + a8 b0 .. + one word.
        assert_eq!(
            t.opcodes(Entry::Extab(extab_at + 8)).unwrap(),
            vec![0x00, 0xA8, 0xB0, 0xB0, 0xB0, 0xB0, 0xB0]
        );
        assert_eq!(
            t.opcodes(Entry::Extab(extab_at + 16)),
            Err(Stop::BadTable),
            "reserved personality index"
        );
        assert_eq!(
            t.opcodes(Entry::Extab(extab_at + 20)).unwrap(),
            vec![0xA8, 0xB0],
            "model 2 (lu32)"
        );
        assert_eq!(
            t.opcodes(Entry::Extab(extab_at + 24)),
            Err(Stop::BadTable),
            "past extab"
        );
        assert_eq!(
            t.opcodes(Entry::Extab(0x50)),
            Err(Stop::BadTable),
            "before extab"
        );
    }
}
