// SPDX-License-Identifier: GPL-2.0

//! ARM (A32) and Thumb (T32) call instructions: whether a return address follows a call.
//!
//! Follows the ARM Architecture Reference Manual ARMv7-A/R: A8.8.25 `BL, BLX (immediate)`
//! (A1: `cond 1011 imm24`; A2: `1111 101H imm24`; T1: `11110 S imm10` + `11 J1 1 J2 imm11`;
//! T2: `11110 S imm10H` + `11 J1 0 J2 imm10L H`), A8.8.26 `BLX (register)` (A1: `cond 0001 0010
//! 1111 1111 1111 0011 Rm`; T1: `0100 0111 1 Rm 000`), and the pre-ARMv5 call sequence `mov lr,
//! pc` before a jump. A return address with bit 0 set returns to Thumb code (interworking: BL
//! from Thumb state sets bit 0 of LR).
//!
//! The module's frame-pointer walk (`sync::walk_user_frames`) and the host tool's call facts
//! (`crates/oprof/src/resolve/calls.rs`) use the same decoding.

/// The Thumb execution state bit of the CPSR (`PSR_T_BIT`).
pub const PSR_T_BIT: usize = 0x20;

/// Whether the ARM (A32) instruction `w` is a call: `BL`, `BLX imm`, `BLX Rm`.
pub fn arm_is_call(w: u32) -> bool {
    let bl = (w & 0x0F00_0000) == 0x0B00_0000 && (w >> 28) != 0xF;
    let blx_imm = (w & 0xFE00_0000) == 0xFA00_0000;
    let blx_reg = (w & 0x0FFF_FFF0) == 0x012F_FF30;
    bl || blx_imm || blx_reg
}

/// `mov lr, pc` (any condition): the pre-ARMv5 call sequence's first half.
pub fn arm_is_mov_lr_pc(w: u32) -> bool {
    (w & 0x0FFF_FFFF) == 0x01A0_E00F
}

/// Whether Thumb code whose last halfword is `last` (preceded by `before`, when there is one)
/// ends in a call: `BLX Rm` (16-bit) or a 32-bit `BL`/`BLX` whose halfwords are `before`,
/// `last`.
pub fn thumb_ends_in_call(before: Option<u16>, last: u16) -> bool {
    let blx_reg = (last & 0xFF87) == 0x4780;
    let bl32 = before.is_some_and(|h1| (h1 & 0xF800) == 0xF000 && (last & 0xC000) == 0xC000);
    blx_reg || bl32
}

/// Whether the instruction before return address `ret` is a call, reading code with
/// `read32(addr)` (the 4 bytes at `addr`, little-endian; `None` when unreadable): ARM code when
/// bit 0 of `ret` is clear (the word at `ret - 4`, or `mov lr, pc` at `ret - 8`), Thumb code when
/// it is set (the halfwords at `ret - 5` and `ret - 3`). `None` when the code cannot be read.
pub fn returns_after_call(
    ret: usize,
    mut read32: impl FnMut(usize) -> Option<u32>,
) -> Option<bool> {
    if ret & 1 == 0 {
        if arm_is_call(read32(ret.checked_sub(4)?)?) {
            return Some(true);
        }
        let old = ret
            .checked_sub(8)
            .and_then(&mut read32)
            .is_some_and(arm_is_mov_lr_pc);
        Some(old)
    } else {
        let w = read32((ret & !1).checked_sub(4)?)?;
        Some(thumb_ends_in_call(Some(w as u16), (w >> 16) as u16))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_and_thumb_calls() {
        // ARM: bl, blx imm, blx r3, bx r0, conditional bl; `bl` with cond 0xF is blx imm's space.
        for (w, call) in [
            (0xEB00_0010u32, true),
            (0xFA00_0001, true),
            (0xE12F_FF33, true),
            (0xE12F_FF10, false),
            (0x1B00_0000, true),
        ] {
            assert_eq!(arm_is_call(w), call, "{w:#x}");
        }
        assert!(arm_is_mov_lr_pc(0xE1A0_E00F) && !arm_is_mov_lr_pc(0xE1A0_F00E));
        // Thumb: bl (f000 f800), blx imm (f000 e800), blx r3 (4798), bx lr (4770), b.w (f000 b800).
        assert!(thumb_ends_in_call(Some(0xF000), 0xF800));
        assert!(thumb_ends_in_call(Some(0xF000), 0xE800));
        assert!(thumb_ends_in_call(None, 0x4798));
        assert!(!thumb_ends_in_call(Some(0xBF00), 0x4770));
        assert!(!thumb_ends_in_call(Some(0xF000), 0xB800));
        assert!(!thumb_ends_in_call(None, 0xF800), "half a bl");
    }

    #[test]
    fn return_addresses() {
        // Code at 0x1000: an ARM bl at 0x1000, a Thumb bl at 0x2000 (halfwords f7ff ffde), data.
        let code = |a: usize| match a {
            0x1000 => Some(0xEBFF_FFF0u32),
            0x2000 => Some(0xFFDE_F7FF),
            0x3000 => Some(0xE1A0_E00F),
            0x3004 => Some(0xE593_F000),
            0x4000 => Some(0x0000_0000),
            _ => None,
        };
        assert_eq!(returns_after_call(0x1004, code), Some(true));
        assert_eq!(
            returns_after_call(0x2005, code),
            Some(true),
            "Thumb return address"
        );
        assert_eq!(
            returns_after_call(0x2004, code),
            Some(false),
            "the same code read as ARM"
        );
        assert_eq!(
            returns_after_call(0x3008, code),
            Some(true),
            "mov lr, pc; ldr pc, [...]"
        );
        assert_eq!(returns_after_call(0x4004, code), Some(false));
        assert_eq!(returns_after_call(0x5004, code), None, "unreadable");
        assert_eq!(returns_after_call(2, code), None, "below 0");
    }
}
