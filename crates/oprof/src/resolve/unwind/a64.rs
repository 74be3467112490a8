//! The AArch64 user-space unwinder: a USER_STACK snapshot of a 64-bit task (x0–x30, SP, PC,
//! PSTATE; `oprofile_common::event::user_regs(8)`) unwound with DWARF CFI only (`.eh_frame`,
//! which every arm64 binary has, and `.debug_frame` of the image or its separate debug file;
//! [`super::cfi`]). AArch64 has no EHABI, and CFI is exact at every instruction, so the
//! interrupted frame needs no proof beyond its FDE.
//!
//! Registers follow "DWARF for the Arm 64-bit Architecture" (AADWARF64) §4.1: x0–x30 are DWARF
//! 0–30, SP is 31; the return address column is 30 (x30, LR); the caller's SP is the CFA
//! (AAPCS64: the CFA is the SP at the call site). Registers numbered 32 and up (PC, the SIMD
//! registers v8–v15 that CFI also saves) are not tracked.
//!
//! The same checks as the AArch32 unwinder, with the same [`End`] reasons: a return address
//! must be 4-byte aligned, lie in an executable mapping ([`End::NoMapping`]) and follow `BL`,
//! `BLR` or `BLRA*` (`oprofile_common::aarch64`; [`End::NotACall`]); the caller's SP must not
//! be below the callee's, nor equal with the same PC ([`End::Loop`]); a stack read outside the
//! snapshot ends the chain ([`End::StackOutside`]); a return address column explicitly
//! undefined (glibc's `_start`: `cfi_undefined (x30)`) or a return address of 0 is the
//! outermost frame.
//!
//! Pointer authentication (`-mbranch-protection`): where the CFI says the saved return address
//! is signed ([`super::cfi::Row::ra_signed`]), a value whose bits 48–63 are clear carries no
//! PAC (a core without FEAT_PAuth, e.g. the Cortex-A53, runs `paciasp` as a NOP) and is used;
//! one with PAC bits ends the chain ([`End::Unsupported`]): stripping them needs the task's
//! virtual address size, which the stream does not carry.

use super::cfi::{self, Cfa, Rule};
use super::{End, FrameRule, Images, Unwinder};
use oprofile_common::aarch64;

/// DWARF register number of SP.
const SP: usize = 31;
/// DWARF register number of x30 (LR), the return address column.
const LR: usize = 30;
/// Bits of a return address above a 48-bit virtual address: a PAC, when signed.
const PAC_BITS: u64 = 0xFFFF_0000_0000_0000;

/// The user registers of a 64-bit task at a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Regs64 {
    /// x0–x30.
    pub x: [u64; 31],
    pub sp: u64,
    pub pc: u64,
    pub pstate: u64,
}

impl Regs64 {
    /// The registers from a USER_STACK record's register words (x0–x30, SP, PC, PSTATE, in that
    /// order); `None` when there are fewer than 34.
    pub fn from_words(w: &[u64]) -> Option<Regs64> {
        let mut x = [0u64; 31];
        x.copy_from_slice(w.get(..31)?);
        Some(Regs64 {
            x,
            sp: *w.get(31)?,
            pc: *w.get(32)?,
            pstate: *w.get(33)?,
        })
    }

    /// Whether the task runs in AArch32 state (PSTATE.nRW, `PSR_MODE32_BIT`): a compat task,
    /// whose registers are not A64's.
    pub fn aarch32(&self) -> bool {
        self.pstate & aarch64::PSR_MODE32_BIT as u64 != 0
    }
}

/// A copy of a 64-bit task's stack: `bytes` were at addresses `sp..sp + bytes.len()`.
#[derive(Debug, Clone, Copy)]
pub struct Stack64<'a> {
    pub sp: u64,
    pub bytes: &'a [u8],
}

impl Stack64<'_> {
    /// The little-endian doubleword at `addr`, if all its 8 bytes are in the copy.
    pub fn read_u64(&self, addr: u64) -> Option<u64> {
        let off = usize::try_from(addr.checked_sub(self.sp)?).ok()?;
        let b = self.bytes.get(off..off.checked_add(8)?)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }
}

/// An AArch64 call chain: the sampled PC, then return addresses (runtime), and why it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain64 {
    pub frames: Vec<u64>,
    pub end: End,
}

/// Register values while unwinding: r[0..31] = x0–x30, r[31] = SP; `known` has bit n when r[n]
/// is known.
#[derive(Debug, Clone, Copy)]
struct State {
    r: [u64; 32],
    pc: u64,
    known: u32,
}

impl Unwinder {
    /// Unwinds the AArch64 sample `regs` + `stack` in the address space `images`.
    pub fn unwind_a64(
        &mut self,
        images: &impl Images,
        regs: &Regs64,
        stack: &Stack64<'_>,
    ) -> Chain64 {
        let mut r = [0u64; 32];
        r[..31].copy_from_slice(&regs.x);
        r[SP] = regs.sp;
        let mut state = State {
            r,
            pc: regs.pc,
            known: u32::MAX,
        };
        let mut frames = Vec::with_capacity(self.max_depth.min(32));
        frames.push(regs.pc);
        let end = loop {
            if frames.len() >= self.max_depth {
                break End::Depth;
            }
            let next = match self.step_a64(images, &state, frames.len() == 1, stack) {
                Ok(n) => n,
                Err(end) => break end,
            };
            if let Err(end) = check_caller(images, &state, &next) {
                break end;
            }
            frames.push(next.pc);
            state = next;
        };
        Chain64 { frames, end }
    }

