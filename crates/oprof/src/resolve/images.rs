//! The target-side description of images: `/dev/oprofile/images` (image id → path) and the
//! kernel module snapshot (`/proc/modules`, `/sys/module/NAME/sections/*`).

use anyhow::{anyhow, bail, Context, Result};
use oprofile_common::image::{self, LineError};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// The images file: image id (the stream's cookies) → absolute path in the target.
#[derive(Debug, Default, Clone)]
pub struct ImageMap {
    paths: HashMap<u64, String>,
}

impl ImageMap {
    /// Reads an images file (`ID PATH` per line).
    pub fn read(path: &Path) -> Result<ImageMap> {
        let text = std::fs::read(path)
            .with_context(|| format!("reading images file {}", path.display()))?;
        ImageMap::parse(&text, &path.display().to_string())
    }

    /// Parses `ID PATH\n` lines, the format of `rust/common/image.rs` (shared with the module):
    /// ID decimal in 1..2^32-1, PATH with `\n` and `\` written as `\012` and `\134`. Blank
    /// lines are skipped. Errors name `name` and the 1-based line number.
    pub fn parse(text: &[u8], name: &str) -> Result<ImageMap> {
        let mut paths = HashMap::new();
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            let at = || format!("{name}:{}", i + 1);
            if line.iter().all(|b| b.is_ascii_whitespace()) {
                continue;
            }
            let mut buf = vec![0u8; line.len()];
            let (id, n) = image::parse_line(line, &mut buf).map_err(|e| {
                let id = String::from_utf8_lossy(line.split(|&b| b == b' ').next().unwrap_or_default()).into_owned();
                match e {
                    LineError::Shape => anyhow!("{}: expected `ID PATH`", at()),
                    LineError::BadId => anyhow!(
                        "{}: bad image id {id:?} (decimal 1..4294967294 expected; 0 is anonymous memory)",
                        at()
                    ),
                    LineError::BadEscape => {
                        anyhow!("{}: bad escape in the path (only \\012 and \\134 are written)", at())
                    }
                }
            })?;
            let path = String::from_utf8_lossy(&buf[..n]).into_owned();
            if let Some(old) = paths.insert(u64::from(id), path) {
                if paths.get(&u64::from(id)) != Some(&old) {
                    bail!("{}: image id {id} given twice with different paths", at());
                }
            }
        }
        Ok(ImageMap { paths })
    }

    /// The target path of image `id`.
    pub fn path(&self, id: u64) -> Option<&str> {
        self.paths.get(&id).map(String::as_str)
    }
}

/// One loaded kernel module: from `/proc/modules` and/or its `sections/` files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleInfo {
    pub name: String,
    /// `/proc/modules`: base address and size of the module's core memory, when known and not
    /// hidden (kptr_restrict shows 0).
    pub core: Option<(u64, u64)>,
    /// Section name → runtime address (from `/sys/module/NAME/sections/`).
    pub sections: BTreeMap<String, u64>,
}

/// The kernel module snapshot, by module name.
#[derive(Debug, Clone, Default)]
pub struct ModuleSnapshot {
    pub modules: BTreeMap<String, ModuleInfo>,
}

fn parse_hex(s: &str) -> Option<u64> {
    let h = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u64::from_str_radix(h, 16).ok()
}

impl ModuleSnapshot {
    /// Reads either file (both optional).
    pub fn read(proc_modules: Option<&Path>, sections: Option<&Path>) -> Result<ModuleSnapshot> {
        let mut m = ModuleSnapshot::default();
        if let Some(p) = proc_modules {
            let t = std::fs::read_to_string(p)
                .with_context(|| format!("reading proc_modules file {}", p.display()))?;
            m.add_proc_modules(&t, &p.display().to_string())?;
        }
        if let Some(p) = sections {
            let t = std::fs::read_to_string(p)
                .with_context(|| format!("reading module_sections file {}", p.display()))?;
            m.add_sections(&t, &p.display().to_string())?;
        }
        Ok(m)
    }

    fn entry(&mut self, name: &str) -> &mut ModuleInfo {
        self.modules
            .entry(name.to_string())
            .or_insert_with(|| ModuleInfo {
                name: name.to_string(),
                ..Default::default()
            })
    }

