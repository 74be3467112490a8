//! Function symbols of an image, for attributing addresses, and symbol name demangling.

use std::ops::Range;

/// How a symbol is bound (ELF `STB_*`; kallsyms `T`/`t`/`W`): picks one name among aliases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Binding {
    Global,
    Local,
    Weak,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Address in the table's address space (ELF virtual address, or runtime address for a
    /// placed kernel module); bit 0 (Thumb) cleared on ARM.
    pub addr: u64,
    /// 0 when the ELF gives no size (assembler routines): the symbol then extends to the next
    /// symbol or the end of its text range.
    pub size: u64,
    /// The raw (mangled) name.
    pub name: String,
    pub binding: Binding,
}

impl Symbol {
    /// Sort key among symbols at one address, best first, as `perf` chooses among aliases
    /// (`choose_best_symbol`): non-weak, fewer leading underscores, global, larger size, name.
    /// The same rule for ELF and kallsyms symbols keeps both sources' names alike.
    fn alias_key(&self) -> (bool, usize, bool, std::cmp::Reverse<u64>, &str) {
        let underscores = self.name.len() - self.name.trim_start_matches('_').len();
        (
            self.binding == Binding::Weak,
            underscores,
            self.binding != Binding::Global,
            std::cmp::Reverse(self.size),
            &self.name,
        )
    }
}

/// Text symbols sorted by address, and the text ranges they live in.
#[derive(Debug, Clone, Default)]
pub struct SymbolTable {
    syms: Vec<Symbol>,
    /// Executable ranges, sorted and disjoint: addresses outside them belong to no symbol.
    text: Vec<Range<u64>>,
    /// Symbol starts known to be reached without a call: the code before them does not end in
    /// a call instruction (or, for kallsyms, a linker text-section marker is there). Sorted.
    /// See [`SymbolTable::frame_address`].
    entered_without_call: Vec<u64>,
}

impl SymbolTable {
    /// A table of `syms` inside the executable ranges `text`; of several symbols at one address
    /// the one [`Symbol::alias_key`] prefers names it.
    pub fn new(mut syms: Vec<Symbol>, mut text: Vec<Range<u64>>) -> SymbolTable {
        syms.sort_by(|a, b| {
            a.addr
                .cmp(&b.addr)
                .then_with(|| a.alias_key().cmp(&b.alias_key()))
        });
        syms.dedup_by_key(|s| s.addr);
        text.retain(|r| r.start < r.end);
        text.sort_by_key(|r| r.start);
        // Merge overlapping/adjacent ranges so that lookups can binary-search.
        let mut merged: Vec<Range<u64>> = Vec::with_capacity(text.len());
        for r in text {
            match merged.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => merged.push(r),
            }
        }
        SymbolTable {
            syms,
            text: merged,
            entered_without_call: Vec::new(),
        }
    }

    /// Records the symbol starts in `addrs` that code reaches without a call (see
    /// [`SymbolTable::frame_address`]); addresses that start no symbol are ignored.
    pub fn set_entered_without_call(&mut self, addrs: impl IntoIterator<Item = u64>) {
        let mut v: Vec<u64> = addrs
            .into_iter()
            .filter(|&a| self.syms.binary_search_by_key(&a, |s| s.addr).is_ok())
            .collect();
        v.sort_unstable();
        v.dedup();
        self.entered_without_call = v;
    }

    /// Whether `addr` is a symbol start known to be reached without a call.
    pub fn entered_without_call(&self, addr: u64) -> bool {
        self.entered_without_call.binary_search(&addr).is_ok()
    }

    /// The address at which to look up a call-chain frame whose return address is `ret`.
    ///
    /// A return address is the instruction after the call that stored it, so the caller is
    /// found at `ret - 1` (as perf and gdb do): that keeps a call that is its function's last
    /// instruction (a `noreturn` callee such as `do_exit` or `__stack_chk_fail`) in its caller,
    /// although `ret` is then the next function's first byte. Code may also store a return
    /// address without a call: ARM's syscall entry `vector_swi` does `badr lr,
    /// ret_fast_syscall` and jumps through the syscall table, so a handler returns to the
    /// first instruction of `ret_fast_syscall`, which follows unrelated code (`cpu_v7_reset`'s
    /// `bx r0`). When `ret` is a symbol start known to be entered without a call (the
    /// instruction before it is not a call, from the image's code; see
    /// [`SymbolTable::set_entered_without_call`]), the frame is that symbol: `ret` itself.
    pub fn frame_address(&self, ret: u64) -> u64 {
        if self.entered_without_call(ret) {
            ret
        } else {
            ret.saturating_sub(1)
        }
    }

    /// The executable range containing `addr`.
    pub fn text_range(&self, addr: u64) -> Option<&Range<u64>> {
        let i = self
            .text
            .partition_point(|r| r.start <= addr)
            .checked_sub(1)?;
        self.text.get(i).filter(|r| addr < r.end)
    }

    /// The symbol containing `addr`, if any.
    pub fn lookup(&self, addr: u64) -> Option<&Symbol> {
        let range = self.text_range(addr)?;
        let i = self
            .syms
            .partition_point(|s| s.addr <= addr)
            .checked_sub(1)?;
        let s = self.syms.get(i)?;
        if s.addr < range.start {
            return None;
        }
        if s.size != 0 && addr - s.addr >= s.size {
            return None;
        }
        Some(s)
    }

    /// The symbol containing `addr` and the addresses it covers: its size, or for a size-less
    /// symbol up to the next symbol or the end of its text range.
    pub fn extent(&self, addr: u64) -> Option<(&Symbol, Range<u64>)> {
        let s = self.lookup(addr)?;
        let range = self.text_range(addr)?;
        let end = if s.size != 0 {
            s.addr.saturating_add(s.size).min(range.end)
        } else {
            let i = self.syms.partition_point(|x| x.addr <= s.addr);
            self.syms
                .get(i)
                .map_or(range.end, |next| next.addr.min(range.end))
        };
        Some((s, s.addr..end))
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }
}

