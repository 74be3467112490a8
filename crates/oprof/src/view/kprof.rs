//! `oprof kprof VMLINUX KPDATA`: the kernel PC histogram of the module's Plan 9 style kprof,
//! attributed to the functions of a vmlinux (after Plan 9's kprof(1), `/sys/src/cmd/kprof.c`).
//!
//! Inputs:
//!
//! - `KPDATA`: a copy of `/dev/oprofile/kprof/kpdata`, decoded with
//!   [`oprofile_common::kprof::Kpdata`]: 4-byte big-endian words, word 0 the total clock ticks,
//!   word 1 the ticks that interrupted the kernel, then one count per kernel-text slot from
//!   `_stext`. Errors: shorter than the 8-byte header, or not whole words.
//! - `VMLINUX`: the kernel image the module ran on, with symbols. `_stext` and `_etext` give
//!   the text `[base, end)` (Thumb bit cleared on ARM); function symbols (demangled as
//!   `oprof report` does) name the slots. Slot `i` starts at `base + i * granularity`, taken
//!   from the ELF's link-time `_stext`, so a relocated (KASLR) kernel attributes correctly.
//!   Errors: unreadable or not ELF, no `_stext`/`_etext`, `_etext <= _stext`, no function
//!   symbols.
//!
//! The granularity (bytes per slot) is `--granularity` when given (a power of two up to
//! [`MAX_GRANULARITY`] whose slot count `ceil((_etext - _stext) / g)` must equal KPDATA's),
//! else the one [`infer_granularity`] finds; a slot count no granularity gives means KPDATA
//! comes from another kernel build.
//!
//! Every non-zero slot is attributed to the function containing the slot's **start address**
//! (a symbol of size 0 extends to the next symbol, as in `oprof report`); a slot coarser than
//! an instruction that straddles two functions counts wholly for the first. Slots no symbol
//! covers go to the row `(no symbol)`.
//!
//! Output: a header (total ticks; kernel ticks and their share of the total; ticks in kernel
//! text, the sum of the slots; kernel ticks outside kernel text, `kernel - text` saturating,
//! e.g. in modules; the text range and granularity), then one row per function, most ticks
//! first (ties by name): ticks, percent of total ticks, percent of kernel-text ticks, name.
//! Unlike Plan 9's kprof, which prints milliseconds (its clock ticks at 1 kHz), counts are
//! clock **ticks** of the module's profiling clock (`kprof_hz`), across all CPUs.
//! `--json` gives [`Profile`]: `{total, kernel, text, outside_text, base, end, granularity,
//! symbols: [{name, ticks, percent, address}]}` (addresses as numbers, `address` null for
//! `(no symbol)`, `percent` of total ticks).

use crate::resolve::elf::ElfImage;
use crate::resolve::symbols::{demangle, SymbolTable};
use crate::view::percent::percent;
use crate::view::printable::Printable;
use anyhow::{anyhow, bail, Context, Result};
use object::{Object, ObjectSymbol};
use oprofile_common::kprof::{
    check_granularity, infer_granularity, Kpdata, KpdataError, HEADER_WORDS, MAX_GRANULARITY,
    WORD_BYTES,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Row name of slots no function symbol covers.
pub const NO_SYMBOL: &str = "(no symbol)";

/// The kernel side: its text range and function symbols.
pub struct Kernel {
    /// How errors name the image (its path).
    pub name: String,
    /// `_stext`: the address of slot 0.
    pub base: u64,
    /// `_etext`: first address past the text.
    pub end: u64,
    /// Function symbols.
    pub symbols: SymbolTable,
}

impl Kernel {
    /// Loads `_stext`, `_etext` and the function symbols of vmlinux `path`; errors name it.
    pub fn load(path: &Path) -> Result<Kernel> {
        let name = path.display().to_string();
        let (image, (base, end)) = ElfImage::load_kernel_with(path, false, text_bounds)?;
        anyhow::ensure!(
            !image.symbols.is_empty(),
            "{name}: no function symbols (stripped?)"
        );
        Ok(Kernel {
            name,
            base,
            end,
            symbols: image.symbols,
        })
    }
}

/// `(_stext, _etext)` of an ELF (bit 0 cleared on ARM, as for function symbols).
fn text_bounds(file: &object::File<'_>) -> Result<(u64, u64)> {
    let mask = if file.architecture() == object::Architecture::Arm {
        !1
    } else {
        !0
    };
    let find = |want: &str| {
        file.symbols()
            .find(|s| s.name() == Ok(want) && !s.is_undefined())
            .map(|s| s.address() & mask)
            .ok_or_else(|| anyhow!("no {want} symbol (not a vmlinux, or stripped?)"))
    };
    let (base, end) = (find("_stext")?, find("_etext")?);
    if end <= base {
        bail!("_etext {end:#x} is not above _stext {base:#x}");
    }
    Ok((base, end))
}

/// Decodes `bytes`, a copy of `kpdata` read from `name`; errors name it.
pub fn decode<'a>(name: &str, bytes: &'a [u8]) -> Result<Kpdata<'a>> {
    Kpdata::new(bytes).map_err(|e| match e {
        KpdataError::Short(n) => {
            anyhow!(
                "{name}: {n} bytes, shorter than the {}-byte header",
                HEADER_WORDS * WORD_BYTES
            )
        }
        KpdataError::Ragged(n) => {
            anyhow!("{name}: {n} bytes, not a whole number of {WORD_BYTES}-byte words")
        }
    })
}

