//! Files and folders only their owner may use, on Unix: the SQLite database and its folder
//! here, the data folder and the generated master key in the server. One place creates them
//! (folders 0700, files 0600, whatever the umask) and one place tightens an existing one that
//! others may use. Elsewhere than on Unix files and folders are created plainly and nothing is
//! tightened.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io;
use std::path::Path;

/// Creates `dir` and its missing parents, mode 0700 on Unix. An existing folder is left as it
/// is.
pub fn create_folder(dir: &Path) -> io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Creates the file `path` for writing, mode 0600 on Unix; an error (`AlreadyExists`) when it
/// exists.
pub fn create_file(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

/// What [`tighten`] looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A file, made 0600.
    File,
    /// A folder, made 0700.
    Folder,
}

/// Sets `path`, when it is a `kind` that others may use, to the owner-only mode (0600 for a
/// file, 0700 for a folder), with a warning that names it as `what` (say "the database file")
/// and gives its old mode. Not fatal when that is not allowed (a file of another owner): the
/// warning says so. A missing path, or one of the other kind, is left alone. Unix only.
pub fn tighten(path: &Path, kind: Kind, what: &str) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let Ok(meta) = std::fs::metadata(path) else {
            return;
        };
        let (is_kind, private, open) = match kind {
            Kind::File => (meta.is_file(), 0o600, "readable or writable by others"),
            Kind::Folder => (meta.is_dir(), 0o700, "open to others"),
        };
        let mode = meta.permissions().mode() & 0o777;
        if !is_kind || mode & 0o077 == 0 {
            return;
        }
        match std::fs::set_permissions(path, std::fs::Permissions::from_mode(private)) {
            Ok(()) => tracing::warn!(
                path = %path.display(),
                was = format!("{mode:o}"),
                "{what} was {open}: set it to {private:04o}"
            ),
            Err(e) => tracing::warn!(
                path = %path.display(),
                mode = format!("{mode:o}"),
                error = %e,
                "{what} is {open} and could not be set to {private:04o}"
            ),
        }
    }
    #[cfg(not(unix))]
    let _ = (path, kind, what);
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn set(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn created_owner_only_and_tightened_by_kind() {
        let root = std::env::temp_dir().join(format!("gc-owner-only-{}", uuid::Uuid::now_v7()));
        let dir = root.join("a").join("b");
        create_folder(&dir).unwrap();
        assert_eq!(mode(&root.join("a")), 0o700);
        assert_eq!(mode(&dir), 0o700);
        let file = dir.join("f");
        create_file(&file).unwrap();
        assert_eq!(mode(&file), 0o600);
        assert_eq!(
            create_file(&file).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );

        set(&file, 0o644);
        set(&dir, 0o755);
        // Each kind leaves the other alone.
        tighten(&file, Kind::Folder, "a folder");
        tighten(&dir, Kind::File, "a file");
        assert_eq!((mode(&file), mode(&dir)), (0o644, 0o755));
        tighten(&file, Kind::File, "a file");
        tighten(&dir, Kind::Folder, "a folder");
        assert_eq!((mode(&file), mode(&dir)), (0o600, 0o700));
        // Owner-only modes stricter than these are kept; a missing path is no error.
        set(&file, 0o400);
        tighten(&file, Kind::File, "a file");
        assert_eq!(mode(&file), 0o400);
        tighten(&dir.join("missing"), Kind::File, "a file");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
