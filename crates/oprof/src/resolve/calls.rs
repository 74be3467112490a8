//! Which symbol starts of an image are reached without a call: the facts behind
//! [`SymbolTable::frame_address`](crate::resolve::symbols::SymbolTable::frame_address).
//!
//! A call-chain frame is a return address, looked up at `address - 1` to name the caller. That
//! is wrong when code stores a return address by hand and jumps: ARM's syscall entry
//! (`arch/arm/kernel/entry-common.S`, `vector_swi`: `badr lr, ret_fast_syscall` then `ldr pc,
//! [tbl, scno, lsl #2]`) makes every syscall handler return to the first instruction of
//! `ret_fast_syscall`, and `address - 1` lands in whatever the linker put before it
//! (`cpu_v7_reset`, the last function of `.idmap.text`). A symbol start is entered without a
//! call when the instruction that ends there is not a call:
//!
//! - ELF images for ARM (vmlinux, `.ko`, user programs and libraries): the instruction before
//!   the symbol, decoded in the state the mapping symbols (`$a`, `$t`, `$d`; ARM ELF ABI
//!   "Mapping symbols") give, else the Thumb bit of the function symbol it lies in. Calls are
//!   ARM `BL`, `BLX` (immediate and register) and the pre-ARMv5 `mov lr, pc` before a jump;
//!   Thumb `BL`/`BLX` (32-bit) and `BLX Rm` (decoded by `oprofile_common::arm`, which the
//!   module's frame walk uses too). Data (`$d`, literal pools) is not a call.
//! - ELF images for AArch64: the same with the A64 mapping symbols (`$x` code, `$d` data;
//!   AArch64 ELF ABI "Mapping symbols"), no Thumb bit (every A64 instruction is 4 bytes at a
//!   4-byte aligned address), and the A64 calls `BL`, `BLR`, `BLRAA`/`BLRAB`(`Z`)
//!   (`oprofile_common::aarch64`, shared with the module's arm64 frame walk). Other
//!   architectures keep the `- 1` rule (no facts).
//! - kallsyms (no code): symbol starts at a linker text-section marker (`__entry_text_start`,
//!   `__idmap_text_end`, ... `__*_text_start`/`__*_text_end`): the code before belongs to
//!   another section, and a call there whose return address is this section's first byte would
//!   have to be a `noreturn` call as that section's very last instruction.

use crate::resolve::isa::Isa;
use crate::resolve::symbols::Symbol;
use object::{Object, ObjectSection, ObjectSymbol, SectionIndex, SymbolKind, SymbolSection};
use oprofile_common::{aarch64, arm};
use std::collections::{HashMap, HashSet};

/// Instruction-set marks of each executable section: (runtime address, state), sorted.
pub type ArmMarks = HashMap<SectionIndex, Vec<(u64, Isa)>>;

