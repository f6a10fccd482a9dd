//! The recorded Linux siw runs (`shared/siw-peer/` beside the repository), for the tests that
//! hold our printed tables and our `-R` exchange against perftest's: `tests/support/siw_peer.rs`
//! of the workspace, shared with the iwarp crate's tests, and its tests.

#[path = "../../tests/support/siw_peer.rs"]
mod siw_peer;
pub use siw_peer::siw_peer_dir;

#[cfg(test)]
mod tests {
    use super::siw_peer::{find_siw_peer, git_in};
    use super::*;
    use std::fs;
    use std::path::{Path, PathBuf};

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
