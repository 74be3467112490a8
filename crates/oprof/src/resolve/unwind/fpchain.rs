//! Frame-record chains of AArch64 streams, proven edge by edge with DWARF CFI.
//!
//! Without a user-stack snapshot the arm64 module gives a sample's user callers from the
//! AArch64 frame records (`common::sync::walk_user_frames_a64`: from x29, each record
//! `{caller's x29, x30}`). That walk only checks that each return address follows a call. In
//! code built as distributions build it (GCC `-O2`: leaf functions keep no record, and x29 may
//! be any ancestor's record at a sample) the first return addresses skip frames, and the chain
//! names a caller that did not call the function: `hot_b` "called from"
//! `__libc_start_call_main`. The host tool proves each edge instead, and cuts the chain at the
//! first one it cannot prove (counted by reason, [`FpStats`]):
//!
//! - the edge leaving the exact PC of the chain's first user entry (the sampled PC, or the PC
//!   a kernel-mode sample's task entered the kernel from) holds only if that function's CFI row
//!   at the PC has x29 and x30 saved as a frame record (x29 at CFA+o, x30 at CFA+o+8) *and* x29
//!   points at that record: the CFA is x29-based with x29 = CFA+o, or the function's code sets
//!   x29 with `add x29, sp, #imm` (`mov x29, sp`) to CFA+o before the PC (the CFI row there gives
//!   SP) and writes x29 nowhere else on the way, bar an epilogue's restore that leaves the
//!   function (`ldp x29, x30, ...` followed by `ret` or a tail branch out);
//! - the edge leaving a return address holds under the same test at its call instruction
//!   (return address − 4): the caller kept its own record at the call site.
//!
//! A leaf (x30 still holds its return address), a PC in a prologue between `stp x29, x30` and
//! `mov x29, sp`, a function that saved x29 without making it its frame pointer
//! (`-fomit-frame-pointer`), a PC in no image or an image without CFI: the edge is unproven.
//! Chains unwound from snapshots are CFI-exact already and never pass through here.

use super::cfi::{Cfa, Rule};
use super::ImageTables;
use crate::resolve::elf::offset_to_vaddr;
use capstone::prelude::*;
use gimli::UnwindContext;
use std::collections::{BTreeMap, HashMap};

/// DWARF numbers of x29 (FP), x30 (LR) and SP.
const FP: u16 = 29;
const LR: u16 = 30;
const SP: u16 = 31;

/// Why an edge of a frame-record chain is not proven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cut {
    /// The function has no frame record at that address: a leaf or a prologue before the
    /// `stp x29, x30`, an epilogue after the restore, or a function that saves no record.
    NoRecord,
    /// The record is saved, but x29 is not proven to point at it (between `stp` and
    /// `mov x29, sp`, or x29 is not the frame pointer there).
    FpNotSet,
    /// No image, no host file, or no CFI for the address.
    NoUnwindInfo,
    /// The CFI could not be evaluated there.
    BadTable,
}

impl Cut {
    /// The reason as the report's note names it.
    pub fn name(self) -> &'static str {
        match self {
            Cut::NoRecord => "leaf or no frame record",
            Cut::FpNotSet => "x29 not set to the frame record",
            Cut::NoUnwindInfo => "no unwind info",
            Cut::BadTable => "bad table",
        }
    }
}

/// What the proofs did, for the report's notes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FpStats {
    /// Chains with at least one user edge to prove.
    pub chains: u64,
    /// Chains cut, by reason ([`Cut::name`]).
    pub cuts: BTreeMap<&'static str, u64>,
    /// User frames left out.
    pub dropped: u64,
}

impl FpStats {
    /// One line for the report's notes (`None` when no chain was checked).
    pub fn note(&self) -> Option<String> {
        if self.chains == 0 {
            return None;
        }
        let cut: u64 = self.cuts.values().sum();
        let why: Vec<String> = self.cuts.iter().map(|(k, v)| format!("{v} {k}")).collect();
        Some(format!(
            "fp chains (arm64 frame records): {} checked with CFI, {cut} cut at an unproven edge ({} frames left out){}{}",
            self.chains,
            self.dropped,
            if why.is_empty() { "" } else { ": " },
            why.join(", ")
        ))
    }
}

