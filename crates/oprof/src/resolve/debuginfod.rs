//! A debuginfod client: debug files and executables fetched by build-id from the servers in
//! `DEBUGINFOD_URLS` (`URL/buildid/HEX/debuginfo`, `URL/buildid/HEX/executable`), cached in
//! elfutils' layout so elfutils, gdb and perf share the cache: `CACHE/HEX/debuginfo` (and
//! `executable`), `CACHE` being `$DEBUGINFOD_CACHE_PATH`, else
//! `$XDG_CACHE_HOME/debuginfod_client`, else `$HOME/.cache/debuginfod_client`.
//!
//! Only `http://` servers are asked (oprof is built without TLS); each other URL is a note.
//! `DEBUGINFOD_TIMEOUT` (seconds, default 90, as elfutils) bounds the connection, the wait for
//! the response and each read of the body: a server that stalls that long is skipped. A file is
//! cached only once its build-id proved to be the one asked for: written under a temporary
//! name (created exclusively, never through a link) and renamed into place. A cache directory
//! or file that is a symbolic link is not used. Whatever fails (server down, 404, a truncated
//! body, another build-id) is a note, and the lookup goes on without the file.

use crate::input::session::Ids;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Largest file accepted from a server, bytes (it is held in memory, as local debug files are).
const MAX_FILE: u64 = 1 << 30;
/// Downloads larger than this print a line when they start and end, bytes.
const PROGRESS_OVER: u64 = 1 << 20;

static DISABLED: AtomicBool = AtomicBool::new(false);
static CLIENT: OnceLock<Option<Client>> = OnceLock::new();

/// Turns the client off for this process (`--no-debuginfod`); before the first lookup.
pub fn disable() {
    DISABLED.store(true, Ordering::Relaxed);
}

/// The process's client, from the environment on first use; `None` when `DEBUGINFOD_URLS` is
/// unset or empty, or after [`disable`]. Unit tests never see the environment's servers.
pub fn client() -> Option<&'static Client> {
    if DISABLED.load(Ordering::Relaxed) || cfg!(test) {
        return None;
    }
    CLIENT
        .get_or_init(|| Client::from_env(|k| std::env::var_os(k)))
        .as_ref()
}

/// A configured client.
///
/// # Invariants
/// `urls` is not empty; `cache` is an absolute or given path, not checked until used.
#[derive(Debug)]
pub struct Client {
    /// The server URLs, without a trailing `/`.
    urls: Vec<String>,
    cache: PathBuf,
    timeout: Duration,
}

/// What is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The separate debug file.
    Debuginfo,
    /// The executable or shared object itself.
    Executable,
}

impl Kind {
    /// The URL's and the cache file's last component.
    fn name(self) -> &'static str {
        match self {
            Kind::Debuginfo => "debuginfo",
            Kind::Executable => "executable",
        }
    }
}

/// A file from a server or the cache.
#[derive(Debug)]
pub struct Fetched {
    /// Its path in the cache.
    pub path: PathBuf,
    pub data: Vec<u8>,
}

