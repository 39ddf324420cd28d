//! `peregrine-lab ab`: the workspace's criterion micro-benchmarks at two git
//! revisions, side by side.
//!
//! ```text
//! peregrine-lab ab --base main~1
//! peregrine-lab ab --base v0.1.0 --head HEAD --bench http --filter '^parse/'
//! ```
//!
//! For each revision (`--base`, then `--head`, default `HEAD`: committed
//! work only, so commit or stash what you want measured) it
//!
//! 1. makes a detached git worktree at `target/ab/<commit>` (kept for the
//!    next run; reused only if clean, see `git`);
//! 2. runs there `cargo bench -p <package> --bench <name> -- --save-baseline
//!    <base|head> --noplot [FILTER]`, with `CARGO_TARGET_DIR=target/ab/target`
//!    (both revisions share compiled dependencies, and the main `target/`
//!    is left alone; the worktree's files are touched first so cargo
//!    rebuilds the workspace's own crates, see `git::touch_tracked`) and `CRITERION_HOME=target/ab/criterion/<base|head>`
//!    (emptied first, so only this run's benchmarks are read). Output goes
//!    to `target/ab/<base|head>.log`;
//! 3. reads criterion's `estimates.json` of every benchmark (see
//!    `criterion`).
//!
//! It then prints one table per benchmark group: base and head mean time
//! per iteration ± half the confidence interval, head/base, and `noise`
//! when the intervals overlap (see `table`).
//!
//! ## Allocations per iteration: the `alloc.json` protocol
//!
//! Criterion measures time only. A bench binary that counts allocations
//! (for instance with a counting `#[global_allocator]` wrapping the system
//! allocator) reports them to `ab` by writing one small JSON file per
//! benchmark:
//!
//! ```text
//! $CRITERION_HOME/<group>/<function>/alloc.json
//! {"bytes_per_iter": 48, "allocs_per_iter": 1}
//! ```
//!
//! - `bytes_per_iter` (required): bytes allocated per iteration of the
//!   measured routine; `allocs_per_iter` (optional): allocation calls. Both
//!   are numbers and may be fractional (total over N iterations / N).
//! - Measure outside criterion's timed loop: run the routine N times
//!   (N ≥ 1000) between two reads of the counter, before or after
//!   `bench_function`, so counting cannot disturb the timing.
//! - The directory is criterion's own for the benchmark (`directory_name` in
//!   its `benchmark.json`); for ids made of ASCII letters, digits, `_` and
//!   `-`, as all of `benches/http.rs`'s are, it is `<group>/<function>`
//!   verbatim. Create it if it does not exist yet.
//! - `ab` always sets `CRITERION_HOME`. Without it (a plain `cargo bench`)
//!   the bench may write to `$CARGO_TARGET_DIR/criterion` or skip the file.
//!
//! A benchmark without the file shows `-` in the allocation column; a file
//! that does not parse is an error naming it.

mod criterion;
mod git;
mod table;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct AbArgs {
    /// The revision to compare against (any git revision: a branch, tag,
    /// hash, `main~3`).
    #[arg(long)]
    base: String,
    /// The revision being evaluated (committed work only).
    #[arg(long, default_value = "HEAD")]
    head: String,
    /// The criterion bench target to run.
    #[arg(long, default_value = "http")]
    bench: String,
    /// The package whose bench target it is.
    #[arg(long, default_value = "peregrine")]
    package: String,
    /// Only benchmarks whose id matches this regular expression (passed to
    /// criterion as its filter).
    #[arg(long, value_name = "REGEX")]
    filter: Option<String>,
}