/// Proves frame-record chains; caches the images' tables and each address's verdict.
pub struct Prover {
    tables: HashMap<u64, Option<ImageTables>>,
    ctx: Box<UnwindContext<usize>>,
    cs: Option<Capstone>,
    /// (image, file offset, return address) → verdict.
    cache: HashMap<(u64, u64, bool), Result<(), Cut>>,
    pub stats: FpStats,
}

impl Default for Prover {
    fn default() -> Self {
        Prover::new()
    }
}

impl Prover {
    pub fn new() -> Prover {
        let cs = Capstone::new()
            .arm64()
            .mode(arch::arm64::ArchMode::Arm)
            .detail(true)
            .build()
            .ok();
        Prover {
            tables: HashMap::new(),
            ctx: Box::new(UnwindContext::new()),
            cs,
            cache: HashMap::new(),
            stats: FpStats::default(),
        }
    }

    /// How many entries of a chain's user part to keep (at least 1 when there is any). `user`:
    /// the entries as (image id, file offset), `None` for one in no image (anonymous memory);
    /// the first is an exact PC, the others return addresses from the frame-record walk.
    /// `load(image)` gives an image's tables (`None`: no host file).
    /// `samples`: how many samples had this chain (the counts are by sample).
    pub fn keep(
        &mut self,
        user: &[Option<(u64, u64)>],
        samples: u64,
        load: &mut dyn FnMut(u64) -> Option<ImageTables>,
    ) -> usize {
        if user.len() < 2 {
            return user.len();
        }
        self.stats.chains += samples;
        for (k, e) in user[..user.len() - 1].iter().enumerate() {
            let verdict = match *e {
                Some((image, offset)) => self.verdict(image, offset, k > 0, load),
                None => Err(Cut::NoUnwindInfo),
            };
            if let Err(cut) = verdict {
                *self.stats.cuts.entry(cut.name()).or_default() += samples;
                self.stats.dropped += (user.len() - k - 1) as u64 * samples;
                return k + 1;
            }
        }
        user.len()
    }

    fn verdict(
        &mut self,
        image: u64,
        offset: u64,
        ret: bool,
        load: &mut dyn FnMut(u64) -> Option<ImageTables>,
    ) -> Result<(), Cut> {
        if let Some(&v) = self.cache.get(&(image, offset, ret)) {
            return v;
        }
        let tables = self.tables.entry(image).or_insert_with(|| load(image));
        let v = match tables.as_ref() {
            None => Err(Cut::NoUnwindInfo),
            Some(t) => match offset_to_vaddr(&t.loads, offset) {
                // A return address is checked at its call instruction.
                Some(a) if ret => match a.checked_sub(4) {
                    Some(call) if a & 3 == 0 => record_at(t, &mut self.ctx, self.cs.as_ref(), call),
                    _ => Err(Cut::NoUnwindInfo),
                },
                Some(a) => record_at(t, &mut self.ctx, self.cs.as_ref(), a),
                None => Err(Cut::NoUnwindInfo),
            },
        };
        self.cache.insert((image, offset, ret), v);
        v
    }
}

/// Whether, at ELF address `at` of the image `t`, the function there keeps a frame record that
/// x29 points at (see the module docs).
pub fn record_at(
    t: &ImageTables,
    ctx: &mut UnwindContext<usize>,
    cs: Option<&Capstone>,
    at: u64,
) -> Result<(), Cut> {
    let cfi = t.cfi_for(at).ok_or(Cut::NoUnwindInfo)?;
    let row = cfi
        .row(ctx, at)
        .map_err(|_| Cut::BadTable)?
        .ok_or(Cut::BadTable)?;
    if row.ra != LR {
        return Err(Cut::BadTable);
    }
    let (Rule::Offset(o), Rule::Offset(o30)) = (row.rule(FP), row.rule(LR)) else {
        return Err(Cut::NoRecord);
    };
    if o.checked_add(8) != Some(o30) || row.ra_undefined {
        return Err(Cut::NoRecord);
    }
    match row.cfa {
        // x29 = CFA - k, exact at `at`.
        Cfa::RegOffset(FP, k) if k.checked_neg() == Some(o) => Ok(()),
        Cfa::RegOffset(SP, _) => {
            let func = cfi.fde_range(at).ok_or(Cut::NoUnwindInfo)?;
            let cs = cs.ok_or(Cut::FpNotSet)?;
            if fp_set(t, ctx, cs, func, at, o) {
                Ok(())
            } else {
                Err(Cut::FpNotSet)
            }
        }
        _ => Err(Cut::FpNotSet),
    }
}

