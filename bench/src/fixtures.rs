//! Where the recorded Linux siw runs live: `shared/siw-peer/` beside the repository (the team's
//! `../shared/`; its README §6 describes them), for the tests that hold our printed tables and
//! our `-R` exchange against perftest's.

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
            "no shared/siw-peer above {} or its main git checkout: the recorded perftest runs are missing",
            here.display()
        )
    })
}

/// `siw_peer_dir` as seen from the crate directory `here`.
fn find_siw_peer(here: &Path) -> Option<PathBuf> {
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
fn git_in(dir: &Path) -> Command {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A scratch directory, removed when dropped.
    struct Scratch(PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
    fn scratch(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("bench-fixtures-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }
    fn git(dir: &Path, args: &[&str]) {
        let st = git_in(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&st.stderr)
        );
    }

    #[test]
    fn found_above_the_main_checkout_and_a_worktree_beside_it() {
        let s = scratch("above");
        let shared = s.0.join("shared/siw-peer");
        fs::create_dir_all(&shared).unwrap();
        for crate_dir in ["main/bench", "wt/tidy/bench"] {
            fs::create_dir_all(s.0.join(crate_dir)).unwrap();
            assert_eq!(find_siw_peer(&s.0.join(crate_dir)), Some(shared.clone()));
        }
    }

    #[test]
    fn found_beside_the_main_checkout_of_a_worktree_elsewhere() {
        let s = scratch("worktree");
        let (main, wt) = (s.0.join("work/main"), s.0.join("elsewhere/wt"));
        fs::create_dir_all(&main).unwrap();
        git(&main, &["init", "-q"]);
        git(&main, &["commit", "-q", "--allow-empty", "-m", "x"]);
        git(&main, &["worktree", "add", "-q", wt.to_str().unwrap()]);
        fs::create_dir_all(wt.join("bench")).unwrap();
        // Not there yet: none (the tests that need it then fail, see `siw_peer_dir`).
        assert_eq!(find_siw_peer(&wt.join("bench")), None);
        let shared = s.0.join("work/shared/siw-peer");
        fs::create_dir_all(&shared).unwrap();
        assert_eq!(find_siw_peer(&wt.join("bench")), Some(shared));
    }

    #[test]
    fn the_real_one_holds_the_recordings() {
        assert!(siw_peer_dir().join("results/write_bw.client.txt").is_file());
    }
}