pub fn run(args: AbArgs) -> ExitCode {
    match ab(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ab: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One of the two revisions.
struct Side {
    /// `base` or `head`: the baseline name and the log and results names.
    role: &'static str,
    /// The revision as given.
    rev: String,
    sha: String,
}

impl Side {
    fn short(&self) -> &str {
        &self.sha[..self.sha.len().min(10)]
    }

    /// The column label: `main~1 (0123456789)`, or only the hash when the
    /// revision was given as one.
    fn label(&self) -> String {
        if self.sha.starts_with(&self.rev) {
            self.short().to_string()
        } else {
            format!("{} ({})", self.rev, self.short())
        }
    }
}

fn ab(args: &AbArgs) -> Result<(), String> {
    let cwd = std::env::current_dir().map_err(|e| format!("cannot find the current directory: {e}"))?;
    let root = git::toplevel(&cwd)?;
    let sides = [
        Side { role: "base", rev: args.base.clone(), sha: git::resolve(&root, &args.base)? },
        Side { role: "head", rev: args.head.clone(), sha: git::resolve(&root, &args.head)? },
    ];
    if sides[0].sha == sides[1].sha {
        println!("ab: base and head are the same commit; the table shows run-to-run noise");
    }
    let ab_dir = root.join("target").join("ab");
    std::fs::create_dir_all(&ab_dir).map_err(|e| format!("cannot create {}: {e}", ab_dir.display()))?;
    // Make both worktrees before the long builds, so a collision is
    // reported at once rather than after the first revision's benchmarks.
    for side in &sides {
        git::ensure_worktree(&root, &worktree(&ab_dir, side), &side.sha)?;
    }

    let mut results = Vec::new();
    for side in &sides {
        results.push(bench_side(args, &ab_dir, side)?);
    }
    let groups = table::pair(&results[0], &results[1]);
    println!();
    print!("{}", table::render(&groups, &sides[0].label(), &sides[1].label()));
    let without_alloc = groups.iter().flat_map(|(_, rows)| rows).all(|r| table::alloc_cell(r) == "-");
    if without_alloc {
        println!("(no alloc.json files: the bench does not report allocations yet; see `ab` docs)");
    }
    Ok(())
}

fn worktree(ab_dir: &Path, side: &Side) -> PathBuf {
    ab_dir.join(side.short())
}

/// Builds and runs the benchmarks at one revision and reads the results.
fn bench_side(args: &AbArgs, ab_dir: &Path, side: &Side) -> Result<Vec<criterion::BenchResult>, String> {
    let home = ab_dir.join("criterion").join(side.role);
    match std::fs::remove_dir_all(&home) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot empty {}: {e}", home.display())),
    }
    let log = ab_dir.join(format!("{}.log", side.role));
    let argv = cargo_argv(args, side.role);
    // When run through cargo, use the same cargo.
    let cargo = std::env::var_os("CARGO").map_or(PathBuf::from("cargo"), PathBuf::from);
    let mut full = vec![cargo.display().to_string()];
    full.extend(argv);
    println!(
        "ab: {} = {}: building and running `{}` (log: {})",
        side.role,
        side.label(),
        full.join(" "),
        log.display()
    );
    let started = Instant::now();
    let dir = worktree(ab_dir, side);
    git::touch_tracked(&dir)?;
    git::run_logged(&git::Logged {
        argv: full,
        dir: &dir,
        env: vec![
            ("CARGO_TARGET_DIR".into(), ab_dir.join("target")),
            ("CRITERION_HOME".into(), home.clone()),
        ],
        log: &log,
    })
    .map_err(|e| format!("at {} ({}): {e}", side.role, side.label()))?;
    let results = criterion::collect(&home, side.role)?;
    println!("ab: {}: {} benchmark(s) in {} s", side.role, results.len(), started.elapsed().as_secs());
    if results.is_empty() {
        return Err(format!(
            "cargo bench at {} ({}) left no criterion results in {}; does --filter match any \
             benchmark? (see {})",
            side.role,
            side.label(),
            home.display(),
            log.display()
        ));
    }
    Ok(results)
}

/// `bench -p PKG --bench NAME -- --save-baseline ROLE --noplot [FILTER]`.
fn cargo_argv(args: &AbArgs, role: &str) -> Vec<String> {
    let mut argv: Vec<String> =
        ["bench", "-p", &args.package, "--bench", &args.bench, "--", "--save-baseline", role, "--noplot"]
            .map(String::from)
            .into();
    if let Some(filter) = &args.filter {
        argv.push(filter.clone());
    }
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_command_line() {
        let args = AbArgs {
            base: "main".into(),
            head: "HEAD".into(),
            bench: "http".into(),
            package: "peregrine".into(),
            filter: Some("^parse/".into()),
        };
        assert_eq!(
            cargo_argv(&args, "base").join(" "),
            "bench -p peregrine --bench http -- --save-baseline base --noplot ^parse/"
        );
    }

    #[test]
    fn labels_name_revision_and_hash() {
        let sha = "0123456789abcdef0123456789abcdef01234567".to_string();
        let side = Side { role: "base", rev: "main~1".into(), sha: sha.clone() };
        assert_eq!(side.label(), "main~1 (0123456789)");
        let side = Side { role: "base", rev: "0123456".into(), sha };
        assert_eq!(side.label(), "0123456789");
    }
}