impl Client {
    /// The client `env` (an environment lookup) describes; `None` without servers.
    pub fn from_env(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<Client> {
        let s = |k: &str| env(k).map(|v| v.to_string_lossy().into_owned());
        let urls: Vec<String> = s("DEBUGINFOD_URLS")?
            .split_whitespace()
            .map(|u| u.trim_end_matches('/').to_string())
            .collect();
        if urls.is_empty() {
            return None;
        }
        let nonempty = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let cache = nonempty("DEBUGINFOD_CACHE_PATH")
            .or_else(|| nonempty("XDG_CACHE_HOME").map(|d| d.join("debuginfod_client")))
            .or_else(|| nonempty("HOME").map(|d| d.join(".cache/debuginfod_client")))?;
        let secs = s("DEBUGINFOD_TIMEOUT")
            .and_then(|t| t.trim().parse::<u64>().ok())
            .filter(|&t| t > 0)
            .unwrap_or(90);
        Some(Client {
            urls,
            cache,
            timeout: Duration::from_secs(secs),
        })
    }

    /// The `kind` file of build-id `id` (lowercase hex): from the cache, else from the first
    /// server that has it. `None` (with notes) when none has a file with that build-id.
    pub fn fetch(&self, id: &str, kind: Kind, notes: &mut Vec<String>) -> Option<Fetched> {
        if id.len() < 4 || !id.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let id = id.to_ascii_lowercase();
        let id = id.as_str();
        let dir = self.cache.join(id);
        let path = dir.join(kind.name());
        if let Some(data) = self.cached(&dir, &path, id, notes) {
            return Some(Fetched { path, data });
        }
        for url in &self.urls {
            let Some(data) = self.download(url, id, kind, notes) else {
                continue;
            };
            if let Err(e) = store(&self.cache, &dir, &path, &data) {
                notes.push(format!("debuginfod: {}: not cached ({e})", path.display()));
            }
            return Some(Fetched { path, data });
        }
        None
    }

    /// The cached file at `path` (in `dir`) if it is a regular file with build-id `id`, and
    /// neither it, `dir` nor the cache directory is a link.
    fn cached(
        &self,
        dir: &Path,
        path: &Path,
        id: &str,
        notes: &mut Vec<String>,
    ) -> Option<Vec<u8>> {
        let meta = std::fs::symlink_metadata(path).ok()?;
        if !meta.file_type().is_file() || linked(&self.cache) || linked(dir) {
            notes.push(format!(
                "debuginfod: {}: not a regular file in a real directory: not used",
                path.display()
            ));
            return None;
        }
        let data = std::fs::read(path).ok()?;
        match build_id_of(&data) {
            Some(got) if got == id => Some(data),
            got => {
                notes.push(format!(
                    "debuginfod: {}: build-id {} is not {id}: not used",
                    path.display(),
                    got.as_deref().unwrap_or("(none)")
                ));
                None
            }
        }
    }

    /// `URL/buildid/ID/KIND` if the server sends all of it with build-id `id`.
    fn download(
        &self,
        url: &str,
        id: &str,
        kind: Kind,
        notes: &mut Vec<String>,
    ) -> Option<Vec<u8>> {
        let full = format!("{url}/buildid/{id}/{}", kind.name());
        if !url.starts_with("http://") {
            notes.push(format!(
                "debuginfod: {url}: not asked: only http:// servers (oprof is built without TLS)"
            ));
            return None;
        }
        let data = match self.get(&full) {
            Ok(d) => d,
            Err(e) => {
                notes.push(format!("debuginfod: {full}: {e}"));
                return None;
            }
        };
        match build_id_of(&data) {
            Some(got) if got == id => Some(data),
            got => {
                notes.push(format!(
                    "debuginfod: {full}: build-id {} is not {id}: not used",
                    got.as_deref().unwrap_or("(none, or not an ELF file)")
                ));
                None
            }
        }
    }

    /// The body of a `200 OK` answer to `GET url`, whole. Errors: as text for a note.
    fn get(&self, url: &str) -> Result<Vec<u8>, String> {
        let t = Some(self.timeout);
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(t)
            .timeout_recv_response(t)
            .timeout_per_read(t)
            .build()
            .into();
        let mut resp = agent.get(url).call().map_err(|e| e.to_string())?;
        let status = resp.status();
        if status != 200 {
            return Err(format!("HTTP {status}"));
        }
        let body = resp.body_mut();
        let want = body.content_length();
        if let Some(n) = want.filter(|&n| n > MAX_FILE) {
            return Err(format!(
                "{n} bytes, over the {} MiB accepted",
                MAX_FILE >> 20
            ));
        }
        let big = want.is_some_and(|n| n > PROGRESS_OVER);
        if let (true, Some(n)) = (big, want) {
            eprintln!("oprof: debuginfod: downloading {url} ({} MiB)", n >> 20);
        }
        let mut data = Vec::new();
        body.with_config()
            .limit(MAX_FILE)
            .reader()
            .read_to_end(&mut data)
            .map_err(|e| format!("reading the body: {e}"))?;
        if let Some(n) = want.filter(|&n| n != data.len() as u64) {
            return Err(format!("{} of the {n} bytes announced", data.len()));
        }
        if big {
            eprintln!("oprof: debuginfod: downloaded {url}");
        }
        Ok(data)
    }
}

/// The build-id of the ELF file `data`, lowercase hex.
fn build_id_of(data: &[u8]) -> Option<String> {
    Ids::of(&object::File::parse(data).ok()?).build_id
}

/// Whether `p` is a symbolic link.
fn linked(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// Creates `dir` (mode 0700) unless it exists as a real directory.
fn real_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_dir() => Ok(()),
        Ok(_) => Err(std::io::Error::other(format!(
            "{} is not a directory (or a link)",
            dir.display()
        ))),
        Err(_) => std::fs::DirBuilder::new().mode(0o700).create(dir),
    }
}

/// Writes `data` to `path` in `dir` under `cache`: a new temporary file in `dir` (never through
/// a link), renamed into place.
fn store(cache: &Path, dir: &Path, path: &Path, data: &[u8]) -> std::io::Result<()> {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    if let Some(parent) = cache.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    real_dir(cache)?;
    real_dir(dir)?;
    let tmp = dir.join(format!(
        ".{}.oprof-{}-{}",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let write = || {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    let r = write();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).map(Into::into)
    }

    #[test]
    fn configuration_follows_elfutils() {
        assert!(Client::from_env(env(&[("HOME", "/h")])).is_none());
        assert!(Client::from_env(env(&[("DEBUGINFOD_URLS", " "), ("HOME", "/h")])).is_none());
        let c = Client::from_env(env(&[
            ("DEBUGINFOD_URLS", "http://a:1/ https://b"),
            ("HOME", "/h"),
        ]))
        .unwrap();
        assert_eq!(c.urls, ["http://a:1", "https://b"]);
        assert_eq!(c.cache, Path::new("/h/.cache/debuginfod_client"));
        assert_eq!(c.timeout, Duration::from_secs(90));
        let c = Client::from_env(env(&[
            ("DEBUGINFOD_URLS", "http://a"),
            ("HOME", "/h"),
            ("XDG_CACHE_HOME", "/x"),
            ("DEBUGINFOD_TIMEOUT", "7"),
        ]))
        .unwrap();
        assert_eq!(
            (c.cache.as_path(), c.timeout),
            (Path::new("/x/debuginfod_client"), Duration::from_secs(7))
        );
        let c = Client::from_env(env(&[
            ("DEBUGINFOD_URLS", "http://a"),
            ("XDG_CACHE_HOME", "/x"),
            ("DEBUGINFOD_CACHE_PATH", "/c"),
        ]))
        .unwrap();
        assert_eq!(c.cache, Path::new("/c"));
    }
}
