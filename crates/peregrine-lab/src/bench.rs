//! Side-by-side benchmarks (placeholder until the bench module lands).
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct BenchArgs {}

pub fn run(_args: BenchArgs) -> ExitCode {
    ExitCode::FAILURE
}
