//! The socket directory shared with the gateway: created and handed to the
//! daemon's user and the gateway's group before the daemon starts.
//!
//! In Kubernetes the directory is a hostPath volume that the kubelet creates as
//! `root:root 0755`, where a non-root daemon cannot bind its socket and the
//! gateway's Envoy (Istio's proxy runs as uid and gid 1337) cannot connect. An init
//! container runs `semroute-daemon socket-dir` as root with only `CAP_CHOWN`: the
//! mode is set while root still owns the directory (no `CAP_FOWNER` needed), then
//! the owner. With the set-group-ID bit in `mode`, the socket the daemon creates
//! inherits the directory's group, so `socket_mode = 0o660` admits exactly the
//! daemon's user and that group.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SocketDirError {
    #[error("{path}: {what}: {source}")]
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    #[error("{path} exists and is not a directory")]
    NotADirectory { path: PathBuf },
    #[error("mode {0:#o} is not permission bits (at most 0o7777)")]
    Mode(u32),
}

/// Creates `path` (and its parents) when missing, sets `mode` (permission bits,
/// set-group-ID included), then owner `uid` and group `gid`.
pub fn prepare(path: &Path, uid: u32, gid: u32, mode: u32) -> Result<(), SocketDirError> {
    if mode > 0o7777 {
        return Err(SocketDirError::Mode(mode));
    }
    let io = |what: &'static str| {
        move |source| SocketDirError::Io {
            path: path.to_owned(),
            what,
            source,
        }
    };
    std::fs::create_dir_all(path).map_err(io("create"))?;
    if !std::fs::metadata(path).map_err(io("stat"))?.is_dir() {
        return Err(SocketDirError::NotADirectory {
            path: path.to_owned(),
        });
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io("chmod"))?;
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).map_err(io("chown"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_the_directory_with_the_mode_and_keeps_the_owner_it_may_set() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        // Our own ids: allowed without privileges.
        let meta = std::fs::metadata(root.path()).unwrap();
        let (uid, gid) = {
            use std::os::unix::fs::MetadataExt;
            (meta.uid(), meta.gid())
        };
        prepare(&dir, uid, gid, 0o2770).unwrap();
        let m = std::fs::metadata(&dir).unwrap();
        assert!(m.is_dir());
        assert_eq!(m.permissions().mode() & 0o7777, 0o2770);
        // Idempotent: a second run on the existing directory succeeds.
        prepare(&dir, uid, gid, 0o2770).unwrap();
    }

    #[test]
    fn refuses_a_file_and_a_mode_beyond_permission_bits() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(matches!(
            prepare(&file, 0, 0, 0o770),
            Err(SocketDirError::Io { .. } | SocketDirError::NotADirectory { .. })
        ));
        assert!(matches!(
            prepare(root.path(), 0, 0, 0o10000),
            Err(SocketDirError::Mode(_))
        ));
    }
}
