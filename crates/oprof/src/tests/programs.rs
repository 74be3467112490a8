//! Programs of the end-to-end tests: built with a cross gcc at test time, and the facts of their
//! ELF files the tests check against, read with `object` independently of the code under test;
//! session directories of their streams.

use crate::input::session::{SessionInfo, FORMAT, IMAGES, SAMPLES, SESSION};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A cross compiler: its command, the Debian package that has it, the flags it always gets.
pub(crate) struct Cc {
    cmd: &'static str,
    package: &'static str,
    flags: &'static [&'static str],
}

/// ARMv7 hard-float, ARM state, `-O1 -g` (as the guest programs are built).
pub(crate) const ARMHF: Cc = Cc {
    cmd: "arm-linux-gnueabihf-gcc",
    package: "gcc-arm-linux-gnueabihf (scripts/setup-host.sh)",
    flags: &["-g", "-O1", "-marm"],
};

/// AArch64; the tests give the flags.
pub(crate) const ARM64: Cc = Cc {
    cmd: "aarch64-linux-gnu-gcc",
    package: "gcc-aarch64-linux-gnu",
    flags: &[],
};

impl Cc {
    /// Compiles `src` (written as `dir/file`) with `args` into `dir/out`; panics naming the
    /// package when the compiler is missing, and when it fails.
    pub(crate) fn build(
        &self,
        dir: &Path,
        file: &str,
        src: &str,
        args: &[&str],
        out: &str,
    ) -> PathBuf {
        let c = dir.join(file);
        std::fs::write(&c, src).unwrap();
        let o = dir.join(out);
        let st = Command::new(self.cmd)
            .args(self.flags)
            .args(args)
            .arg(&c)
            .arg("-o")
            .arg(&o)
            .status()
            .unwrap_or_else(|e| {
                panic!("{} not runnable ({e}): install {}", self.cmd, self.package)
            });
        assert!(st.success(), "{} failed on {file}", self.cmd);
        o
    }
}

/// A symbol of an ELF file: its address (without the Thumb bit), size and section name.
pub(crate) struct Sym {
    pub addr: u64,
    pub size: u64,
    pub section: String,
}

/// Symbol `name` of `path` (`.symtab`, then `.dynsym`); panics when it has none.
pub(crate) fn symbol(path: &Path, name: &str) -> Sym {
    let data = std::fs::read(path).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let s = f
        .symbols()
        .chain(f.dynamic_symbols())
        .find(|s| s.name() == Ok(name))
        .expect(name);
    let section = s
        .section_index()
        .and_then(|i| f.section_by_index(i).ok())
        .and_then(|sec| sec.name().ok().map(str::to_string))
        .unwrap_or_default();
    Sym {
        addr: s.address() & !1,
        size: s.size(),
        section,
    }
}

/// The file offset of `vaddr` (the inverse of the PT_LOAD mapping).
pub(crate) fn file_offset(path: &Path, vaddr: u64) -> u64 {
    let data = std::fs::read(path).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let seg = f
        .segments()
        .find(|g| vaddr >= g.address() && vaddr < g.address() + g.file_range().1)
        .expect("vaddr in a PT_LOAD");
    vaddr - seg.address() + seg.file_range().0
}

/// Whether the A32 word `w` at `a` is `bl target`.
pub(crate) fn a32_bl(a: u64, w: u32, target: u64) -> bool {
    let imm = ((w & 0x00ff_ffff) << 8) as i32 >> 6; // sign-extended imm24 * 4
    w & 0x0f00_0000 == 0x0b00_0000 && (a as i64 + 8 + imm as i64) as u64 == target
}

/// Whether the A64 word `w` at `a` is `bl target`.
pub(crate) fn a64_bl(a: u64, w: u32, target: u64) -> bool {
    let imm = ((w << 6) as i32 >> 6) as i64 * 4; // sign-extended imm26 * 4
    w & 0xFC00_0000 == 0x9400_0000 && (a as i64 + imm) as u64 == target
}

/// The address after the first `bl target` inside `func` (that call's return address), with
/// `is_bl` deciding for each 4-byte word of `.text`.
pub(crate) fn return_address_of_bl(
    path: &Path,
    func: &str,
    target: u64,
    is_bl: fn(u64, u32, u64) -> bool,
) -> u64 {
    let Sym {
        addr: start, size, ..
    } = symbol(path, func);
    let data = std::fs::read(path).unwrap();
    let f = object::File::parse(&*data).unwrap();
    let text = f.section_by_name(".text").unwrap();
    let bytes = text.data().unwrap();
    (start..start + size)
        .step_by(4)
        .find(|&a| {
            let off = (a - text.address()) as usize;
            is_bl(
                a,
                u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap()),
                target,
            )
        })
        .map(|a| a + 4)
        .expect("bl to target")
}

/// The session.json of a test session: `cpu_type`, words of `pointer_size` bytes, a samples
/// file of `bytes` bytes; the rest as `SessionInfo::default()`.
pub(crate) fn session_info(cpu_type: &str, pointer_size: usize, bytes: u64) -> SessionInfo {
    let mut info = SessionInfo {
        format: FORMAT,
        cpu_type: cpu_type.into(),
        pointer_size,
        ..Default::default()
    };
    info.totals.bytes = bytes;
    info
}

/// Writes the session directory `dir` (created) of the stream `samples` and the `images` file
/// text, with [`session_info`]'s session.json.
pub(crate) fn write_session(
    dir: &Path,
    samples: &[u8],
    images: &str,
    cpu_type: &str,
    pointer_size: usize,
) {
    std::fs::create_dir(dir).unwrap();
    std::fs::write(dir.join(SAMPLES), samples).unwrap();
    std::fs::write(dir.join(IMAGES), images).unwrap();
    let info = session_info(cpu_type, pointer_size, samples.len() as u64);
    std::fs::write(dir.join(SESSION), serde_json::to_string(&info).unwrap()).unwrap();
}
