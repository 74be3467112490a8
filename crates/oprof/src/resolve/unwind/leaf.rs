//! Whether EHABI opcodes hold at the interrupted PC of a frame.
//!
//! An EHABI entry describes the frame between the prologue and the epilogue (EHABI §9: the
//! opcodes undo the prologue). A caller frame stands at a call, inside that span; the sampled
//! frame may stand anywhere. [`prove`] accepts the PC only when the code shows it is in the
//! span, for gcc-shaped code (ARM and Thumb-2):
//!
//! - Prologue: from the function start (the index entry's start) the instructions that lower
//!   SP (`push`, `str rX, [sp, #-4]!`, `vpush`, `sub sp, sp, #imm`) must add up to exactly the
//!   frame size the opcodes pop ([`super::ehabi::frame_size`]) before the PC, with no branch,
//!   call, SP raise or other write to SP or PC among them (other instructions are skipped).
//! - Epilogue: from the PC forward (at most [`SCAN`] instructions) the straight-line code must
//!   not have started to pop the frame: the SP raises (`pop`, `add sp`, `vpop`, `ldr rX,
//!   [sp], #4`) up to the first return (`pop {.., pc}`, `bx lr`, `ldr pc, [sp], #4`) must add
//!   up to the whole frame, and a call, or a branch to inside the function before any raise,
//!   shows the body (a branch out of the function is a tail call, whose epilogue may be done).
//!
//! Anything else (an unknown write to SP or PC, a frame set through `vsp = r[n]`, code that
//! cannot be read) is not proved. A frame of size 0 (nothing pushed, LR untouched) holds
//! everywhere.

use super::ehabi::{frame_size, Op};
use super::ImageTables;
use crate::resolve::isa::Isa;
use std::ops::Range;

/// The most instructions scanned forward from the PC for an epilogue.
pub const SCAN: usize = 256;

/// The code is not proved to be in the frame's span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unproven;

/// What an instruction does to the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Insn {
    /// Lowers SP by n bytes (a prologue instruction).
    Lower(u32),
    /// Raises SP by n bytes (an epilogue instruction).
    Raise(u32),
    /// Returns, after raising SP by n bytes.
    Return(u32),
    /// A branch, to an address when known.
    Branch(Option<u64>),
    /// A switch table branch (`tbb`/`tbh`): to inside the function.
    Switch,
    Call,
    /// Writes SP or PC in a way not modelled.
    Unknown,
    Other,
}

/// Proves that the frame the EHABI `ops` describe holds at `pc` (ELF address) of the function
/// `func` (ELF addresses) in state `isa` (see the module docs).
pub fn prove(
    tables: &ImageTables,
    isa: Isa,
    func: &Range<u64>,
    pc: u64,
    ops: &[Op],
) -> Result<(), Unproven> {
    let size = frame_size(ops).ok_or(Unproven)?;
    if size == 0 {
        return Ok(());
    }
    let head = tables.code(func.start..pc).ok_or(Unproven)?;
    prologue_done(head, func.start, isa, size)?;
    let tail_end = func.end.min(pc.saturating_add(4 * SCAN as u64));
    let tail = tables.code(pc..tail_end).ok_or(Unproven)?;
    frame_intact(tail, pc, isa, func, size)
}

/// The prologue in `head` (the code from the function start `start` up to the PC) lowers SP by
/// exactly `size` bytes.
fn prologue_done(head: &[u8], start: u64, isa: Isa, size: u32) -> Result<(), Unproven> {
    let mut lowered: u32 = 0;
    for (insn, _) in Insns::new(head, start, isa) {
        if lowered == size {
            return Ok(());
        }
        lowered = match insn {
            Insn::Lower(n) => lowered
                .checked_add(n)
                .filter(|&l| l <= size)
                .ok_or(Unproven)?,
            Insn::Other => lowered,
            _ => return Err(Unproven),
        };
    }
    if lowered == size {
        Ok(())
    } else {
        Err(Unproven)
    }
}

