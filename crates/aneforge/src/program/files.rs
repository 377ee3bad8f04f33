//! File access for program directories and the cache: reads that accept regular files only,
//! and the sweep of temporary directories that killed compiles leave behind.

use std::io::Read;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};

/// Reads the whole of `path`, which must be (or link to) a regular file: devices, FIFOs and
/// directories are refused before opening (a FIFO would block, `/dev/zero` would never end), a
/// file larger than the byte cap of [`crate::limits`] is a resource error, and at most the size
/// the file had when checked is read. Missing files keep `ErrorKind::NotFound`.
pub fn read_regular(path: &Path) -> Result<Vec<u8>> {
    let len = regular_len(path)?;
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(usize::try_from(len).unwrap_or(usize::MAX))
        .map_err(|_| {
            crate::limits::exceeded(
                path.display().to_string(),
                format!("{len} bytes do not fit in memory"),
            )
        })?;
    file.take(len)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    Ok(bytes)
}

/// The length of `path` after the checks of [`read_regular`] (a regular file within the byte cap).
fn regular_len(path: &Path) -> Result<u64> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        return Err(Error::format(
            path,
            None,
            format!("not a regular file ({})", kind_of(&meta.file_type())),
        ));
    }
    let len = meta.len();
    crate::limits::Limits::current()?.bytes(&path.display().to_string(), "the file", len)?;
    Ok(len)
}

/// The bytes of `path` (checked as in [`read_regular`]) as a read-only memory map, pages
/// populated up front: large model files are parsed in place instead of copied. An empty file
/// is an empty buffer. The file must not be truncated while the map lives (as for any mapped
/// file, that faults the process).
pub fn map_regular(path: &Path) -> Result<prost::bytes::Bytes> {
    if regular_len(path)? == 0 {
        return Ok(prost::bytes::Bytes::new());
    }
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: the map is read-only and private to this process; the mapped file is a regular
    // file the caller asked to read (concurrent truncation is the documented caveat).
    let map = unsafe { memmap2::MmapOptions::new().populate().map(&file) }
        .map_err(|e| Error::io(path, e))?;
    Ok(prost::bytes::Bytes::from_owner(map))
}

/// [`read_regular`] as UTF-8 text; invalid UTF-8 is a format error at the first bad byte.
pub fn read_regular_text(path: &Path) -> Result<String> {
    String::from_utf8(read_regular(path)?).map_err(|e| {
        Error::format(
            path,
            Some(e.utf8_error().valid_up_to() as u64),
            "not UTF-8 text",
        )
    })
}

/// A name for a non-regular file type, for errors.
fn kind_of(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// Temporary directories older than this are taken as abandoned even when their writer's
/// liveness cannot be checked (no `/proc`).
const STALE_AFTER: Duration = Duration::from_secs(3600);

/// Removes the `.tmp-<key>-<pid>-<nanos>` directories under the cache `root` whose writer is gone:
/// its pid no longer runs (where `/proc` tells) or the directory is older than an hour. Errors
/// are ignored: the sweep is housekeeping, never a reason to fail a compile.
pub fn sweep_stale_temps(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    let proc_known = Path::new("/proc/self").exists();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(".tmp-")) else {
            continue;
        };
        let pid = rest.split('-').nth(1).and_then(|p| p.parse::<u32>().ok());
        let writer_gone = match pid {
            Some(p) if proc_known => {
                p != std::process::id() && !Path::new(&format!("/proc/{p}")).exists()
            }
            _ => false,
        };
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age > STALE_AFTER);
        if writer_gone || old {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("aneforge-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn regular_files_read_whole_and_others_are_refused() {
        let d = scratch("read");
        std::fs::write(d.join("a.bin"), [1u8, 2, 3]).unwrap();
        assert_eq!(read_regular(&d.join("a.bin")).unwrap(), vec![1, 2, 3]);
        let err = read_regular(&d).unwrap_err().to_string();
        assert!(err.contains("not a regular file (a directory)"), "{err}");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/dev/zero", d.join("zero")).unwrap();
            let err = read_regular(&d.join("zero")).unwrap_err().to_string();
            assert!(err.contains("a device") && err.contains("zero"), "{err}");
        }
        let missing = read_regular(&d.join("none")).unwrap_err();
        assert!(matches!(missing, Error::Io { .. }), "{missing:?}");
        std::fs::write(d.join("t.txt"), [b'o', b'k', 0xff]).unwrap();
        let err = read_regular_text(&d.join("t.txt")).unwrap_err().to_string();
        assert!(err.contains("not UTF-8") && err.contains('2'), "{err}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn sweep_removes_temps_of_dead_writers_only() {
        if !Path::new("/proc/self").exists() {
            return; // liveness needs /proc; the age rule is covered by the constant's contract
        }
        let d = scratch("sweep");
        let dead = d.join(".tmp-abc-4294967295-1");
        let mine = d.join(format!(".tmp-abc-{}-1", std::process::id()));
        let program = d.join("0123456789abcdef");
        for p in [&dead, &mine, &program] {
            std::fs::create_dir(p).unwrap();
        }
        sweep_stale_temps(&d);
        assert!(!dead.exists() && mine.exists() && program.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
