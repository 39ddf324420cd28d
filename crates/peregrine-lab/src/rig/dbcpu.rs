//! PostgreSQL's CPU time, for runs whose server works on a database that
//! shares the machine (HttpArena's async-db and crud): the bench reports it
//! beside the server's, since a server can look cheap by pushing work into
//! the database.
//!
//! PostgreSQL is one postmaster and a process per connection and per
//! background task, all its children. The postmaster is found once by
//! asking the database which process serves the lab's own connection
//! (`pg_backend_pid()`) and taking that backend's parent. Its CPU time at a
//! moment is the postmaster's own utime + stime, plus the cutime + cstime of
//! the children it has already reaped, plus utime + stime of the children
//! alive now. Across a measured window the difference of two such readings
//! counts every child once, also one that exited in between (its time moves
//! from the live sum into cutime/cstime when the postmaster reaps it).
//!
//! Everything the cluster does is counted, other clients' work included; on
//! a quiet machine that is the benchmark's own load. A backend caught
//! between its exit and the postmaster's reaping shows no time for that
//! moment; pooled connections live through the window, so that is at most a
//! few reconnecting backends at its edges.

use super::procfs::{self, CpuTicks};
use tokio_postgres::NoTls;

/// A PostgreSQL cluster running on this machine, by its postmaster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Postmaster {
    pub pid: u32,
}

impl Postmaster {
    /// Finds the postmaster of the cluster `database_url` points at. Fails
    /// when the database cannot be reached or runs elsewhere (its backend's
    /// process id is not on this machine).
    pub fn find(database_url: &str) -> Result<Postmaster, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        let backend: i32 = runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(database_url, NoTls)
                .await
                .map_err(|e| format!("cannot connect to the database: {e}"))?;
            // The connection task only makes progress inside `block_on`,
            // and is dropped with the runtime.
            tokio::spawn(connection);
            let row = client
                .query_one("SELECT pg_backend_pid()", &[])
                .await
                .map_err(|e| format!("SELECT pg_backend_pid(): {e}"))?;
            row.try_get::<_, i32>(0).map_err(|e| format!("pg_backend_pid(): {e}"))
        })?;
        let backend = u32::try_from(backend).map_err(|_| format!("pg_backend_pid() is {backend}"))?;
        let stat = procfs::read_proc_stat(backend)
            .map_err(|e| format!("the database's backend {backend} is not a process here ({e})"))?;
        Ok(Postmaster { pid: stat.ppid })
    }

    /// The cluster's CPU time so far, in clock ticks (see the module doc).
    pub fn cpu_ticks(&self) -> Result<u64, String> {
        let own = procfs::read_proc_stat(self.pid).map_err(|e| format!("the postmaster: {e}"))?;
        let live: u64 = procfs::children(self.pid)
            .into_iter()
            .filter_map(|pid| procfs::read_proc_stat(pid).ok())
            .map(|s| s.cpu.total())
            .sum();
        Ok(own.cpu.total() + CpuTicks::total(own.reaped_children) + live)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_database_is_an_error() {
        let err = Postmaster::find("postgres://nobody:x@127.0.0.1:1/none?connect_timeout=2")
            .expect_err("nothing listens on port 1");
        assert!(err.contains("cannot connect"), "{err}");
    }

    /// Against the cluster `scripts/test` starts (DATABASE_URL): the
    /// postmaster is found, and a query's work shows in its CPU time.
    #[test]
    fn finds_the_test_clusters_postmaster() {
        let Some(url) = std::env::var("DATABASE_URL").ok().filter(|u| u.starts_with("postgres")) else {
            eprintln!("skipped: DATABASE_URL (postgres://...) not set; scripts/test sets it");
            return;
        };
        let postmaster = Postmaster::find(&url).expect("the cluster runs here");
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", postmaster.pid)).expect("comm");
        assert_eq!(comm.trim(), "postgres", "pid {} is the postmaster", postmaster.pid);
        let before = postmaster.cpu_ticks().expect("reads");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(&url, NoTls).await.expect("connects");
            tokio::spawn(connection);
            // About half a second of one backend's CPU time.
            client.query_one("SELECT count(*) FROM generate_series(1, 5000000)", &[]).await.expect("query");
        });
        let alive = postmaster.cpu_ticks().expect("reads");
        drop(runtime);
        // The backend exits once the connection is gone, and the
        // postmaster reaps it: its time moves into cutime.
        std::thread::sleep(std::time::Duration::from_millis(500));
        let after = postmaster.cpu_ticks().expect("reads");
        assert!(alive >= before + 5, "the live backend's query time is counted: {before} -> {alive} ticks");
        assert!(after >= alive, "the reaped backend's time stays counted: {alive} -> {after} ticks");
    }

    #[test]
    fn counts_a_process_tree() {
        // This test process as the "postmaster": its CPU time covers its
        // own, and a child that has run and been reaped adds to it.
        let me = Postmaster { pid: std::process::id() };
        let reaped = || procfs::read_proc_stat(me.pid).expect("own stat").reaped_children.total();
        let (before, reaped_before) = (me.cpu_ticks().expect("own stat"), reaped());
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .status()
            .expect("sh runs");
        assert!(status.success());
        let (after, child) = (me.cpu_ticks().expect("own stat"), reaped() - reaped_before);
        assert!(child > 0, "the busy child used no CPU time");
        assert!(after >= before + child, "the reaped child's {child} ticks are counted: {before} -> {after}");
    }
}
