//! Git and cargo for `ab`: resolving revisions, keeping one detached
//! worktree per commit under `target/ab/`, and running `cargo bench` in one
//! with its output in a log file.
//!
//! Worktrees are named by commit hash, not by the revision as typed, so
//! `main~1` and its hash share one, and a name like `origin/main` makes no
//! nested directories. They are kept between runs (so the next build is
//! incremental) and reused only when clean and at the expected commit.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Lines of a failed command's log shown in the error.
const LOG_TAIL_LINES: usize = 25;

/// Runs `git -C dir ARGS`, returning its trimmed stdout, or an error with
/// git's own message.
pub fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    } else {
        Err(format!(
            "`git {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// The root of the repository `dir` is in.
pub fn toplevel(dir: &Path) -> Result<PathBuf, String> {
    git(dir, &["rev-parse", "--show-toplevel"])
        .map(PathBuf::from)
        .map_err(|e| format!("ab needs to run inside the git repository: {e}"))
}

/// The full commit hash `rev` names.
pub fn resolve(root: &Path, rev: &str) -> Result<String, String> {
    if rev.starts_with('-') {
        return Err(format!("`{rev}` is not a revision"));
    }
    let spec = format!("{rev}^{{commit}}");
    git(root, &["rev-parse", "--verify", "--quiet", &spec]).map_err(|_| {
        format!("unknown revision `{rev}`: git knows no commit by that name (try `git log --oneline`)")
    })
}

/// Makes `path` a clean detached worktree at `sha`, creating it if needed.
pub fn ensure_worktree(root: &Path, path: &Path, sha: &str) -> Result<(), String> {
    // Forget worktrees whose directories were deleted by hand, or `add`
    // would refuse a path git still thinks is registered.
    git(root, &["worktree", "prune"])?;
    let shown = path.display();
    if !path.exists() {
        let path_str = path.to_str().ok_or_else(|| format!("worktree path {shown} is not UTF-8"))?;
        return git(root, &["worktree", "add", "--detach", "--quiet", path_str, sha])
            .map(|_| ())
            .map_err(|e| format!("cannot create worktree {shown}: {e}"));
    }
    let top = git(path, &["rev-parse", "--show-toplevel"]).ok().map(PathBuf::from);
    let is_worktree = match (top, path.canonicalize()) {
        (Some(top), Ok(canonical)) => top.canonicalize().is_ok_and(|t| t == canonical),
        _ => false,
    };
    if !is_worktree {
        return Err(format!(
            "{shown} exists but is not a git worktree; remove it (rm -r {shown}) and run ab again"
        ));
    }
    let changes = git(path, &["status", "--porcelain", "--untracked-files=no"])?;
    if !changes.is_empty() {
        let first: Vec<&str> = changes.lines().take(5).collect();
        return Err(format!(
            "worktree {shown} has uncommitted changes, which ab will not overwrite:\n    {}\n\
             keep them elsewhere, or discard them with `git worktree remove --force {shown}`",
            first.join("\n    ")
        ));
    }
    if git(path, &["rev-parse", "HEAD"])? != sha {
        // Clean, so moving it loses nothing.
        git(path, &["checkout", "--detach", "--quiet", sha])
            .map_err(|e| format!("cannot move worktree {shown} to {sha}: {e}"))?;
    }
    Ok(())
}

/// Sets the modification time of every file git tracks in `worktree` to
/// now.
///
/// Both revisions build into one shared target directory, and cargo names a
/// workspace crate's artifacts by its path relative to the workspace root,
/// so the base and head builds of a crate share one slot. Cargo decides
/// whether that slot is stale by comparing source mtimes with the last
/// build's, and a worktree checked out before the other revision was built
/// looks older than that build: without this, the head run could silently
/// reuse the base's binary. Touching forces the workspace's own crates to
/// rebuild (a minute or two) while the registry dependencies stay shared.
pub fn touch_tracked(worktree: &Path) -> Result<usize, String> {
    let listing = git(worktree, &["ls-files", "-z"])?;
    let now = std::time::SystemTime::now();
    let mut touched = 0;
    for name in listing.split('\0').filter(|n| !n.is_empty()) {
        let path = worktree.join(name);
        // Symlinks and files deleted by a sparse checkout are left alone.
        if !path.symlink_metadata().is_ok_and(|m| m.is_file()) {
            continue;
        }
        File::open(&path)
            .and_then(|f| f.set_modified(now))
            .map_err(|e| format!("cannot update the time of {}: {e}", path.display()))?;
        touched += 1;
    }
    Ok(touched)
}

/// A command to run with its output going to a log file.
pub struct Logged<'a> {
    pub argv: Vec<String>,
    pub dir: &'a Path,
    pub env: Vec<(String, PathBuf)>,
    pub log: &'a Path,
}

/// Runs the command; on failure, the error carries the log's last lines.
pub fn run_logged(cmd: &Logged<'_>) -> Result<(), String> {
    let (program, args) = cmd.argv.split_first().ok_or("empty command")?;
    let out = File::create(cmd.log).map_err(|e| format!("cannot create {}: {e}", cmd.log.display()))?;
    let err = out.try_clone().map_err(|e| format!("cannot share {}: {e}", cmd.log.display()))?;
    let status = Command::new(program)
        .args(args)
        .current_dir(cmd.dir)
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| format!("cannot run `{}`: {e}", cmd.argv.join(" ")))?;
    if status.success() {
        return Ok(());
    }
    let text = std::fs::read_to_string(cmd.log).unwrap_or_default();
    Err(format!(
        "`{}` failed ({status}); last lines of {}:\n{}",
        cmd.argv.join(" "),
        cmd.log.display(),
        tail(&text, LOG_TAIL_LINES)
    ))
}

/// The last `n` non-empty lines of `text`, indented.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(n);
    lines[start..].iter().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_last_non_empty_lines() {
        assert_eq!(tail("a\n\nb\nc\n\n", 2), "    b\n    c");
        assert_eq!(tail("", 3), "");
    }

    #[test]
    fn failed_command_shows_its_log_tail() {
        let dir = std::env::temp_dir();
        let log = dir.join(format!("peregrine-lab-ab-log-{}", std::process::id()));
        let cmd = Logged {
            argv: vec!["sh".into(), "-c".into(), "echo one; echo two >&2; exit 3".into()],
            dir: &dir,
            env: Vec::new(),
            log: &log,
        };
        let err = run_logged(&cmd).expect_err("exit 3 fails");
        assert!(err.contains("exit status: 3") && err.contains("    one\n    two"), "{err}");
        let _ = std::fs::remove_file(&log);
    }

    #[test]
    fn worktrees_are_created_reused_and_guarded() {
        let repo = std::env::temp_dir().join(format!("peregrine-lab-ab-repo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&repo);
        std::fs::create_dir_all(&repo).expect("mkdir");
        let commit = |msg: &str| {
            git(&repo, &["-c", "user.name=lab", "-c", "user.email=lab@localhost", "commit", "-qam", msg])
        };
        git(&repo, &["init", "-q"]).expect("git init");
        std::fs::write(repo.join("a.txt"), "one\n").expect("write");
        git(&repo, &["add", "a.txt"]).expect("git add");
        commit("one").expect("commit");
        let first = resolve(&repo, "HEAD").expect("HEAD");
        std::fs::write(repo.join("a.txt"), "two\n").expect("write");
        commit("two").expect("commit");
        let second = resolve(&repo, "HEAD").expect("HEAD");

        let wt = repo.join("target").join("ab").join("w");
        ensure_worktree(&repo, &wt, &first).expect("created");
        assert_eq!(std::fs::read_to_string(wt.join("a.txt")).ok().as_deref(), Some("one\n"));
        // Clean: reused, and moved when asked for another commit.
        ensure_worktree(&repo, &wt, &second).expect("reused");
        assert_eq!(git(&wt, &["rev-parse", "HEAD"]).ok(), Some(second.clone()));

        std::fs::write(wt.join("a.txt"), "edited\n").expect("write");
        let err = ensure_worktree(&repo, &wt, &second).expect_err("dirty");
        assert!(err.contains("uncommitted changes") && err.contains("a.txt"), "{err}");
        assert!(err.contains("git worktree remove --force"), "{err}");

        git(&wt, &["checkout", "--", "a.txt"]).expect("discard the edit");
        let before = std::fs::metadata(wt.join("a.txt")).and_then(|m| m.modified()).expect("mtime");
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(touch_tracked(&wt), Ok(1));
        let after = std::fs::metadata(wt.join("a.txt")).and_then(|m| m.modified()).expect("mtime");
        assert!(after > before);

        let plain = repo.join("target").join("ab").join("plain");
        std::fs::create_dir_all(&plain).expect("mkdir");
        let err = ensure_worktree(&repo, &plain, &second).expect_err("not a worktree");
        assert!(err.contains("not a git worktree"), "{err}");
        let _ = std::fs::remove_dir_all(&repo);
    }

    #[test]
    fn unknown_revision_is_a_clear_error() {
        let Ok(root) = toplevel(Path::new(env!("CARGO_MANIFEST_DIR"))) else {
            return; // Not built from a git checkout: nothing to resolve in.
        };
        assert!(resolve(&root, "HEAD").is_ok_and(|sha| sha.len() == 40));
        let err = resolve(&root, "no-such-rev-xyz").expect_err("unknown");
        assert!(err.starts_with("unknown revision `no-such-rev-xyz`"), "{err}");
        assert!(resolve(&root, "--all").is_err());
    }
}
