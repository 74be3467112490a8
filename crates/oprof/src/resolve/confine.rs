//! Joining session-provided paths (target paths from `images`, `session.json`'s modules,
//! module names from `proc_modules`) to a root (`--archive`'s `DIR/root`, a `--sysroot`, an
//! `--image-path` directory) without leaving it. A target path is read as relative to the
//! root (its leading `/`s dropped); a `..` component would climb out of the root, so such a
//! path is not opened at all: the image stays unresolved with the reason, and no other file
//! is guessed in its place. An image is then found by [`file_in`], which resolves the path as
//! if the root were `/` (`openat2` `RESOLVE_IN_ROOT`): an absolute symbolic link in a sysroot
//! (`lib/libfoo.so -> /usr/lib/...`) names the sysroot's file, not the host's of another
//! architecture, and a link planted in an archive does not make an image of a host file. The
//! file is opened again by the path found (a link swapped in between is followed then: the
//! report is no guard against someone changing a session while it is read), and debug files
//! are searched with the host's resolution, taken only when their build-id or CRC matches.

use nix::errno::Errno;
use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Component, Path, PathBuf};

/// Why a session path is not joined to a root.
pub const CLIMBS_OUT: &str = "a `..` component would leave the root: not opened";

/// `target` (absolute or relative) as a path relative to a root: its leading `/`s dropped.
/// Errors: [`CLIMBS_OUT`] when a component is `..`.
pub fn relative(target: &str) -> Result<&Path, &'static str> {
    let rel = Path::new(target.trim_start_matches('/'));
    match rel
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        true => Ok(rel),
        false => Err(CLIMBS_OUT),
    }
}

/// `root/target` with `target` read by [`relative`]. Errors: [`CLIMBS_OUT`].
pub fn join(root: &Path, target: &str) -> Result<PathBuf, &'static str> {
    relative(target).map(|rel| root.join(rel))
}

/// The regular file `target` (read by [`relative`]) names inside `root`, resolved as if `root`
/// were `/`: symbolic links are followed, an absolute one from `root` and `..` stopping at it
/// (`openat2(2)` with `RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS`); its path `root/RESOLVED`,
/// RESOLVED being the path within the root with the links resolved (`/proc/self/fd`). `None`:
/// no such file (or not a regular one), a `..` in `target`, or `root` cannot be opened. Where
/// the kernel has no `openat2` (before Linux 5.6, or a seccomp filter refusing it) or `/proc`
/// is not mounted, the path is resolved by the host as it is, and the file is taken only if it
/// lies under `root`: an absolute link in a sysroot then finds nothing.
pub fn file_in(root: &Path, target: &str) -> Option<PathBuf> {
    let rel = relative(target).ok()?;
    let dir = File::open(root).ok()?;
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    match openat2(&dir, rel, how) {
        Ok(fd) => {
            let f = File::from(fd);
            if !f.metadata().ok()?.is_file() {
                return None;
            }
            let Ok(real) = std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())) else {
                return file_under(root, rel);
            };
            // In the root's own terms (a root given through a link stays so named).
            let inside = root
                .canonicalize()
                .ok()
                .and_then(|c| real.strip_prefix(c).ok().map(|r| root.join(r)));
            Some(inside.unwrap_or(real))
        }
        Err(Errno::ENOSYS | Errno::EPERM) => file_under(root, rel),
        Err(_) => None,
    }
}

/// [`file_in`] without `openat2`: `root/rel` resolved by the host, taken only when the file it
/// reaches is a regular file under `root` (its path in the root's terms).
fn file_under(root: &Path, rel: &Path) -> Option<PathBuf> {
    let p = root.join(rel).canonicalize().ok()?;
    let inside = p.strip_prefix(root.canonicalize().ok()?).ok()?;
    p.is_file().then(|| root.join(inside))
}

/// Whether `name` is one file name (no `/`, not `.`, `..` or empty), safe to join to a
/// directory as it is.
pub fn is_file_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && name != "." && name != ".."
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_under_the_root() {
        let root = Path::new("/s/root");
        assert_eq!(
            join(root, "/usr/bin/app"),
            Ok(PathBuf::from("/s/root/usr/bin/app"))
        );
        assert_eq!(
            join(root, "//lib/./libc.so"),
            Ok(PathBuf::from("/s/root/lib/libc.so"))
        );
        assert_eq!(join(root, "lib/x"), Ok(PathBuf::from("/s/root/lib/x")));
        for bad in [
            "/../etc/shadow",
            "/usr/../../etc/shadow",
            "..",
            "a/..",
            "/lib/..",
        ] {
            assert_eq!(join(root, bad), Err(CLIMBS_OUT), "{bad}");
        }
        // `..` as part of a name is a name.
        assert_eq!(
            join(root, "/a..b/..c"),
            Ok(PathBuf::from("/s/root/a..b/..c"))
        );
        assert!(is_file_name("optest") && is_file_name("a..b"));
        assert!(!is_file_name("..") && !is_file_name("../x") && !is_file_name(""));
    }

    #[test]
    fn links_in_a_root_resolve_inside_it() {
        let d = tempfile::tempdir().unwrap();
        // The root is named through a link: the paths found keep that name.
        std::os::unix::fs::symlink(d.path().canonicalize().unwrap(), d.path().join("top")).unwrap();
        let top = d.path().join("top");
        let root = top.join("sysroot");
        std::fs::create_dir_all(root.join("usr/lib")).unwrap();
        std::fs::create_dir_all(root.join("lib")).unwrap();
        std::fs::write(root.join("usr/lib/libfoo.so.1"), "target's").unwrap();
        std::fs::write(top.join("host.so"), "host's").unwrap();
        let link = |to: &Path, at: &str| std::os::unix::fs::symlink(to, root.join(at)).unwrap();
        // A distribution's absolute link names the sysroot's file.
        link(Path::new("/usr/lib/libfoo.so.1"), "lib/libfoo.so");
        assert_eq!(
            file_in(&root, "/lib/libfoo.so"),
            Some(root.join("usr/lib/libfoo.so.1"))
        );
        assert_eq!(
            file_in(&root, "/usr/lib/libfoo.so.1"),
            Some(root.join("usr/lib/libfoo.so.1"))
        );
        // Links that would reach the host's file: absolute, and climbing out.
        link(&top.join("host.so"), "lib/abs.so");
        link(Path::new("../../host.so"), "lib/up.so");
        assert_eq!(file_in(&root, "/lib/abs.so"), None);
        assert_eq!(file_in(&root, "/lib/up.so"), None);
        // Not regular files, a `..` in the path, nothing there.
        for t in ["/lib", "/", "", "/../host.so", "/lib/none.so"] {
            assert_eq!(file_in(&root, t), None, "{t}");
        }
        // Without openat2: what the host resolves, if it stays under the root.
        let rel = |t: &'static str| relative(t).unwrap();
        assert_eq!(file_under(&root, rel("/lib/abs.so")), None);
        assert_eq!(file_under(&root, rel("/lib/up.so")), None);
        assert_eq!(file_under(&root, rel("/lib")), None);
        link(Path::new("../usr/lib/libfoo.so.1"), "lib/rel.so");
        assert_eq!(
            file_under(&root, rel("/lib/rel.so")),
            Some(root.join("usr/lib/libfoo.so.1"))
        );
    }
}