/// Whether the code `before` a symbol start (the section's bytes up to it) ends in a call, in
/// state `state` (ARM, Thumb, A64 or data); `None` when there are too few bytes to tell.
pub(crate) fn ends_in_call(before: &[u8], state: Isa) -> Option<bool> {
    let u16_at = |end: usize| -> Option<u16> {
        let b = before.get(before.len().checked_sub(end)?..)?.get(..2)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |end: usize| -> Option<u32> {
        let b = before.get(before.len().checked_sub(end)?..)?.get(..4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    match state {
        Isa::Arm => {
            let w = u32_at(4)?;
            Some(arm::arm_is_call(w) || u32_at(8).is_some_and(arm::arm_is_mov_lr_pc))
        }
        Isa::Thumb => {
            let last = u16_at(2)?;
            Some(arm::thumb_ends_in_call(u16_at(4), last))
        }
        Isa::Arm64 => Some(aarch64::is_call(u32_at(4)?)),
        // Data (and no other state) is no call.
        _ => Some(false),
    }
}

/// The state a mapping symbol name sets, optionally followed by `.suffix`: ARM `$a`, `$t`,
/// `$d`; AArch64 (`a64`) `$x`, `$d`.
fn mapping_state(name: &str, a64: bool) -> Option<Isa> {
    let kind = name.strip_prefix('$')?;
    let kind = kind.split('.').next()?;
    match (kind, a64) {
        ("a", false) => Some(Isa::Arm),
        ("t", false) => Some(Isa::Thumb),
        ("x", true) => Some(Isa::Arm64),
        ("d", _) => Some(Isa::Data),
        _ => None,
    }
}

/// Whether `file` is a little-endian ARM (`Some(false)`) or AArch64 (`Some(true)`) ELF: the
/// machines whose code this module decodes.
pub fn arm_family(file: &object::File<'_>) -> Option<bool> {
    match file.architecture() {
        _ if !file.is_little_endian() => None,
        object::Architecture::Arm => Some(false),
        object::Architecture::Aarch64 => Some(true),
        _ => None,
    }
}

/// The instruction-set marks of an ARM or AArch64 `file`'s executable sections `exec` at
/// runtime addresses (`base`: each section's address; `relocatable`: symbol values are section
/// offsets, `ET_REL`): per section its mapping symbols, or when it has none the state of its
/// function symbols (ARM: their Thumb bit; AArch64: A64). Empty for other machines.
pub fn arm_marks(
    file: &object::File<'_>,
    base: &HashMap<SectionIndex, u64>,
    exec: &HashSet<SectionIndex>,
    relocatable: bool,
) -> ArmMarks {
    let Some(a64) = arm_family(file) else {
        return ArmMarks::new();
    };
    // Bit 0 of an ARM symbol is the Thumb bit; A64 code has none.
    let mask = if a64 { !0 } else { !1 };
    // Per section: (mapping symbols, function symbols), each as (address, state).
    type Marks = (Vec<(u64, Isa)>, Vec<(u64, Isa)>);
    let mut marks: HashMap<SectionIndex, Marks> = HashMap::new();
    for s in file.symbols().chain(file.dynamic_symbols()) {
        let SymbolSection::Section(i) = s.section() else {
            continue;
        };
        if !exec.contains(&i) {
            continue;
        }
        let Some(&b) = base.get(&i) else { continue };
        let value = if relocatable {
            b.checked_add(s.address() & mask)
        } else {
            Some(s.address() & mask)
        };
        let Some(addr) = value else { continue };
        let entry = marks.entry(i).or_default();
        match s.name().ok().and_then(|n| mapping_state(n, a64)) {
            Some(st) => entry.0.push((addr, st)),
            None if s.kind() == SymbolKind::Text => {
                entry.1.push((addr, function_state(s.address(), a64)))
            }
            None => {}
        }
    }
    marks
        .into_iter()
        .map(|(i, (mapping, funcs))| {
            let mut list = if mapping.is_empty() { funcs } else { mapping };
            list.sort_by_key(|m| m.0);
            (i, list)
        })
        .collect()
}

/// The state of a function symbol of value `value` without mapping symbols.
fn function_state(value: u64, a64: bool) -> Isa {
    match (a64, value & 1 != 0) {
        (true, _) => Isa::Arm64,
        (false, true) => Isa::Thumb,
        (false, false) => Isa::Arm,
    }
}

/// The symbol starts of `syms` (runtime addresses) that an ARM or AArch64 `file` reaches without a call
/// (see the module docs). `base`: each section's runtime address; `marks`: its sections'
/// instruction-set marks ([`arm_marks`]).
pub fn entered_without_call(
    file: &object::File<'_>,
    base: &HashMap<SectionIndex, u64>,
    marks: &ArmMarks,
    syms: &[Symbol],
) -> Vec<u64> {
    if arm_family(file).is_none() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for sec in file.sections() {
        let i = sec.index();
        let (Some(&b), Some(list)) = (base.get(&i), marks.get(&i)) else {
            continue;
        };
        let Ok(data) = sec.data() else { continue };
        let end = b.saturating_add(data.len() as u64);
        for s in syms.iter().filter(|s| s.addr > b && s.addr < end) {
            let last = s.addr - 1;
            let Some(k) = list.partition_point(|m| m.0 <= last).checked_sub(1) else {
                continue;
            };
            let Ok(off) = usize::try_from(s.addr - b) else {
                continue;
            };
            if ends_in_call(&data[..off], list[k].1) == Some(false) {
                out.push(s.addr);
            }
        }
    }
    out
}

/// Whether a kallsyms name is a linker text-section marker (`__entry_text_start`, ...).
pub fn is_text_section_marker(name: &str) -> bool {
    name.starts_with("__") && (name.ends_with("_text_start") || name.ends_with("_text_end"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_calls() {
        // ARM: bl, blx imm, blx r3, bx r0 (cpu_v7_reset's last), ldr pc after mov lr, pc.
        for (w, call) in [
            (0xEB00_0010u32, true),
            (0xFA00_0001, true),
            (0xE12F_FF33, true),
            (0xE12F_FF10, false),
            (0x1B00_0000, true),
        ] {
            assert_eq!(
                ends_in_call(&w.to_le_bytes(), Isa::Arm),
                Some(call),
                "{w:#x}"
            );
        }
        let old_call: Vec<u8> = [0xE1A0_E00Fu32, 0xE593_F000]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        assert_eq!(ends_in_call(&old_call, Isa::Arm), Some(true));
        // Thumb: bl (f000 f800), blx r3 (4798), bx lr (4770), b.w (f000 b800).
        let t = |hs: &[u16]| hs.iter().flat_map(|h| h.to_le_bytes()).collect::<Vec<u8>>();
        assert_eq!(ends_in_call(&t(&[0xF000, 0xF800]), Isa::Thumb), Some(true));
        assert_eq!(
            ends_in_call(&t(&[0xF000, 0xE800]), Isa::Thumb),
            Some(true),
            "blx imm"
        );
        assert_eq!(ends_in_call(&t(&[0x4798]), Isa::Thumb), Some(true));
        assert_eq!(ends_in_call(&t(&[0xBF00, 0x4770]), Isa::Thumb), Some(false));
        assert_eq!(
            ends_in_call(&t(&[0xF000, 0xB800]), Isa::Thumb),
            Some(false),
            "b.w"
        );
        assert_eq!(ends_in_call(&[0; 2], Isa::Arm), None, "too short");
        assert_eq!(ends_in_call(&[], Isa::Data), Some(false));
        assert_eq!(mapping_state("$t.12", false), Some(Isa::Thumb));
        assert_eq!(mapping_state("$x", false), None);
        assert_eq!(mapping_state("$x.7", true), Some(Isa::Arm64));
        assert_eq!(mapping_state("$d", true), Some(Isa::Data));
        assert_eq!(
            mapping_state("$a", true),
            None,
            "no ARM state in an AArch64 object"
        );
        // A64: bl, blr x8, blraaz x8 are calls; ret, b, br x16 (a PLT's tail) are not.
        for (w, call) in [
            (0x9400_0010u32, true),
            (0xD63F_0100, true),
            (0xD63F_091F, true),
            (0xD65F_03C0, false),
            (0x1400_0004, false),
            (0xD61F_0220, false),
        ] {
            assert_eq!(
                ends_in_call(&w.to_le_bytes(), Isa::Arm64),
                Some(call),
                "{w:#x}"
            );
        }
        assert_eq!(ends_in_call(&[0; 3], Isa::Arm64), None, "too short");
        assert!(
            is_text_section_marker("__entry_text_start")
                && is_text_section_marker("__idmap_text_end")
        );
        assert!(!is_text_section_marker("_stext") && !is_text_section_marker("ret_fast_syscall"));
    }
}