/// The code from the PC (`tail`, at `pc`) has not begun to pop the `size`-byte frame.
fn frame_intact(
    tail: &[u8],
    pc: u64,
    isa: Isa,
    func: &Range<u64>,
    size: u32,
) -> Result<(), Unproven> {
    let mut raised: u32 = 0;
    for (insn, _) in Insns::new(tail, pc, isa) {
        match insn {
            Insn::Raise(n) => raised = raised.checked_add(n).ok_or(Unproven)?,
            Insn::Return(n) => return ok_if(raised.checked_add(n) == Some(size)),
            Insn::Call | Insn::Switch => return ok_if(raised == 0),
            Insn::Branch(Some(t)) => return ok_if(raised == 0 && func.contains(&t)),
            Insn::Other => {}
            Insn::Lower(_) | Insn::Branch(None) | Insn::Unknown => return Err(Unproven),
        }
    }
    Err(Unproven)
}

fn ok_if(b: bool) -> Result<(), Unproven> {
    if b {
        Ok(())
    } else {
        Err(Unproven)
    }
}

/// The instructions of `code` at `addr`: (kind, address).
struct Insns<'a> {
    code: &'a [u8],
    at: usize,
    addr: u64,
    isa: Isa,
}

impl<'a> Insns<'a> {
    fn new(code: &'a [u8], addr: u64, isa: Isa) -> Insns<'a> {
        Insns {
            code,
            at: 0,
            addr,
            isa,
        }
    }
}

impl Iterator for Insns<'_> {
    type Item = (Insn, u64);

    fn next(&mut self) -> Option<(Insn, u64)> {
        let h = |i: usize| -> Option<u16> {
            let b = self.code.get(i..i.checked_add(2)?)?;
            Some(u16::from_le_bytes([b[0], b[1]]))
        };
        let addr = self.addr.checked_add(self.at as u64)?;
        let (insn, len) = match self.isa {
            Isa::Arm => {
                let (lo, hi) = (h(self.at)?, h(self.at + 2)?);
                (arm(u32::from(hi) << 16 | u32::from(lo), addr), 4)
            }
            Isa::Thumb => {
                let h1 = h(self.at)?;
                if h1 >> 11 >= 0b11101 {
                    (thumb32(h1, h(self.at + 2)?, addr), 4)
                } else {
                    (thumb16(h1, addr), 2)
                }
            }
            _ => return None,
        };
        self.at += len;
        Some((insn, addr))
    }
}

/// ARM `ARMExpandImm` (no carry).
fn arm_imm(imm12: u32) -> u32 {
    (imm12 & 0xFF).rotate_right(2 * (imm12 >> 8))
}

/// Thumb `ThumbExpandImm` of `i:imm3:imm8`.
fn thumb_imm(imm12: u32) -> u32 {
    let b = imm12 & 0xFF;
    match imm12 >> 8 {
        0 => b,
        1 => b << 16 | b,
        2 => b << 24 | b << 8,
        3 => b * 0x0101_0101,
        _ => (0x80 | (imm12 & 0x7F)).rotate_right(imm12 >> 7),
    }
}

/// Sign-extends the low `bits` bits of `v`.
fn sext(v: u32, bits: u32) -> i64 {
    i64::from(((v << (32 - bits)) as i32) >> (32 - bits))
}