    /// The caller's registers of the frame `s` (`leaf`: the interrupted frame).
    fn step_a64(
        &mut self,
        images: &impl Images,
        s: &State,
        leaf: bool,
        stack: &Stack64<'_>,
    ) -> Result<State, End> {
        let place = images
            .find(s.pc)
            .filter(|p| p.executable)
            .ok_or(End::NoMapping)?;
        // A return address is looked up in its call instruction.
        let at = if leaf {
            place.elf_addr
        } else {
            place.elf_addr.checked_sub(1).ok_or(End::NoMapping)?
        };
        let rule = match place.id.map(|id| (id, at, leaf, false)) {
            Some(key) => self.cached(key, |u| u.rule_for_a64(place.tables, at)),
            None => self.rule_for_a64(place.tables, at),
        };
        match rule {
            FrameRule::Cfi(row) => apply_cfi(&row, s, leaf, stack),
            FrameRule::Fails(end) => Err(end),
            FrameRule::NoInfo | FrameRule::Unproven | FrameRule::Ehabi(_) => {
                Err(End::NoUnwindInfo { pc: s.pc })
            }
        }
    }

    /// How the caller of a frame at ELF address `at` of `tables` is found: its CFI row.
    fn rule_for_a64(&mut self, tables: &super::ImageTables, at: u64) -> FrameRule {
        let Some(cfi) = tables.cfi_for(at) else {
            return FrameRule::NoInfo;
        };
        match cfi.row(&mut self.ctx, at) {
            Ok(Some(row)) => FrameRule::Cfi(std::rc::Rc::new(row)),
            _ => FrameRule::Fails(End::BadTable),
        }
    }
}

/// Applies a CFI row to `s`. Above the interrupted frame (`leaf` false) a return address column
/// without a rule is a bad table (the call overwrote x30).
fn apply_cfi(row: &cfi::Row, s: &State, leaf: bool, stack: &Stack64<'_>) -> Result<State, End> {
    if usize::from(row.ra) != LR {
        return Err(End::BadTable);
    }
    // gimli keeps no rule for an explicitly undefined register: without a rule, a
    // `DW_CFA_undefined` of x30 in the CIE or FDE (glibc's `_start`) is what tells the
    // outermost frame from a table that lost the return address.
    let ra_rule = row.rule(row.ra);
    if row.ra_undefined && matches!(ra_rule, Rule::Same | Rule::Undefined) {
        return Err(End::Outermost);
    }
    if !leaf && ra_rule == Rule::Same {
        return Err(End::BadTable);
    }
    let cfa = match row.cfa {
        Cfa::RegOffset(reg, off) => offset(reg_value(s, reg)?, off)?,
        Cfa::Expression => return Err(End::Unsupported),
    };
    let mut next = State {
        r: s.r,
        pc: 0,
        known: s.known,
    };
    for n in 0..=LR {
        let value = rule_value(row, n, s, cfa, stack)?;
        match value {
            Some(v) => next.r[n] = v,
            None => next.known &= !(1 << n),
        }
    }
    if next.known & (1 << LR) == 0 {
        return Err(End::BadTable);
    }
    next.r[SP] = cfa;
    next.known |= 1 << SP;
    next.pc = return_address(next.r[LR], row.ra_signed)?;
    Ok(next)
}

/// The caller's value of register `n` under `row` (`None`: not known).
fn rule_value(
    row: &cfi::Row,
    n: usize,
    s: &State,
    cfa: u64,
    stack: &Stack64<'_>,
) -> Result<Option<u64>, End> {
    let reg = n as u16;
    Ok(match row.rule(reg) {
        Rule::Same => (s.known & (1 << n) != 0).then_some(s.r[n]),
        Rule::Offset(k) => Some(stack.read_u64(offset(cfa, k)?).ok_or(End::StackOutside)?),
        Rule::ValOffset(k) => Some(offset(cfa, k)?),
        Rule::Register(k) => reg_value(s, k).ok(),
        Rule::Undefined if n == LR && row.ra_undefined => return Err(End::Outermost),
        Rule::Undefined => None,
        Rule::Unsupported if n == LR => return Err(End::Unsupported),
        Rule::Unsupported => None,
    })
}

/// The return address in x30's recovered value `lr`: as it is, unless signed with PAC bits
/// (see the module docs).
fn return_address(lr: u64, signed: bool) -> Result<u64, End> {
    if signed && lr & PAC_BITS != 0 {
        return Err(End::Unsupported);
    }
    Ok(lr)
}

fn reg_value(s: &State, reg: u16) -> Result<u64, End> {
    let n = usize::from(reg);
    if n <= SP && s.known & (1 << n) != 0 {
        Ok(s.r[n])
    } else {
        Err(End::BadTable)
    }
}

/// `base + off` (outside the 64-bit space: no stack doubleword can be there).
fn offset(base: u64, off: i64) -> Result<u64, End> {
    base.checked_add_signed(off).ok_or(End::StackOutside)
}

/// Checks the caller `next` found from `cur`: its return address and SP.
fn check_caller(images: &impl Images, cur: &State, next: &State) -> Result<(), End> {
    let ra = next.pc;
    if ra == 0 {
        return Err(End::Outermost);
    }
    let (sp, old_sp) = (next.r[SP], cur.r[SP]);
    if sp < old_sp || (sp == old_sp && ra == cur.pc) {
        return Err(End::Loop);
    }
    let place = images
        .find(ra)
        .filter(|p| p.executable)
        .ok_or(End::NoMapping)?;
    // Every A64 instruction is 4 bytes at a 4-byte aligned address.
    if ra & 3 != 0 {
        return Err(End::NotACall);
    }
    let call = place
        .elf_addr
        .checked_sub(4)
        .and_then(|a| place.tables.code(a..place.elf_addr));
    match call.and_then(|b| b.try_into().ok()).map(u32::from_le_bytes) {
        Some(w) if aarch64::is_call(w) => Ok(()),
        _ => Err(End::NotACall),
    }
}
