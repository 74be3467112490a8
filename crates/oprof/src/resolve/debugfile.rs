//! Separate debug files of stripped images, found as gdb and perf find them.
//!
//! A distribution strips its binaries and ships what it removed (`.symtab`, DWARF) in a debug
//! file made with `objcopy --only-keep-debug`: the same section addresses, code sections
//! `NOBITS`. [`Search::find`] looks for the debug file of an image in gdb's order:
//!
//! 1. build-id (`.note.gnu.build-id`): `DEBUGDIR/.build-id/xx/yyyy.debug` (the first byte of
//!    the id as two hex digits, the rest in hex), for each DEBUGDIR;
//! 2. `.gnu_debuglink` (a file name and the CRC32 of the debug file): `DIR/NAME` beside the
//!    image on the host, `DIR/.debug/NAME`, then `DEBUGDIR/TDIR/NAME` for each DEBUGDIR
//!    (`TDIR`: the image's directory on the target, else on the host);
//! 3. debuginfod: `URL/buildid/HEX/debuginfo` from the servers of `DEBUGINFOD_URLS`, cached
//!    in elfutils' layout ([`crate::resolve::debuginfod`]; off with `--no-debuginfod`);
//! 4. MiniDebugInfo (Fedora): an xz-compressed ELF with a `.symtab` of function symbols in the
//!    image's `.gnu_debugdata` section.
//!
//! A candidate is refused, with a note naming both files, when it is no ELF file of the image's
//! machine, when its build-id differs from the image's, or (debuglink) when its CRC32 differs
//! from the one the image's `.gnu_debuglink` records. A profiler never invents: a debug file that
//! cannot be proved to belong to the image names nothing.

use crate::input::session::Ids;
use object::{Object, ObjectSection};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Largest decompressed `.gnu_debugdata` accepted, bytes (Fedora's libc: about 1 MiB).
const MAX_MINIDEBUGINFO: usize = 256 << 20;

/// Where the names (symbols and line tables) of an image came from.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// The image's own `.symtab` (not stripped).
    Image,
    /// The image's exported symbols only (`.dynsym` of a stripped shared object).
    Dynsym,
    /// A debug file found by build-id.
    BuildId,
    /// A debug file found through `.gnu_debuglink`.
    Debuglink,
    /// A debug file from a debuginfod server (or its cache), by build-id.
    Debuginfod,
    /// The image's `.gnu_debugdata` (MiniDebugInfo).
    #[serde(rename = "minidebuginfo")]
    MiniDebugInfo,
    /// The target's `/proc/kallsyms` (no ELF file).
    Kallsyms,
}

impl Method {
    /// The name used in JSON and text output (`build-id`, `debuglink`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Method::Image => "image",
            Method::Dynsym => "dynsym",
            Method::BuildId => "build-id",
            Method::Debuglink => "debuglink",
            Method::Debuginfod => "debuginfod",
            Method::MiniDebugInfo => "minidebuginfo",
            Method::Kallsyms => "kallsyms",
        }
    }
}

/// A debug file accepted for an image.
#[derive(Debug)]
pub struct Found {
    /// The debug file (for MiniDebugInfo: the image, whose section holds it).
    pub path: PathBuf,
    pub method: Method,
    /// Its bytes (decompressed for MiniDebugInfo); an ELF file of the image's machine.
    pub data: Vec<u8>,
}

/// What a lookup found, and the notes about candidates it refused.
#[derive(Debug, Default)]
pub struct Lookup {
    pub found: Option<Found>,
    pub notes: Vec<String>,
}

// `Ids` is a session record (`session.json`'s `debug_ids`): [`crate::input::session::Ids`].
impl Ids {
    /// The ids of a parsed ELF file (unreadable notes or sections count as absent).
    pub fn of(file: &object::File<'_>) -> Ids {
        let build_id = file
            .build_id()
            .ok()
            .flatten()
            .filter(|b| !b.is_empty())
            .map(hex);
        let link = file.gnu_debuglink().ok().flatten();
        Ids {
            build_id,
            debuglink: link.map(|(n, _)| String::from_utf8_lossy(n).into_owned()),
            debuglink_crc: link.map(|(_, crc)| crc),
        }
    }

