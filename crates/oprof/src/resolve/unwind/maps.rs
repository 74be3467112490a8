//! An [`Images`] from a process's mappings (the lines of `/proc/PID/maps`): each file mapping's
//! runtime addresses go to its image's ELF addresses through the file offset and the image's
//! `PT_LOAD` headers (as [`crate::resolve::elf::offset_to_vaddr`]).

use super::{ImageTables, Images, Place};
use crate::resolve::elf::offset_to_vaddr;

/// One mapping: runtime addresses `start..end` map file offset `offset` of image `image` onward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub executable: bool,
    /// File offset (bytes) at `start`.
    pub offset: u64,
    /// Index into [`ProcessImages::images`].
    pub image: usize,
}

/// A process's file mappings and the tables of their images.
#[derive(Debug, Default)]
pub struct ProcessImages {
    /// Sorted by `start`, disjoint.
    pub mappings: Vec<Mapping>,
    pub images: Vec<ImageTables>,
}

/// A parsed `/proc/PID/maps` line: range, permissions (`rwxp`-style, e.g. `r-xp`), file offset
/// and path (`None` for anonymous memory and `[stack]`-style names).
pub fn parse_line(line: &str) -> Option<(u64, u64, &str, u64, Option<&str>)> {
    let mut f = line.split_whitespace();
    let (start, end) = f.next()?.split_once('-')?;
    let perms = f.next()?;
    let offset = u64::from_str_radix(f.next()?, 16).ok()?;
    let _dev = f.next()?;
    let _inode = f.next()?;
    let path = f.next().filter(|p| p.starts_with('/'));
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    Some((start, end, perms, offset, path))
}

impl ProcessImages {
    /// The mappings of `maps` (the text of `/proc/PID/maps`); `load` gives the tables of a path
    /// (`None`: no host file; its mappings are left out). Each path is loaded once.
    pub fn from_maps(
        maps: &str,
        mut load: impl FnMut(&str) -> Option<ImageTables>,
    ) -> ProcessImages {
        let mut out = ProcessImages::default();
        let mut paths: Vec<(String, Option<usize>)> = Vec::new();
        for (start, end, perms, offset, path) in maps.lines().filter_map(parse_line) {
            let executable = perms.contains('x');
            let Some(path) = path else { continue };
            let image = match paths.iter().find(|p| p.0 == path) {
                Some(p) => p.1,
                None => {
                    let i = load(path).map(|t| {
                        out.images.push(t);
                        out.images.len() - 1
                    });
                    paths.push((path.to_string(), i));
                    i
                }
            };
            if let Some(image) = image {
                out.mappings.push(Mapping {
                    start,
                    end,
                    executable,
                    offset,
                    image,
                });
            }
        }
        out.mappings.sort_by_key(|m| m.start);
        out
    }
}

impl Images for ProcessImages {
    fn find(&self, addr: u64) -> Option<Place<'_>> {
        let i = self
            .mappings
            .partition_point(|m| m.start <= addr)
            .checked_sub(1)?;
        let m = self.mappings[i];
        if addr >= m.end {
            return None;
        }
        let tables = self.images.get(m.image)?;
        let off = m.offset.checked_add(addr - m.start)?;
        let elf_addr = offset_to_vaddr(&tables.loads, off)?;
        Some(Place {
            tables,
            elf_addr,
            executable: m.executable,
            id: None,
        })
    }
}