fn arm(w: u32, addr: u64) -> Insn {
    let regs = 4 * (w & 0xFFFF).count_ones();
    let rt = (w >> 12) & 0xF;
    match w & 0x0FFF_0000 {
        0x092D_0000 => return Insn::Lower(regs),
        0x08BD_0000 if w & (1 << 13) != 0 => return Insn::Unknown,
        0x08BD_0000 if w & (1 << 15) != 0 => return Insn::Return(regs),
        0x08BD_0000 => return Insn::Raise(regs),
        _ => {}
    }
    if w & 0x0FFF_0FFF == 0x052D_0004 {
        return Insn::Lower(4);
    }
    if w & 0x0FFF_0FFF == 0x049D_0004 {
        return if rt == 15 {
            Insn::Return(4)
        } else {
            Insn::Raise(4)
        };
    }
    match w & 0x0FFF_F000 {
        0x024D_D000 => return Insn::Lower(arm_imm(w & 0xFFF)),
        0x028D_D000 => return Insn::Raise(arm_imm(w & 0xFFF)),
        _ => {}
    }
    match w & 0x0FBF_0E00 {
        0x0D2D_0A00 => return Insn::Lower(4 * (w & 0xFF)),
        0x0CBD_0A00 => return Insn::Raise(4 * (w & 0xFF)),
        _ => {}
    }
    if w & 0x0FFF_FFFF == 0x012F_FF1E {
        return Insn::Return(0);
    }
    if oprofile_common::arm::arm_is_call(w) {
        return Insn::Call;
    }
    if w & 0x0F00_0000 == 0x0A00_0000 && w >> 28 != 0xF {
        let t = addr
            .checked_add(8)
            .and_then(|a| a.checked_add_signed(sext(w & 0xFF_FFFF, 24) * 4));
        return Insn::Branch(t);
    }
    if w & 0x0FFF_FFF0 == 0x012F_FF10 {
        return Insn::Branch(None);
    }
    if arm_writes_sp_or_pc(w) {
        Insn::Unknown
    } else {
        Insn::Other
    }
}

/// Conservatively, whether an ARM instruction not recognised above may write SP or PC.
fn arm_writes_sp_or_pc(w: u32) -> bool {
    let rd = (w >> 12) & 0xF;
    let rn = (w >> 16) & 0xF;
    let writeback = w & (1 << 21) != 0 || w & (1 << 24) == 0;
    match (w >> 25) & 7 {
        // Data processing, multiplies, extra loads/stores, loads/stores.
        0..=3 => {
            rd == 13
                || rd == 15
                || (rn == 13 && writeback && (w >> 25 & 6 == 2 || arm_extra_load_store(w)))
        }
        // Load/store multiple.
        4 => (rn == 13 && w & (1 << 21) != 0) || (w & (1 << 20) != 0 && w & (1 << 15) != 0),
        // Coprocessor loads/stores.
        6 => rn == 13 && w & (1 << 21) != 0,
        _ => false,
    }
}

/// LDRD/STRD/LDRH/STRH/...: the "extra load/store" encodings (bits 27-25 = 000, bits 7 and 4
/// set, bits 6-5 not 00).
fn arm_extra_load_store(w: u32) -> bool {
    w & 0x0E00_0090 == 0x0000_0090 && w & 0x60 != 0
}

fn thumb16(h: u16, addr: u64) -> Insn {
    let regs = 4 * u32::from(h & 0xFF).count_ones();
    let branch =
        |off: i64| Insn::Branch(addr.checked_add(4).and_then(|a| a.checked_add_signed(off)));
    match h {
        _ if h & 0xFE00 == 0xB400 => Insn::Lower(regs + 4 * u32::from(h >> 8 & 1)),
        _ if h & 0xFF00 == 0xBD00 => Insn::Return(regs + 4),
        _ if h & 0xFF00 == 0xBC00 => Insn::Raise(regs),
        _ if h & 0xFF80 == 0xB080 => Insn::Lower(4 * u32::from(h & 0x7F)),
        _ if h & 0xFF80 == 0xB000 => Insn::Raise(4 * u32::from(h & 0x7F)),
        0x4770 => Insn::Return(0),
        _ if h & 0xFF87 == 0x4700 => Insn::Branch(None),
        _ if h & 0xFF87 == 0x4780 => Insn::Call,
        _ if h & 0xF000 == 0xD000 && h & 0x0F00 < 0x0E00 => {
            branch(sext(u32::from(h & 0xFF), 8) * 2)
        }
        _ if h & 0xF800 == 0xE000 => branch(sext(u32::from(h & 0x7FF), 11) * 2),
        _ if h & 0xF500 == 0xB100 => branch(i64::from((h >> 3 & 0x1F) | (h >> 4 & 0x20)) * 2),
        // add/mov with a high register: Rd = D:Rd.
        _ if h & 0xFD00 == 0x4400 && matches!((h & 7) | (h >> 4 & 8), 13 | 15) => Insn::Unknown,
        _ => Insn::Other,
    }
}

