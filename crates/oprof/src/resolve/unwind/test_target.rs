//! What the real-stack tests share: a cross toolchain and `qemu-user` binary per target, the
//! capture program ([`capture.c`](capture.c) after the target's register block) built and run
//! with them, the host copies of the target's files, and naming a chain's frames.

use super::maps::ProcessImages;
use super::{ImageTables, Images};
use crate::resolve::elf::ElfImage;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A target of the real-stack tests.
pub(super) struct Target {
    /// The cross compiler, e.g. `arm-linux-gnueabihf-gcc`.
    pub gcc: &'static str,
    /// The user-mode emulator, e.g. `qemu-arm`.
    pub qemu: &'static str,
    /// The cross toolchain's root: `qemu -L` and the host copies of the target's libraries.
    pub sysroot: &'static str,
    /// The Debian package that provides `gcc`, for the failure message.
    pub package: &'static str,
}

/// ARMv7 hard-float (Debian armhf).
pub(super) const ARMHF: Target = Target {
    gcc: "arm-linux-gnueabihf-gcc",
    qemu: "qemu-arm",
    sysroot: "/usr/arm-linux-gnueabihf",
    package: "gcc-arm-linux-gnueabihf",
};

/// AArch64 (Debian arm64).
pub(super) const ARM64: Target = Target {
    gcc: "aarch64-linux-gnu-gcc",
    qemu: "qemu-aarch64",
    sysroot: "/usr/aarch64-linux-gnu",
    package: "gcc-aarch64-linux-gnu",
};

/// What the capture program wrote: its register words (hex lines), stack bytes from SP up, and
/// `/proc/self/maps`.
pub(super) struct Capture {
    pub words: Vec<u64>,
    pub stack: Vec<u8>,
    pub maps: String,
}

impl Target {
    /// Builds C source `src` with `flags` in `dir` as `name`.
    pub fn build(&self, dir: &Path, name: &str, src: &str, flags: &[&str]) -> PathBuf {
        let file = dir.join(format!("{name}.c"));
        std::fs::write(&file, src).unwrap();
        let exe = dir.join(name);
        let st = Command::new(self.gcc)
            .args(flags)
            .arg("-o")
            .arg(&exe)
            .arg(&file)
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "{} ({}, scripts/setup-host.sh): {e}",
                    self.gcc, self.package
                )
            });
        assert!(st.success(), "{} {flags:?}", self.gcc);
        exe
    }

    /// Runs capture program `exe` taking path `mode` to `leaf` under the emulator with
    /// `qemu_args` (e.g. `-cpu max`).
    pub fn capture(&self, exe: &Path, mode: &str, qemu_args: &[&str]) -> Capture {
        let out = exe.with_extension(format!("out-{mode}-{}", qemu_args.join("")));
        std::fs::create_dir_all(&out).unwrap();
        let st = Command::new(self.qemu)
            .args(qemu_args)
            .args(["-L", self.sysroot])
            .arg(exe)
            .arg(mode)
            .arg(&out)
            .status()
            .unwrap_or_else(|e| panic!("{} (package qemu-user): {e}", self.qemu));
        assert!(st.success(), "{} {mode}: {st}", exe.display());
        let words = std::fs::read_to_string(out.join("regs"))
            .unwrap()
            .lines()
            .map(|l| u64::from_str_radix(l, 16).unwrap())
            .collect();
        Capture {
            words,
            stack: std::fs::read(out.join("stack")).unwrap(),
            maps: std::fs::read_to_string(out.join("maps")).unwrap(),
        }
    }

    /// The host file of a target path: itself, else the sysroot's `lib/` copy.
    pub fn host_file(&self, path: &str) -> PathBuf {
        let p = PathBuf::from(path);
        if p.exists() {
            return p;
        }
        Path::new(self.sysroot)
            .join("lib")
            .join(p.file_name().unwrap())
    }

    /// The images of a capture's maps, loaded from their host files.
    pub fn images(&self, maps: &str) -> ProcessImages {
        ProcessImages::from_maps(maps, |p| {
            Some(ImageTables::load(&self.host_file(p)).unwrap())
        })
    }
}

/// Each frame address of a chain named `SYMBOL` (the program `exe`'s symbols) or
/// `lib:BASENAME` (other images); return addresses (all but the first) are looked up one byte
/// back, inside their call.
pub(super) fn frame_names(
    addrs: impl Iterator<Item = u64>,
    procs: &ProcessImages,
    exe: &Path,
) -> Vec<String> {
    let elf = ElfImage::load(exe, false).unwrap();
    let name = |(i, a): (usize, u64)| {
        let Some(place) = procs.find(a) else {
            return format!("?{a:#x}");
        };
        if place.tables.path != exe {
            return format!(
                "lib:{}",
                place.tables.path.file_name().unwrap().to_string_lossy()
            );
        }
        let at = if i == 0 {
            place.elf_addr
        } else {
            place.elf_addr - 1
        };
        elf.symbols
            .lookup(at)
            .map_or_else(|| format!("?{at:#x}"), |s| s.name.clone())
    };
    addrs.enumerate().map(name).collect()
}