    /// Adds `/proc/modules` lines: `name size refcount deps state 0xaddr [taints]`.
    pub fn add_proc_modules(&mut self, text: &str, file: &str) -> Result<()> {
        for (i, line) in text.lines().enumerate() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.is_empty() {
                continue;
            }
            let at = || format!("{file}:{}", i + 1);
            if f.len() < 6 {
                bail!(
                    "{}: expected `name size refcount deps state 0xaddr`, got {line:?}",
                    at()
                );
            }
            let size: u64 = f[1]
                .parse()
                .map_err(|_| anyhow!("{}: bad module size {:?}", at(), f[1]))?;
            let addr = parse_hex(f[5])
                .ok_or_else(|| anyhow!("{}: bad module address {:?}", at(), f[5]))?;
            let core = (addr != 0 && size != 0).then_some((addr, size));
            self.entry(f[0]).core = core;
        }
        Ok(())
    }

    /// Adds `NAME SECTION 0xADDR` lines (from `/sys/module/NAME/sections/SECTION`).
    pub fn add_sections(&mut self, text: &str, file: &str) -> Result<()> {
        for (i, line) in text.lines().enumerate() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.is_empty() {
                continue;
            }
            let at = || format!("{file}:{}", i + 1);
            if f.len() != 3 {
                bail!("{}: expected `NAME SECTION 0xADDR`, got {line:?}", at());
            }
            let addr = parse_hex(f[2])
                .ok_or_else(|| anyhow!("{}: bad section address {:?}", at(), f[2]))?;
            if addr != 0 {
                self.entry(f[0]).sections.insert(f[1].to_string(), addr);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_file_unescapes_and_rejects() {
        let m = ImageMap::parse(
            b"1 /bin/busybox\n2 /tmp/a\\012b\\134c d\n\n3 /lib/libc.so.6 (deleted)\n",
            "imgs",
        )
        .unwrap();
        assert_eq!(m.path(1), Some("/bin/busybox"));
        assert_eq!(m.path(2), Some("/tmp/a\nb\\c d"));
        assert_eq!(m.path(3), Some("/lib/libc.so.6 (deleted)"));
        assert_eq!(m.path(4), None);
        for (text, want) in [
            (&b"1 /a\nx /b\n"[..], "imgs:2: bad image id \"x\""),
            (b"1 /a\n\n0 /b\n", "imgs:3: bad image id \"0\""),
            (b"/a\n", "imgs:1: expected `ID PATH`"),
            (b"1 /a\\01\n", "imgs:1"),
            (b"1 /a\\9\n", "imgs:1: bad escape"),
            (b"1 /a\\400\n", "imgs:1: bad escape"),
            (b"1 \n", "imgs:1: expected `ID PATH`"),
            (b"-1 /a\n", "bad image id"),
            (b"1 /a\n1 /b\n", "imgs:2: image id 1 given twice"),
        ] {
            let e = format!("{:#}", ImageMap::parse(text, "imgs").unwrap_err());
            assert!(e.contains(want), "{e} does not contain {want}");
        }
        // The same id twice with the same path is harmless.
        assert!(ImageMap::parse(b"1 /a\n1 /a\n", "imgs").is_ok());
    }

    #[test]
    fn module_snapshot() {
        let mut m = ModuleSnapshot::default();
        m.add_proc_modules(
            "oprofile 65536 0 - Live 0xbf000000 (O)\nhidden 4096 0 - Live 0x00000000\n",
            "pm",
        )
        .unwrap();
        m.add_sections(
            "oprofile .text 0xbf000000\noprofile .init.text 0xbf080000\nother .text 0xbf100000\n",
            "ms",
        )
        .unwrap();
        let o = &m.modules["oprofile"];
        assert_eq!(o.core, Some((0xbf00_0000, 65536)));
        assert_eq!(o.sections[".init.text"], 0xbf08_0000);
        assert_eq!(m.modules["hidden"].core, None);
        assert_eq!(m.modules["other"].sections[".text"], 0xbf10_0000);
        let e = format!(
            "{:#}",
            m.add_proc_modules("x 12 0 - Live\n", "pm").unwrap_err()
        );
        assert!(e.starts_with("pm:1: expected"), "{e}");
        let e = format!(
            "{:#}",
            m.add_proc_modules("a 1 0 - Live 0xbf\nx y 0 - Live 0xbf\n", "pm")
                .unwrap_err()
        );
        assert!(e.starts_with("pm:2: bad module size"), "{e}");
        let e = format!(
            "{:#}",
            m.add_sections("a .text 0xbf\na .data zz\n", "ms")
                .unwrap_err()
        );
        assert!(e.starts_with("ms:2: bad section address"), "{e}");
    }
}