fn thumb32(h1: u16, h2: u16, addr: u64) -> Insn {
    let regs = 4 * u32::from(h2).count_ones();
    let imm12 = u32::from(h1 >> 10 & 1) << 11 | u32::from(h2 >> 12 & 7) << 8 | u32::from(h2 & 0xFF);
    let sp_dst = h2 & 0x8F00 == 0x0D00;
    match h1 {
        0xE92D => return Insn::Lower(regs),
        0xE8BD if h2 & 0x2000 != 0 => return Insn::Unknown,
        0xE8BD if h2 & 0x8000 != 0 => return Insn::Return(regs),
        0xE8BD => return Insn::Raise(regs),
        0xF84D if h2 & 0x0FFF == 0x0D04 => return Insn::Lower(4),
        0xF85D if h2 & 0x0FFF == 0x0B04 => {
            return if h2 >> 12 == 15 {
                Insn::Return(4)
            } else {
                Insn::Raise(4)
            }
        }
        _ => {}
    }
    match (h1 & 0xFBEF, h1 & 0xFBFF) {
        (0xF1AD, _) if sp_dst => return Insn::Lower(thumb_imm(imm12)),
        (_, 0xF2AD) if sp_dst => return Insn::Lower(imm12),
        (0xF10D, _) if sp_dst => return Insn::Raise(thumb_imm(imm12)),
        (_, 0xF20D) if sp_dst => return Insn::Raise(imm12),
        _ => {}
    }
    if h2 & 0x0E00 == 0x0A00 {
        match h1 & 0xFFBF {
            0xED2D => return Insn::Lower(4 * u32::from(h2 & 0xFF)),
            0xECBD => return Insn::Raise(4 * u32::from(h2 & 0xFF)),
            _ => {}
        }
    }
    if h1 & 0xFFF0 == 0xE8D0 && h2 & 0xFFE0 == 0xF000 {
        return Insn::Switch;
    }
    if h1 & 0xF800 == 0xF000 && h2 & 0x8000 != 0 {
        return thumb32_branch(h1, h2, addr);
    }
    if thumb32_writes_sp_or_pc(h1, h2) {
        Insn::Unknown
    } else {
        Insn::Other
    }
}

/// Thumb-2 branches and miscellaneous control (`h2` bit 15 set).
fn thumb32_branch(h1: u16, h2: u16, addr: u64) -> Insn {
    let s = u32::from(h1 >> 10 & 1);
    let (j1, j2) = (u32::from(h2 >> 13 & 1), u32::from(h2 >> 11 & 1));
    let imm11 = u32::from(h2 & 0x7FF);
    let to = |off: i64| addr.checked_add(4).and_then(|a| a.checked_add_signed(off));
    match h2 & 0xD000 {
        0xD000 | 0xC000 => Insn::Call,
        0x9000 => {
            let (i1, i2) = (!(j1 ^ s) & 1, !(j2 ^ s) & 1);
            let v = s << 24 | i1 << 23 | i2 << 22 | u32::from(h1 & 0x3FF) << 12 | imm11 << 1;
            Insn::Branch(to(sext(v, 25)))
        }
        0x8000 if h1 >> 6 & 0xE != 0xE => {
            let v = s << 20 | j2 << 19 | j1 << 18 | u32::from(h1 & 0x3F) << 12 | imm11 << 1;
            Insn::Branch(to(sext(v, 21)))
        }
        // MSR, hints, SUBS PC, LR (exception return), ...: only the last writes PC.
        _ if h1 & 0xFFF0 == 0xF3D0 => Insn::Unknown,
        _ => Insn::Other,
    }
}