/// The granularity of `kp` (read from `kp_name`) over `kernel`'s text: `given` if its slot
/// count matches, else the inferred one; errors say why neither fits.
pub fn granularity(
    kernel: &Kernel,
    kp_name: &str,
    kp: &Kpdata<'_>,
    given: Option<u32>,
) -> Result<u32> {
    let len = kernel.end - kernel.base;
    let slots = kp.slots();
    let range = format!("{:#x}..{:#x}", kernel.base, kernel.end);
    match given {
        Some(g) => {
            if check_granularity(g, 1).is_err() {
                bail!("--granularity {g}: not a power of two from 1 to {MAX_GRANULARITY}");
            }
            let want = len.div_ceil(u64::from(g));
            if want != slots as u64 {
                bail!(
                    "{kp_name} has {slots} slots, but {}'s text ({range}, {len} bytes) has {want} slots of {g} bytes \
                     (different kernel build, or another granularity?)",
                    kernel.name
                );
            }
            Ok(g)
        }
        None => usize::try_from(len).ok().and_then(|l| infer_granularity(l, slots)).ok_or_else(|| {
            anyhow!(
                "{kp_name} has {slots} slots, but {}'s text ({range}) is {len} bytes: no granularity from 1 to \
                 {MAX_GRANULARITY} bytes gives that many (different kernel build?)",
                kernel.name
            )
        }),
    }
}

/// One function's ticks.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SymbolRow {
    /// Demangled name, or [`NO_SYMBOL`].
    pub name: String,
    /// Ticks whose slot starts in the function.
    pub ticks: u64,
    /// Of the total ticks.
    pub percent: f64,
    /// The function's start address; `None` for [`NO_SYMBOL`].
    pub address: Option<u64>,
}

/// The attributed histogram (the `--json` output).
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    /// Clock ticks while profiling (word 0).
    pub total: u64,
    /// Ticks that interrupted the kernel (word 1).
    pub kernel: u64,
    /// Ticks in kernel text: the sum of the slots.
    pub text: u64,
    /// `kernel - text` (saturating): kernel ticks elsewhere, e.g. in modules.
    pub outside_text: u64,
    /// `_stext`.
    pub base: u64,
    /// `_etext`.
    pub end: u64,
    /// Bytes per slot.
    pub granularity: u32,
    /// Functions with ticks, most first (ties by name, then address).
    pub symbols: Vec<SymbolRow>,
}

/// Attributes `kp`'s slots (`g` bytes each, from `kernel.base`) to `kernel`'s functions.
pub fn build(kernel: &Kernel, kp: &Kpdata<'_>, g: u32) -> Profile {
    let total = u64::from(kp.total());
    let kernel_ticks = u64::from(kp.kernel());
    // Keyed by (address, raw name); `None` for uncovered slots.
    let mut per: BTreeMap<Option<(u64, &str)>, u64> = BTreeMap::new();
    let mut text = 0u64;
    for (slot, n) in kp.nonzero() {
        text += u64::from(n);
        let addr = kernel
            .base
            .wrapping_add((slot as u64).wrapping_mul(u64::from(g)));
        let key = kernel
            .symbols
            .lookup(addr)
            .map(|s| (s.addr, s.name.as_str()));
        *per.entry(key).or_default() += u64::from(n);
    }
    let pct = |n: u64| percent(n, total);
    let mut symbols: Vec<SymbolRow> = per
        .into_iter()
        .map(|(key, ticks)| match key {
            Some((addr, name)) => SymbolRow {
                name: demangle(name),
                ticks,
                percent: pct(ticks),
                address: Some(addr),
            },
            None => SymbolRow {
                name: NO_SYMBOL.to_string(),
                ticks,
                percent: pct(ticks),
                address: None,
            },
        })
        .collect();
    symbols.sort_by(|a, b| {
        b.ticks
            .cmp(&a.ticks)
            .then_with(|| a.name.cmp(&b.name))
            .then(a.address.cmp(&b.address))
    });
    Profile {
        total,
        kernel: kernel_ticks,
        text,
        outside_text: kernel_ticks.saturating_sub(text),
        base: kernel.base,
        end: kernel.end,
        granularity: g,
        symbols,
    }
}