/// `add x29, sp, #imm{, lsl #12}` (`mov x29, sp` is `add x29, sp, #0`): the immediate.
fn sets_fp_from_sp(w: u32) -> Option<i64> {
    if w & 0xFF80_03FF != 0x9100_03FD {
        return None;
    }
    let imm = i64::from((w >> 10) & 0xFFF);
    Some(if w & (1 << 22) != 0 { imm << 12 } else { imm })
}

/// Whether the code of the function `func` (ELF addresses) sets x29 to the frame record at
/// CFA + `o` before `at` and writes it nowhere else before `at` (in address order), bar
/// restores that leave the function.
fn fp_set(
    t: &ImageTables,
    ctx: &mut UnwindContext<usize>,
    cs: &Capstone,
    func: std::ops::Range<u64>,
    at: u64,
    o: i64,
) -> bool {
    let Some(code) = t.code(func.start..at) else {
        return false;
    };
    let Ok(insns) = cs.disasm_all(code, func.start) else {
        return false;
    };
    if insns.len() * 4 != code.len() {
        // Data or an undecodable word before the PC: not proven.
        return false;
    }
    let Some(cfi) = t.cfi_for(func.start) else {
        return false;
    };
    let fp = RegId(arch::arm64::Arm64Reg::ARM64_REG_X29 as u16);
    let insns: Vec<_> = insns.iter().collect();
    let mut state = false;
    for (i, insn) in insns.iter().enumerate() {
        let w = u32::from_le_bytes(insn.bytes().try_into().unwrap_or_default());
        if let Some(imm) = sets_fp_from_sp(w) {
            // SP there is CFA - k by the row at the instruction.
            state = match cfi.row(ctx, insn.address()) {
                Ok(Some(r)) => {
                    matches!(r.cfa, Cfa::RegOffset(SP, k) if imm.checked_sub(k) == Some(o))
                }
                _ => false,
            };
            continue;
        }
        let writes = match cs.insn_detail(insn) {
            Ok(d) => d.regs_write().contains(&fp),
            Err(_) => true,
        };
        if writes && !leaves_after(&insns[i + 1..], &func) {
            state = false;
        }
    }
    state
}

/// Whether the instructions `rest` (those after an x29 restore, within the scanned part of the
/// function) leave the function before any other branch, within a few instructions: `ret`,
/// `br`, or `b` out of `func` (hints such as `autiasp` and non-branches in between). A restore
/// whose exit is not seen before the PC is not excused.
fn leaves_after(rest: &[&capstone::Insn<'_>], func: &std::ops::Range<u64>) -> bool {
    for insn in rest.iter().take(6) {
        let w = u32::from_le_bytes(insn.bytes().try_into().unwrap_or_default());
        let ret = w & 0xFFFF_FC1F == 0xD65F_0000 || w == 0xD65F_0BFF || w == 0xD65F_0FFF;
        if ret || w & 0xFFFF_FC1F == 0xD61F_0000 {
            return true;
        }
        if w & 0xFC00_0000 == 0x1400_0000 {
            // B: imm26 words, PC-relative.
            let off = i64::from(((w << 6) as i32) >> 6) * 4;
            return insn
                .address()
                .checked_add_signed(off)
                .is_some_and(|a| !func.contains(&a));
        }
        let hint = w & 0xFFFF_F01F == 0xD503_201F;
        // Branches, exception generation and system instructions (op0 x101).
        if !hint && (w >> 26) & 7 == 0b101 {
            return false;
        }
    }
    false
}