/// Conservatively, whether a Thumb-2 instruction not recognised above may write SP or PC.
fn thumb32_writes_sp_or_pc(h1: u16, h2: u16) -> bool {
    let rn = h1 & 0xF;
    let rt = h2 >> 12;
    let rd = h2 >> 8 & 0xF;
    if h1 & 0xFE00 == 0xF800 {
        // Loads and stores of one register: a load to SP/PC, or SP written back.
        let load = h1 & 0x0010 != 0;
        let imm8_wb =
            h1 & 0x0080 == 0 && h2 & 0x0800 != 0 && (h2 & 0x0100 != 0 || h2 & 0x0400 == 0);
        return (load && (rt == 13 || rt == 15)) || (rn == 13 && imm8_wb);
    }
    if h1 & 0xFE40 == 0xE800 {
        // Load/store multiple: SP written back, or PC loaded.
        return (rn == 13 && h1 & 0x0020 != 0) || (h1 & 0x0010 != 0 && h2 & 0x8000 != 0);
    }
    if h1 & 0xFE40 == 0xE840 {
        // Load/store dual and exclusive: SP written back.
        return rn == 13 && h1 & 0x0020 != 0;
    }
    if h1 & 0xEE00 == 0xEA00 || (h1 & 0xF800 == 0xF000 && h2 & 0x8000 == 0) {
        // Data processing: Rd = SP (Rd = PC is a flags-only compare).
        return rd == 13;
    }
    if h1 & 0xEC00 == 0xEC00 {
        // Coprocessor loads/stores with SP written back.
        return rn == 13 && h1 & 0x0020 != 0 && h1 & 0x0200 == 0;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(hs: &[u16]) -> Vec<u8> {
        hs.iter().flat_map(|h| h.to_le_bytes()).collect()
    }

    fn a(ws: &[u32]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn classifies_thumb() {
        let one = |hs: &[u16]| Insns::new(&t(hs), 0x1000, Isa::Thumb).next().unwrap().0;
        assert_eq!(one(&[0xB510]), Insn::Lower(8), "push {{r4, lr}}");
        assert_eq!(one(&[0xBD10]), Insn::Return(8), "pop {{r4, pc}}");
        assert_eq!(one(&[0xBC10]), Insn::Raise(4), "pop {{r4}}");
        assert_eq!(one(&[0xB083]), Insn::Lower(12), "sub sp, #12");
        assert_eq!(one(&[0xB003]), Insn::Raise(12), "add sp, #12");
        assert_eq!(one(&[0x4770]), Insn::Return(0), "bx lr");
        assert_eq!(one(&[0x4798]), Insn::Call, "blx r3");
        assert_eq!(one(&[0x4718]), Insn::Branch(None), "bx r3");
        assert_eq!(one(&[0xE7FE]), Insn::Branch(Some(0x1000)), "b .");
        assert_eq!(one(&[0xD0FE]), Insn::Branch(Some(0x1000)), "beq .");
        assert_eq!(one(&[0xB11B]), Insn::Branch(Some(0x100A)), "cbz r3, +6");
        assert_eq!(one(&[0x46BD]), Insn::Unknown, "mov sp, r7");
        assert_eq!(one(&[0x466F]), Insn::Other, "mov r7, sp");
        assert_eq!(
            one(&[0xE92D, 0x41F0]),
            Insn::Lower(24),
            "push.w {{r4-r8, lr}}"
        );
        assert_eq!(
            one(&[0xE8BD, 0x81F0]),
            Insn::Return(24),
            "pop.w {{r4-r8, pc}}"
        );
        assert_eq!(one(&[0xED2D, 0x8B02]), Insn::Lower(8), "vpush {{d8}}");
        assert_eq!(one(&[0xECBD, 0x8B04]), Insn::Raise(16), "vpop {{d8-d9}}");
        assert_eq!(
            one(&[0xF5AD, 0x7D00]),
            Insn::Lower(512),
            "sub.w sp, sp, #512"
        );
        assert_eq!(
            one(&[0xF20D, 0x4D04]),
            Insn::Raise(1028),
            "addw sp, sp, #1028"
        );
        assert_eq!(
            one(&[0xF84D, 0xED04]),
            Insn::Lower(4),
            "str.w lr, [sp, #-4]!"
        );
        assert_eq!(
            one(&[0xF85D, 0xFB04]),
            Insn::Return(4),
            "ldr.w pc, [sp], #4"
        );
        assert_eq!(one(&[0xF000, 0xF800]), Insn::Call, "bl");
        assert_eq!(one(&[0xF7FF, 0xBFFE]), Insn::Branch(Some(0x1000)), "b.w .");
        assert_eq!(
            one(&[0xF43F, 0xAFFE]),
            Insn::Branch(Some(0x1000)),
            "beq.w ."
        );
        assert_eq!(one(&[0xE8DF, 0xF003]), Insn::Switch, "tbb [pc, r3]");
        assert_eq!(one(&[0xF8DD, 0xD004]), Insn::Unknown, "ldr.w sp, [sp, #4]");
        assert_eq!(one(&[0xF8DD, 0x3004]), Insn::Other, "ldr.w r3, [sp, #4]");
        assert_eq!(one(&[0xF1B3, 0x0F05]), Insn::Other, "cmp.w r3, #5");
    }

    #[test]
    fn classifies_arm() {
        let one = |w: u32| Insns::new(&a(&[w]), 0x1000, Isa::Arm).next().unwrap().0;
        assert_eq!(one(0xE92D_4010), Insn::Lower(8), "push {{r4, lr}}");
        assert_eq!(one(0xE8BD_8010), Insn::Return(8), "pop {{r4, pc}}");
        assert_eq!(one(0xE8BD_4010), Insn::Raise(8), "pop {{r4, lr}}");
        assert_eq!(one(0xE52D_E004), Insn::Lower(4), "str lr, [sp, #-4]!");
        assert_eq!(one(0xE49D_F004), Insn::Return(4), "ldr pc, [sp], #4");
        assert_eq!(one(0xE24D_DF42), Insn::Lower(264), "sub sp, sp, #264");
        assert_eq!(one(0xE28D_D00C), Insn::Raise(12), "add sp, sp, #12");
        assert_eq!(one(0xED2D_8B02), Insn::Lower(8), "vpush {{d8}}");
        assert_eq!(one(0xECBD_8B02), Insn::Raise(8), "vpop {{d8}}");
        assert_eq!(one(0xE12F_FF1E), Insn::Return(0), "bx lr");
        assert_eq!(one(0xEB00_0000), Insn::Call, "bl");
        assert_eq!(one(0xEAFF_FFFE), Insn::Branch(Some(0x1000)), "b .");
        assert_eq!(one(0xE1A0_D007), Insn::Unknown, "mov sp, r7");
        assert_eq!(one(0xE59D_3004), Insn::Other, "ldr r3, [sp, #4]");
        assert_eq!(one(0xE59F_F004), Insn::Unknown, "ldr pc, [pc, #4]");
        assert_eq!(one(0xE79F_F103), Insn::Unknown, "ldr pc, [pc, r3, lsl #2]");
        assert_eq!(one(0xE16D_40F8), Insn::Unknown, "strd r4, r5, [sp, #-8]!");
        assert_eq!(one(0xE1CD_40F8), Insn::Other, "strd r4, r5, [sp, #8]");
    }

    #[test]
    fn prologue_and_epilogue_of_a_thumb_function() {
        // push {r4, lr}; sub sp, #8; movs r0, #1; bl x; add sp, #8; pop {r4, pc}
        let code = t(&[0xB510, 0xB082, 0x2001, 0xF000, 0xF800, 0xB002, 0xBD10]);
        let func = 0x1000..0x100E;
        let at = |pc: u64| {
            let head = &code[..usize::try_from(pc - 0x1000).unwrap()];
            let tail = &code[usize::try_from(pc - 0x1000).unwrap()..];
            prologue_done(head, 0x1000, Isa::Thumb, 16)
                .and_then(|_| frame_intact(tail, pc, Isa::Thumb, &func, 16))
        };
        assert_eq!(at(0x1000), Err(Unproven), "before push");
        assert_eq!(at(0x1002), Err(Unproven), "before sub");
        assert_eq!(at(0x1004), Ok(()), "body");
        assert_eq!(at(0x1006), Ok(()), "at the call");
        assert_eq!(at(0x100A), Ok(()), "at the epilogue's first instruction");
        assert_eq!(at(0x100C), Err(Unproven), "after add sp");
    }
}