/// Demangles a Rust (legacy `_ZN…E` or v0 `_R…`, shown without the hash) or C++ (Itanium) name;
/// anything else (C names) is returned as is.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        // `{:#}` leaves out the trailing hash (legacy) and crate disambiguators (v0).
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Some(d) = cpp_demangle::Symbol::new(name)
            .ok()
            .and_then(|s| s.demangle().ok())
        {
            return d;
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_respects_sizes_gaps_and_ranges() {
        let t = SymbolTable::new(
            vec![
                Symbol {
                    addr: 0x1000,
                    size: 0x10,
                    name: "a".into(),
                    binding: Binding::Global,
                },
                Symbol {
                    addr: 0x1020,
                    size: 0,
                    name: "asm".into(),
                    binding: Binding::Global,
                },
                Symbol {
                    addr: 0x1040,
                    size: 0x8,
                    name: "b".into(),
                    binding: Binding::Global,
                },
                Symbol {
                    addr: 0x8000,
                    size: 0,
                    name: "init_asm".into(),
                    binding: Binding::Global,
                },
            ],
            vec![0x1000..0x1048, 0x8000..0x8010],
        );
        assert_eq!(t.lookup(0x1000).unwrap().name, "a");
        assert_eq!(t.lookup(0x100f).unwrap().name, "a");
        assert!(t.lookup(0x1010).is_none());
        assert_eq!(t.lookup(0x103c).unwrap().name, "asm");
        assert_eq!(t.lookup(0x1044).unwrap().name, "b");
        assert!(t.lookup(0x1048).is_none());
        assert!(t.lookup(0xfff).is_none());
        // A size-0 symbol does not extend past its text range.
        assert!(t.lookup(0x4000).is_none());
        assert_eq!(t.lookup(0x800f).unwrap().name, "init_asm");
        assert!(t.lookup(0x8010).is_none());
        assert!(t.text_range(0x1047).is_some() && t.text_range(0x1048).is_none());
    }

    #[test]
    fn aliases_are_named_alike_from_elf_and_kallsyms() {
        let sym = |addr, size, name: &str, binding| Symbol {
            addr,
            size,
            name: name.into(),
            binding,
        };
        let t = SymbolTable::new(
            vec![
                sym(0x100, 100, "arm_clear_user", Binding::Weak),
                sym(0x100, 100, "__clear_user_std", Binding::Global),
                sym(0x200, 0, "__ret_fast_syscall", Binding::Local),
                sym(0x200, 132, "ret_fast_syscall", Binding::Local),
                sym(0x300, 0, "local_fn", Binding::Local),
                sym(0x300, 0, "global_fn", Binding::Global),
            ],
            std::iter::once(0x100..0x400).collect(),
        );
        assert_eq!(
            t.lookup(0x104).unwrap().name,
            "__clear_user_std",
            "non-weak first"
        );
        assert_eq!(
            t.lookup(0x204).unwrap().name,
            "ret_fast_syscall",
            "fewer underscores"
        );
        assert_eq!(
            t.lookup(0x304).unwrap().name,
            "global_fn",
            "global before local"
        );
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn demangles_rust_and_cpp() {
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate4main"), "mycrate::main");
        assert_eq!(
            demangle("_RNvNtCsbmNqQUJIY6D_8oprofile6buffer4sync"),
            "oprofile::buffer::sync"
        );
        assert_eq!(demangle("_ZN5space3fooEibc"), "space::foo(int, bool, char)");
        assert_eq!(
            demangle("_ZNSt6vectorIiSaIiEE9push_backERKi"),
            "std::vector<int, std::allocator<int> >::push_back(int const&)"
        );
        assert_eq!(demangle("memcpy"), "memcpy");
        assert_eq!(demangle("__arm_copy_to_user"), "__arm_copy_to_user");
        assert_eq!(demangle("_Zbogus"), "_Zbogus");
    }
}
