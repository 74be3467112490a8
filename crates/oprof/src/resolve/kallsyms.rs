//! `/proc/kallsyms` of the target (a session's `kallsyms` file): kernel and module function
//! symbols without a vmlinux or `.ko`, as `perf report` does.
//!
//! Lines are `ADDR TYPE NAME` for the kernel and `ADDR TYPE NAME\t[MODULE]` for modules
//! (`kernel/kallsyms.c` `s_show`). Text symbols are the types `t T w W` (local, global and weak
//! text); others (data, absolute, ...) are skipped. kallsyms gives no sizes: a symbol extends to
//! the next one or the end of its text range (as assembler symbols do in `oprof report`). The
//! kernel's text range is `[_stext, _etext)`, a module's its core range from `/proc/modules`.
//! With `kptr_restrict` hiding them, every address reads 0: such a file gives no symbols (and
//! `oprof record` notes it).

use crate::resolve::images::ModuleSnapshot;
use crate::resolve::symbols::{Binding, Symbol, SymbolTable};
use anyhow::{bail, Result};
use std::collections::BTreeMap;
use std::ops::Range;

/// The parsed file.
#[derive(Debug, Default)]
pub struct Kallsyms {
    /// Kernel text symbols (no module's).
    pub kernel: Vec<Symbol>,
    /// `[_stext, _etext)`, when both are listed.
    pub text: Option<Range<u64>>,
    /// Text symbols of each module, by module name.
    pub modules: BTreeMap<String, Vec<Symbol>>,
    /// Whether every address was 0 (hidden by `kptr_restrict`).
    pub hidden: bool,
}

/// A text symbol's code address: bit 0 (the Thumb bit) cleared on a 32-bit kernel (ARM), kept
/// above 4 GiB: a 64-bit kernel's text (arm64: 0xffff8000_xxxxxxxx) has no Thumb bit, and its
/// A64 code is 4-byte aligned anyway.
fn text_address(addr: u64) -> u64 {
    if addr > u64::from(u32::MAX) {
        addr
    } else {
        addr & !1
    }
}

