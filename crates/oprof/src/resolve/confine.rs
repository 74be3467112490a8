//! Joining session-provided paths (target paths from `images`, `session.json`'s modules,
//! module names from `proc_modules`) to a root (`--archive`'s `DIR/root`, a `--sysroot`, an
//! `--image-path` directory) without leaving it. A target path is read as relative to the
//! root (its leading `/`s dropped); a `..` component would climb out of the root, so such a
//! path is not opened at all: the image stays unresolved with the reason, and no other file
//! is guessed in its place. The check is on the path's text: a symbolic link inside a root
//! is followed as the file system resolves it.

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
}
