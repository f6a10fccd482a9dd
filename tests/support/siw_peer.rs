//! Where the recorded Linux siw runs live: `shared/siw-peer/` beside the repository (the team's
//! `../shared/`; its README describes them), found from a git worktree too. Test support shared
//! by source (`#[path]`): `bench::fixtures` (which tests it) and `iwarp/tests/common`; it uses the
//! `CARGO_MANIFEST_DIR` of the crate that includes it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `shared/siw-peer` directory beside the repository: the nearest one above this crate (the
/// main checkout's parent's, also from a git worktree below that parent), else the nearest one
/// above the main checkout of this crate's git worktree (`git rev-parse --git-common-dir`, for a
/// worktree elsewhere).
///
/// # Panics
/// When there is none: the tests that compare with the recordings fail, they do not skip.
pub fn siw_peer_dir() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    find_siw_peer(here).unwrap_or_else(|| {
        panic!(
            "no shared/siw-peer above {} or its main git checkout: the recorded siw runs are missing",
            here.display()
        )
    })
}

/// `siw_peer_dir` as seen from the crate directory `here`.
pub(crate) fn find_siw_peer(here: &Path) -> Option<PathBuf> {
    nearest_above(here).or_else(|| main_checkout(here).and_then(|m| nearest_above(&m)))
}

/// `shared/siw-peer` in `dir` or the nearest of its ancestors that has one.
fn nearest_above(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .map(|d| d.join("shared/siw-peer"))
        .find(|d| d.is_dir())
}

/// The main checkout of `dir`'s git repository: the parent of its common directory (the main
/// checkout's `.git`, also for a linked worktree).
fn main_checkout(dir: &Path) -> Option<PathBuf> {
    let out = git_in(dir)
        .args(["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let common = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    common.parent().map(Path::to_path_buf)
}

/// `git -C dir` on `dir`'s own repository, whatever `GIT_DIR` and the like a caller (a git hook)
/// exported.
pub(crate) fn git_in(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C").arg(dir);
    for v in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_COMMON_DIR",
        "GIT_INDEX_FILE",
    ] {
        c.env_remove(v);
    }
    c
}