    /// The ids of the ELF file at `path`; `None` when it cannot be read or parsed.
    pub fn read(path: &Path) -> Option<Ids> {
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        Some(Ids::of(&file))
    }

    /// Whether there is anything to find a debug file by.
    pub fn is_empty(&self) -> bool {
        self.build_id.is_none() && self.debuglink.is_none()
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `DIR/.build-id/xx/yyyy.debug` for build-id `id` (lowercase hex); `None` for ids shorter than
/// two bytes or not hex.
pub fn build_id_path(dir: &Path, id: &str) -> Option<PathBuf> {
    if id.len() < 4 || !id.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let (head, rest) = id.split_at(2);
    Some(
        dir.join(".build-id")
            .join(head)
            .join(format!("{rest}.debug")),
    )
}

/// The debuglink candidates of `name` for an image at `host` (target path `target`), in
/// gdb's order: beside the image, its `.debug/`, then each `DEBUGDIR/TDIR/`.
pub fn debuglink_paths(
    name: &str,
    host: &Path,
    target: Option<&str>,
    dirs: &[PathBuf],
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    // A name with a directory in it would leave the places searched.
    if !super::confine::is_file_name(name) {
        return out;
    }
    let host_dir = host.parent().unwrap_or(Path::new(""));
    out.push(host_dir.join(name));
    out.push(host_dir.join(".debug").join(name));
    let tdir = target
        .map(|t| Path::new(t).parent().unwrap_or(Path::new("/")))
        .unwrap_or(host_dir);
    // A target directory with a `..` would leave the DEBUGDIRs: not searched there.
    if let Some(rel) = tdir.to_str().and_then(|t| super::confine::relative(t).ok()) {
        out.extend(dirs.iter().map(|d| d.join(rel).join(name)));
    }
    out
}

/// Where to look: the DEBUGDIRs, in order.
#[derive(Debug, Clone, Default)]
pub struct Search {
    /// `--debug-dir` directories, then `SYSROOT/usr/lib/debug` of each sysroot.
    pub dirs: Vec<PathBuf>,
}

/// A check a candidate must pass besides the build-id.
#[derive(Clone, Copy)]
enum Expect {
    /// Found by build-id: nothing more.
    BuildId,
    /// Found by debuglink: this CRC32 of the whole file.
    Crc(u32),
}

impl Search {
    /// The DEBUGDIRs of `debug_dirs` (given first) and `SYSROOT/usr/lib/debug` per sysroot.
    pub fn new(debug_dirs: &[PathBuf], sysroots: &[PathBuf]) -> Search {
        let mut dirs: Vec<PathBuf> = debug_dirs.to_vec();
        for r in sysroots {
            let d = r.join("usr/lib/debug");
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
        Search { dirs }
    }

    /// Looks for the debug file of `file` (the image at `host`; `target`: its path on the
    /// target, for `DEBUGDIR/TDIR/NAME`; `recorded`: the ids `oprof record --archive` read on
    /// the target, used where the host copy has none). Never fails: unusable candidates become
    /// notes.
    pub fn find(
        &self,
        file: &object::File<'_>,
        host: &Path,
        target: Option<&str>,
        recorded: Option<&Ids>,
    ) -> Lookup {
        let mut ids = Ids::of(file);
        if let Some(r) = recorded {
            if ids.build_id.is_none() {
                ids.build_id.clone_from(&r.build_id);
            }
            if ids.debuglink.is_none() {
                (ids.debuglink, ids.debuglink_crc) = (r.debuglink.clone(), r.debuglink_crc);
            }
        }
        let mut lk = Lookup::default();
        if let Some(id) = &ids.build_id {
            for p in self.dirs.iter().filter_map(|d| build_id_path(d, id)) {
                if let Some(data) =
                    self.accept(&p, file, host, &ids, Expect::BuildId, &mut lk.notes)
                {
                    lk.found = Some(Found {
                        path: p,
                        method: Method::BuildId,
                        data,
                    });
                    return lk;
                }
            }
        }
        if let (Some(name), Some(crc)) = (&ids.debuglink, ids.debuglink_crc) {
            for p in debuglink_paths(name, host, target, &self.dirs) {
                if let Some(data) =
                    self.accept(&p, file, host, &ids, Expect::Crc(crc), &mut lk.notes)
                {
                    lk.found = Some(Found {
                        path: p,
                        method: Method::Debuglink,
                        data,
                    });
                    return lk;
                }
            }
        }
        if let Some(found) = ids
            .build_id
            .as_deref()
            .and_then(|id| debuginfod(id, file, host, &mut lk.notes))
        {
            lk.found = Some(found);
            return lk;
        }
        lk.found = minidebuginfo(file, host, &mut lk.notes);
        lk
    }

    /// The bytes of candidate `p` if it exists and proves to be the debug file of `file`.
    fn accept(
        &self,
        p: &Path,
        file: &object::File<'_>,
        host: &Path,
        ids: &Ids,
        expect: Expect,
        notes: &mut Vec<String>,
    ) -> Option<Vec<u8>> {
        if !p.is_file() || same_file(p, host) {
            return None;
        }
        let refuse =
            |why: String| format!("{}: {why}: not used for {}", p.display(), host.display());
        let data = match std::fs::read(p) {
            Ok(d) => d,
            Err(e) => {
                notes.push(refuse(format!("cannot read ({e})")));
                return None;
            }
        };
        if let Expect::Crc(want) = expect {
            let got = crc32fast::hash(&data);
            if got != want {
                notes.push(refuse(format!(
                    "CRC32 {got:08x} differs from the {want:08x} in the image's .gnu_debuglink"
                )));
                return None;
            }
        }
        let why = match object::File::parse(&*data) {
            Err(e) => Some(format!("not an ELF file ({e})")),
            Ok(d) => mismatch(&d, file, ids, matches!(expect, Expect::BuildId)),
        };
        if let Some(why) = why {
            notes.push(refuse(why));
            return None;
        }
        Some(data)
    }
}

/// Why the debug file `d` does not belong to the image `file` (ids `ids`), if it does not;
/// `need_id`: `d` must have the image's build-id (a debuglink CRC proves it otherwise).
fn mismatch(
    d: &object::File<'_>,
    file: &object::File<'_>,
    ids: &Ids,
    need_id: bool,
) -> Option<String> {
    if d.format() != object::BinaryFormat::Elf || d.architecture() != file.architecture() {
        return Some(format!(
            "an {:?} {:?} file, the image is {:?}",
            d.format(),
            d.architecture(),
            file.architecture()
        ));
    }
    let theirs = Ids::of(d).build_id;
    match (&ids.build_id, theirs) {
        (Some(ours), Some(theirs)) if *ours != theirs => {
            Some(format!("build-id {theirs} differs from the image's {ours}"))
        }
        (Some(ours), None) if need_id => Some(format!("no build-id, the image's is {ours}")),
        _ => None,
    }
}

/// The debug file of build-id `id` from the debuginfod servers, if any are set and one has
/// a file of the image's machine (the client checked the build-id).
fn debuginfod(
    id: &str,
    file: &object::File<'_>,
    host: &Path,
    notes: &mut Vec<String>,
) -> Option<Found> {
    use crate::resolve::debuginfod::{client, Kind};
    let got = client()?.fetch(id, Kind::Debuginfo, notes)?;
    let why = match object::File::parse(&*got.data) {
        Err(e) => Some(format!("not an ELF file ({e})")),
        Ok(d) => mismatch(&d, file, &Ids::default(), false),
    };
    if let Some(why) = why {
        notes.push(format!(
            "{}: {why}: not used for {}",
            got.path.display(),
            host.display()
        ));
        return None;
    }
    Some(Found {
        path: got.path,
        method: Method::Debuginfod,
        data: got.data,
    })
}

/// Whether `a` and `b` name the same file (a debuglink naming the image itself).
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

/// A writer that fails past `limit` bytes (decompression of untrusted input).
struct Limited {
    buf: Vec<u8>,
    limit: usize,
}

impl Write for Limited {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len().saturating_add(data.len()) > self.limit {
            return Err(std::io::Error::other(format!(
                "larger than {} MiB",
                self.limit >> 20
            )));
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Decompresses `xz` data of at most `limit` bytes. Errors: corrupt input, unsupported xz
/// features (BCJ filters, SHA-256 checks), or output over `limit`.
pub fn xz_decompress(data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let mut out = Limited {
        buf: Vec::new(),
        limit,
    };
    lzma_rs::xz_decompress(&mut std::io::BufReader::new(data), &mut out)
        .map_err(|e| e.to_string())?;
    Ok(out.buf)
}

/// The MiniDebugInfo ELF of `file` (its `.gnu_debugdata`), when it has one that decompresses
/// to an ELF file of its machine.
fn minidebuginfo(file: &object::File<'_>, host: &Path, notes: &mut Vec<String>) -> Option<Found> {
    let sec = file.section_by_name(".gnu_debugdata")?;
    let note = |why: String| {
        format!(
            "{}: .gnu_debugdata (MiniDebugInfo) {why}: not used",
            host.display()
        )
    };
    let packed = match sec.data() {
        Ok(d) => d,
        Err(e) => {
            notes.push(note(format!("unreadable ({e})")));
            return None;
        }
    };
    let data = match xz_decompress(packed, MAX_MINIDEBUGINFO) {
        Ok(d) => d,
        Err(e) => {
            notes.push(note(format!("does not decompress ({e})")));
            return None;
        }
    };
    let why = match object::File::parse(&*data) {
        Err(e) => Some(format!("is not an ELF file ({e})")),
        Ok(d) if d.architecture() != file.architecture() => {
            Some(format!("is for {:?}", d.architecture()))
        }
        Ok(_) => None,
    };
    if let Some(why) = why {
        notes.push(note(why));
        return None;
    }
    Some(Found {
        path: host.to_path_buf(),
        method: Method::MiniDebugInfo,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_gdb() {
        let d = Path::new("/usr/lib/debug");
        assert_eq!(
            build_id_path(d, "ab12cd34").unwrap(),
            Path::new("/usr/lib/debug/.build-id/ab/12cd34.debug")
        );
        assert!(build_id_path(d, "ab").is_none() && build_id_path(d, "zz1234").is_none());
        let dirs = [PathBuf::from("/dbg")];
        let p = debuglink_paths(
            "app.debug",
            Path::new("/sys/bin/app"),
            Some("/bin/app"),
            &dirs,
        );
        let want: Vec<PathBuf> = [
            "/sys/bin/app.debug",
            "/sys/bin/.debug/app.debug",
            "/dbg/bin/app.debug",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(p, want);
        assert!(debuglink_paths("../etc/passwd", Path::new("/a/b"), None, &dirs).is_empty());
        let s = Search::new(&dirs, &[PathBuf::from("/root1"), PathBuf::from("/")]);
        assert_eq!(
            s.dirs,
            [
                PathBuf::from("/dbg"),
                PathBuf::from("/root1/usr/lib/debug"),
                PathBuf::from("/usr/lib/debug")
            ]
        );
    }

    #[test]
    fn xz_limits_and_errors() {
        let mut packed = Vec::new();
        lzma_rs::xz_compress(&mut &[7u8; 5000][..], &mut packed).unwrap();
        assert_eq!(xz_decompress(&packed, 5000).unwrap(), vec![7u8; 5000]);
        assert!(xz_decompress(&packed, 4999)
            .unwrap_err()
            .contains("larger than"));
        assert!(xz_decompress(&packed[..packed.len() / 2], 1 << 20).is_err());
        assert!(xz_decompress(b"junk", 1 << 20).is_err());
    }
}