/// The text output: header and at most `limit` rows (0: all).
pub fn render(p: &Profile, limit: usize) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Total ticks: {} (kprof clock ticks, all CPUs; not ms)",
        p.total
    );
    let _ = writeln!(
        out,
        "Kernel ticks: {} ({:.1}% of total)",
        p.kernel,
        percent(p.kernel, p.total)
    );
    let _ = writeln!(out, "In kernel text: {}", p.text);
    let _ = writeln!(
        out,
        "Kernel, outside kernel text: {} (e.g. modules)",
        p.outside_text
    );
    let _ = writeln!(
        out,
        "Text: {:#x}..{:#x} (_stext.._etext), {} bytes per slot",
        p.base, p.end, p.granularity
    );
    let n = super::shown(p.symbols.len(), limit);
    let _ = writeln!(out, "{:<9} {:>6} {:>6}  symbol name", "ticks", "%", "%text");
    for r in &p.symbols[..n] {
        let _ = writeln!(
            out,
            "{:<9} {:>6.1} {:>6.1}  {}",
            r.ticks,
            r.percent,
            percent(r.ticks, p.text),
            Printable(&r.name)
        );
    }
    if n < p.symbols.len() {
        let rest: u64 = p.symbols[n..].iter().map(|r| r.ticks).sum();
        let _ = writeln!(out, "({} more rows, {} ticks)", p.symbols.len() - n, rest);
    }
    out
}

