// SPDX-License-Identifier: GPL-2.0

//! AArch64 (A64) call instructions and frame records: whether a return address follows a call,
//! and the user frame-record walk.
//!
//! Follows the Arm Architecture Reference Manual for A-profile (DDI 0487), C6.2 `BL` (`1001 01
//! imm26`), `BLR` (`1101 0110 0011 1111 0000 00 Rn 00000`), `BLRAA`/`BLRAAZ`/`BLRAB`/`BLRABZ`
//! (pointer authentication: `1101 011Z 0011 1111 0000 1M Rn Rm`, Rm = 11111 for the Z forms), and
//! the procedure call standard (AAPCS64 §6.4.6 "The Frame Pointer"): x29 points to a 16-byte
//! frame record `{caller's x29, return address}`; the outermost record is `{0, 0}` or has a
//! zero link. Every A64 instruction is 4 bytes, little-endian here.
//!
//! The module's user walk (`sync::walk_user_frames`, arm64) and the host tool's call facts use
//! the same decoding.

/// The PSTATE bit that marks AArch32 state in an SPSR (`PSR_MODE32_BIT`): a compat task.
pub const PSR_MODE32_BIT: usize = 0x10;

/// Whether the A64 instruction `w` is a call: `BL`, `BLR`, or an authenticated `BLRA*`.
pub fn is_call(w: u32) -> bool {
    let bl = (w & 0xFC00_0000) == 0x9400_0000;
    let blr = (w & 0xFFFF_FC1F) == 0xD63F_0000;
    // BLRAAZ, BLRABZ: 1101 0110 0011 1111 0000 1M Rn 11111.
    let blra_z = (w & 0xFFFF_F81F) == 0xD63F_081F;
    // BLRAA, BLRAB: 1101 0111 0011 1111 0000 1M Rn Rm.
    let blra = (w & 0xFFFF_F800) == 0xD73F_0800;
    bl || blr || blra_z || blra
}

/// Whether the instruction before return address `ret` is a call, reading code with
/// `read32(addr)` (the 4 bytes at `addr`; `None` when unreadable). `None` when `ret` is not
/// 4-byte aligned (no A64 return address) or the code cannot be read.
pub fn returns_after_call(
    ret: usize,
    mut read32: impl FnMut(usize) -> Option<u32>,
) -> Option<bool> {
    if ret & 3 != 0 {
        return None;
    }
    Some(is_call(read32(ret.checked_sub(4)?)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a64_calls() {
        // bl, blr x8, blraaz x8, blrab x8, x9; not: b, br x8, ret, nop.
        for w in [
            0x9400_0010u32,
            0x97FF_FFF0,
            0xD63F_0100,
            0xD63F_091F,
            0xD73F_0D09,
        ] {
            assert!(is_call(w), "{w:#x}");
        }
        for w in [0x1400_0010u32, 0xD61F_0100, 0xD65F_03C0, 0xD503_201F] {
            assert!(!is_call(w), "{w:#x}");
        }
    }

    #[test]
    fn return_addresses() {
        let code = |a: usize| match a {
            0x1000 => Some(0x9400_0010u32),
            0x2000 => Some(0xD503_201F),
            _ => None,
        };
        assert_eq!(returns_after_call(0x1004, code), Some(true));
        assert_eq!(returns_after_call(0x2004, code), Some(false));
        assert_eq!(returns_after_call(0x1006, code), None, "misaligned");
        assert_eq!(returns_after_call(0x3004, code), None, "unreadable");
        assert_eq!(returns_after_call(0, code), None, "below 0");
    }
}