impl Kallsyms {
    /// Parses `text`, read from `name` (named with the 1-based line in errors: a line that is
    /// not `ADDR TYPE NAME [\t[MODULE]]` with a hexadecimal ADDR).
    pub fn parse(text: &str, name: &str) -> Result<Kallsyms> {
        let mut k = Kallsyms {
            hidden: true,
            ..Kallsyms::default()
        };
        let (mut stext, mut etext) = (None, None);
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let (sym, module) = match line.split_once('\t') {
                Some((s, m)) => {
                    let m = m.trim();
                    let Some(m) = m.strip_prefix('[').and_then(|m| m.strip_suffix(']')) else {
                        bail!(
                            "{name}:{}: expected `[MODULE]` after the tab, got {m:?}",
                            i + 1
                        );
                    };
                    (s, Some(m))
                }
                None => (line, None),
            };
            let f: Vec<&str> = sym.split_whitespace().collect();
            let [addr, ty, sname] = f[..] else {
                bail!("{name}:{}: expected `ADDR TYPE NAME`, got {line:?}", i + 1);
            };
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                bail!("{name}:{}: bad address {addr:?}", i + 1);
            };
            if addr != 0 {
                k.hidden = false;
            }
            if module.is_none() {
                match sname {
                    "_stext" => stext = Some(addr),
                    "_etext" => etext = Some(addr),
                    _ => {}
                }
            }
            if !matches!(ty, "t" | "T" | "w" | "W") || sname.starts_with('$') {
                continue;
            }
            let binding = match ty {
                "T" => Binding::Global,
                "t" => Binding::Local,
                _ => Binding::Weak,
            };
            let s = Symbol {
                addr: text_address(addr),
                size: 0,
                name: sname.to_string(),
                binding,
            };
            match module {
                Some(m) => k.modules.entry(m.to_string()).or_default().push(s),
                None => k.kernel.push(s),
            }
        }
        if let (Some(a), Some(b)) = (stext, etext) {
            k.text = (a < b).then_some(a..b);
        }
        if k.hidden {
            k.kernel.clear();
            k.modules.clear();
            k.text = None;
        }
        Ok(k)
    }

    /// The kernel's symbol table: text `[_stext, _etext)`; `None` without symbols or text range.
    pub fn kernel_table(&self) -> Option<SymbolTable> {
        let text = self.text.clone()?;
        if self.kernel.is_empty() {
            return None;
        }
        let mut t = SymbolTable::new(self.kernel.clone(), vec![text]);
        // No code to decode: linker text-section markers stand in (crate::resolve::calls).
        t.set_entered_without_call(
            self.kernel
                .iter()
                .filter(|s| crate::resolve::calls::is_text_section_marker(&s.name))
                .map(|s| s.addr),
        );
        Some(t)
    }

    /// Symbol tables of the modules whose core range `snapshot` knows.
    pub fn module_tables(&self, snapshot: &ModuleSnapshot) -> BTreeMap<String, SymbolTable> {
        self.modules
            .iter()
            .filter_map(|(m, syms)| {
                let (base, size) = snapshot.modules.get(m)?.core?;
                let end = base.checked_add(size)?;
                Some((
                    m.clone(),
                    SymbolTable::new(syms.clone(), std::iter::once(base..end).collect()),
                ))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "c0008000 T _stext\n\
                        c0008000 T stext\n\
                        c0100000 t read_zero\n\
                        c0100100 T arm_clear_user\n\
                        c0100200 W weak_fn\n\
                        c0200000 T _etext\n\
                        c0300000 D some_data\n\
                        c0008000 t $a\n\
                        bf000000 t sample_handler\t[oprofile]\n\
                        bf000400 T oprofile_init\t[oprofile]\n\
                        bf001000 d data_in_mod\t[oprofile]\n";

    #[test]
    fn parses_kernel_and_modules() {
        let k = Kallsyms::parse(TEXT, "ks").unwrap();
        assert!(!k.hidden);
        assert_eq!(k.text, Some(0xc000_8000..0xc020_0000));
        let t = k.kernel_table().unwrap();
        assert_eq!(t.lookup(0xc010_0004).unwrap().name, "read_zero");
        assert_eq!(t.lookup(0xc010_01fc).unwrap().name, "arm_clear_user");
        assert_eq!(t.lookup(0xc010_0300).unwrap().name, "weak_fn");
        assert!(t.lookup(0xc020_0000).is_none(), "past _etext");
        assert!(k
            .kernel
            .iter()
            .all(|s| s.name != "some_data" && s.name != "$a"));
        let mut snap = ModuleSnapshot::default();
        snap.add_proc_modules("oprofile 8192 0 - Live 0xbf000000 (O)\n", "pm")
            .unwrap();
        let m = k.module_tables(&snap);
        assert_eq!(
            m["oprofile"].lookup(0xbf00_0010).unwrap().name,
            "sample_handler"
        );
        assert_eq!(
            m["oprofile"].lookup(0xbf00_1ffc).unwrap().name,
            "oprofile_init"
        );
        assert!(m["oprofile"].lookup(0xbf00_2000).is_none());
        assert_eq!(k.modules["oprofile"].len(), 2);
    }

    /// An arm64 kernel's kallsyms (16 hex digits, text at 0xffff8000_8xxxxxxx, modules below).
    #[test]
    fn arm64_addresses_are_kept_whole() {
        let text = "ffff800080010000 T _stext\n\
                    ffff800080010000 t $x\n\
                    ffff800080010040 T el0t_64_irq\n\
                    ffff800080fa0000 T do_idle\n\
                    ffff800080fa0101 t odd_label\n\
                    ffff800081000000 T _etext\n\
                    ffff80007a000000 t sample_handler\t[oprofile]\n";
        let k = Kallsyms::parse(text, "ks").unwrap();
        assert_eq!(k.text, Some(0xffff_8000_8001_0000..0xffff_8000_8100_0000));
        let t = k.kernel_table().unwrap();
        assert_eq!(t.lookup(0xffff_8000_8001_0044).unwrap().name, "el0t_64_irq");
        assert_eq!(
            t.lookup(0xffff_8000_80fa_0100).unwrap().name,
            "do_idle",
            "no Thumb bit on arm64"
        );
        assert_eq!(t.lookup(0xffff_8000_80fa_0101).unwrap().name, "odd_label");
        assert!(k.kernel.iter().all(|s| s.name != "$x"));
        let mut snap = ModuleSnapshot::default();
        snap.add_proc_modules("oprofile 8192 0 - Live 0xffff80007a000000 (O)\n", "pm")
            .unwrap();
        assert_eq!(
            k.module_tables(&snap)["oprofile"]
                .lookup(0xffff_8000_7a00_0010)
                .unwrap()
                .name,
            "sample_handler"
        );
    }

    #[test]
    fn hidden_and_bad_files() {
        let k = Kallsyms::parse(
            "00000000 T _stext\n00000000 t read_zero\n00000000 T _etext\n",
            "ks",
        )
        .unwrap();
        assert!(k.hidden && k.kernel_table().is_none());
        let e = |t: &str| format!("{:#}", Kallsyms::parse(t, "ks").unwrap_err());
        assert_eq!(e("c0008000 T _stext\nzz T x\n"), "ks:2: bad address \"zz\"");
        assert_eq!(
            e("c0008000 T\n"),
            "ks:1: expected `ADDR TYPE NAME`, got \"c0008000 T\""
        );
        assert!(e("bf000000 t f\toprofile\n").starts_with("ks:1: expected `[MODULE]`"));
    }
}