/// `oprof kprof`: reads both files and attributes the histogram.
pub fn run(vmlinux: &Path, kpdata: &Path, given: Option<u32>) -> Result<Profile> {
    let kp_name = kpdata.display().to_string();
    let bytes = std::fs::read(kpdata).with_context(|| format!("reading {kp_name}"))?;
    let kp = decode(&kp_name, &bytes)?;
    let kernel = Kernel::load(vmlinux)?;
    let g = granularity(&kernel, &kp_name, &kp, given)?;
    Ok(build(&kernel, &kp, g))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::symbols::{Binding, Symbol};
    use std::process::Command;

    /// A kernel with text `[base, end)` and function symbols `(addr, size, name)`.
    fn kernel(base: u64, end: u64, syms: &[(u64, u64, &str)]) -> Kernel {
        let syms = syms
            .iter()
            .map(|&(addr, size, name)| Symbol {
                addr,
                size,
                name: name.into(),
                binding: Binding::Global,
            })
            .collect();
        Kernel {
            name: "vmlinux".into(),
            base,
            end,
            symbols: SymbolTable::new(syms, std::iter::once(base..end).collect()),
        }
    }

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    /// 0x40 bytes of text: `a` 0x10 bytes, a gap, `asm` (size 0) to `b`, `b` to the end.
    fn small() -> Kernel {
        kernel(
            0xc000_0000,
            0xc000_0040,
            &[
                (0xc000_0000, 0x10, "a"),
                (0xc000_0020, 0, "asm"),
                (
                    0xc000_0030,
                    0x10,
                    "_ZN6kernel4task5sched17h0123456789abcdefE",
                ),
            ],
        )
    }

    #[test]
    fn slots_go_to_the_symbol_at_their_start() {
        let k = small();
        // 16 slots of 4 bytes: a (0..3), gap (4..7), asm (8..11), b (12..15).
        let bytes = words(&[100, 60, 5, 0, 0, 1, 2, 0, 0, 0, 3, 0, 0, 4, 0, 0, 0, 10]);
        let kp = decode("kpdata", &bytes).unwrap();
        let g = granularity(&k, "kpdata", &kp, None).unwrap();
        assert_eq!(g, 4);
        let p = build(&k, &kp, g);
        assert_eq!(
            (p.total, p.kernel, p.text, p.outside_text),
            (100, 60, 25, 35)
        );
        assert_eq!(
            (p.base, p.end, p.granularity),
            (0xc000_0000, 0xc000_0040, 4)
        );
        let rows: Vec<_> = p
            .symbols
            .iter()
            .map(|r| (r.name.as_str(), r.ticks, r.address))
            .collect();
        assert_eq!(
            rows,
            [
                ("kernel::task::sched", 10, Some(0xc000_0030)),
                ("asm", 7, Some(0xc000_0020)), // size 0: up to the next symbol
                ("a", 6, Some(0xc000_0000)),
                (NO_SYMBOL, 2, None), // slot 4 (0x10): between a's end and asm
            ]
        );
        assert!((p.symbols[0].percent - 10.0).abs() < 1e-9);
        let text = render(&p, 0);
        assert!(
            text.contains("Total ticks: 100 ")
                && text.contains("Kernel ticks: 60 (60.0% of total)"),
            "{text}"
        );
        assert!(
            text.contains("In kernel text: 25") && text.contains("outside kernel text: 35"),
            "{text}"
        );
        assert!(
            text.contains("0xc0000000..0xc0000040") && text.contains("4 bytes per slot"),
            "{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.starts_with("10 ") && l.contains(" 10.0 ") && l.contains(" 40.0 ")),
            "{text}"
        );
        let text = render(&p, 1);
        assert!(
            text.contains("(3 more rows, 15 ticks)") && !text.contains("asm"),
            "{text}"
        );
        let j = serde_json::to_value(&p).unwrap();
        for f in [
            "total",
            "kernel",
            "text",
            "outside_text",
            "base",
            "end",
            "granularity",
            "symbols",
        ] {
            assert!(j.get(f).is_some(), "JSON lacks {f}");
        }
        assert_eq!(j["symbols"][2]["name"], "a");
        assert_eq!(j["symbols"][2]["address"], 0xc000_0000u64);
        assert_eq!(j["symbols"][2]["ticks"], 6);
        assert_eq!(j["symbols"][2]["percent"], 6.0);
        assert!(j["symbols"][3]["address"].is_null());
    }

    #[test]
    fn coarse_slots_straddle_and_ties_sort_by_name() {
        let k = kernel(
            0x1000,
            0x1010,
            &[(0x1000, 6, "zeta"), (0x1006, 10, "alpha")],
        );
        // 2 slots of 8 bytes: slot 0 starts in zeta (covering alpha's first bytes), slot 1 in alpha.
        let bytes = words(&[9, 9, 4, 4]);
        let kp = decode("kpdata", &bytes).unwrap();
        let p = build(&k, &kp, granularity(&k, "kpdata", &kp, Some(8)).unwrap());
        let rows: Vec<_> = p
            .symbols
            .iter()
            .map(|r| (r.name.as_str(), r.ticks))
            .collect();
        assert_eq!(rows, [("alpha", 4), ("zeta", 4)]);
        assert_eq!(p.outside_text, 1);
        // Kernel ticks below the text sum (counts read while running) saturate at 0.
        let bytes = words(&[9, 3, 4, 4]);
        assert_eq!(
            build(&k, &decode("kpdata", &bytes).unwrap(), 8).outside_text,
            0
        );
        // Nothing counted: a header and no rows.
        let bytes = words(&[0, 0, 0, 0]);
        let p = build(&k, &decode("kpdata", &bytes).unwrap(), 8);
        assert!(p.symbols.is_empty() && p.total == 0);
        assert!(render(&p, 0).contains("Kernel ticks: 0 (0.0% of total)"));
    }

    #[test]
    fn granularity_mismatches_are_explained() {
        let k = kernel(0xc000_0000, 0xc000_0040, &[(0xc000_0000, 0x40, "a")]);
        let bytes = words(&[1, 1, 0, 0, 0, 0, 0]); // 5 slots: no granularity gives 5 over 64 bytes
        let kp = decode("kp", &bytes).unwrap();
        let e = granularity(&k, "kp", &kp, None).unwrap_err().to_string();
        assert!(
            e.contains("kp has 5 slots") && e.contains("vmlinux's text") && e.contains("64 bytes"),
            "{e}"
        );
        assert!(e.contains("different kernel build"), "{e}");
        let bytes = words(&[1, 1, 0, 0, 0, 0]); // 4 slots: 16-byte granularity
        let kp = decode("kp", &bytes).unwrap();
        assert_eq!(granularity(&k, "kp", &kp, None).unwrap(), 16);
        assert_eq!(granularity(&k, "kp", &kp, Some(16)).unwrap(), 16);
        let e = granularity(&k, "kp", &kp, Some(4)).unwrap_err().to_string();
        assert!(
            e.contains("kp has 4 slots") && e.contains("16 slots of 4 bytes"),
            "{e}"
        );
        let e = granularity(&k, "kp", &kp, Some(12))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--granularity 12: not a power of two"), "{e}");
        assert!(granularity(&k, "kp", &kp, Some(0)).is_err());
        assert!(granularity(&k, "kp", &kp, Some(MAX_GRANULARITY * 2)).is_err());
    }

    #[test]
    fn short_and_ragged_files_are_named() {
        let e = decode("KP", &[0; 7]).unwrap_err().to_string();
        assert_eq!(e, "KP: 7 bytes, shorter than the 8-byte header");
        let e = decode("KP", &[0; 10]).unwrap_err().to_string();
        assert_eq!(e, "KP: 10 bytes, not a whole number of 4-byte words");
        let dir = tempfile::tempdir().unwrap();
        let e = format!(
            "{:#}",
            run(&dir.path().join("vm"), &dir.path().join("none"), None).unwrap_err()
        );
        assert!(e.contains("reading") && e.contains("none"), "{e}");
        let kp = dir.path().join("kp");
        std::fs::write(&kp, words(&[1, 1, 0])).unwrap();
        let e = format!("{:#}", run(&dir.path().join("vm"), &kp, None).unwrap_err());
        assert!(e.contains("vm") && e.contains("cannot read"), "{e}");
    }

    /// A Thumb-2 ARM executable whose `_stext` is `hot` (bit 0 set by --defsym) and `_etext`
    /// the linker's: kprof end to end through the ELF loader.
    #[test]
    fn thumb_vmlinux_end_to_end() {
        const CC: &str = "arm-linux-gnueabihf-gcc";
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("k.c");
        std::fs::write(
            &src,
            "__attribute__((noinline)) int hot(int x) { int s = 0; for (int i = 0; i < x; i++) s += i * i; return s; }\n\
             __attribute__((noinline)) int cold(int x) { return x * 3; }\n\
             int main(void) { return hot(100) + cold(2); }\n",
        )
        .unwrap();
        let exe = dir.path().join("vmlinux");
        let st = Command::new(CC)
            .args(["-O1", "-mthumb", "-no-pie", "-Wl,--defsym,_stext=hot", "-Wl,--defsym,_etext=etext"])
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .status()
            .unwrap_or_else(|e| panic!("{CC} not runnable ({e}): install gcc-arm-linux-gnueabihf (scripts/setup-host.sh)"));
        assert!(st.success());
        let k = Kernel::load(&exe).unwrap();
        let hot = k.symbols.lookup(k.base).unwrap().clone();
        assert_eq!(
            (hot.name.as_str(), hot.addr),
            ("hot", k.base),
            "_stext lost its Thumb bit"
        );
        let cold = (k.base..k.end)
            .step_by(2)
            .find_map(|a| k.symbols.lookup(a).filter(|s| s.name == "cold"))
            .unwrap();
        let cold = cold.addr;
        let slots = (k.end - k.base).div_ceil(2) as usize;
        let mut w = vec![0u32; HEADER_WORDS + slots];
        w[0] = 50;
        w[1] = 20;
        w[HEADER_WORDS + 1] = 7; // hot + 2
        w[HEADER_WORDS + ((cold - k.base) / 2) as usize] = 3;
        let kp = dir.path().join("kpdata");
        std::fs::write(&kp, words(&w)).unwrap();
        let p = run(&exe, &kp, None).unwrap();
        assert_eq!(p.granularity, 2);
        let rows: Vec<_> = p
            .symbols
            .iter()
            .map(|r| (r.name.as_str(), r.ticks))
            .collect();
        assert_eq!(rows, [("hot", 7), ("cold", 3)]);
        assert_eq!((p.text, p.outside_text), (10, 10));
        assert!(run(&exe, &kp, Some(4))
            .unwrap_err()
            .to_string()
            .contains("different kernel build"));
        // An ELF without _stext is refused by name.
        let plain = dir.path().join("plain");
        let st = Command::new(CC)
            .args(["-O1", "-no-pie"])
            .arg(&src)
            .arg("-o")
            .arg(&plain)
            .status()
            .unwrap();
        assert!(st.success());
        let e = format!("{:#}", run(&plain, &kp, None).unwrap_err());
        assert!(e.contains("plain") && e.contains("no _stext symbol"), "{e}");
    }
}
