//! CPU pinning of the lab's own threads. Server and wrk processes are
//! pinned with `taskset` where they are started ([`super::server`],
//! [`super::wrk`]); the lab's in-process clients (stress scenarios' tokio
//! runtimes) pin themselves with [`pin_self`] so they share the load CPU
//! instead of disturbing the server's.

/// Pins the calling thread to `cpus` (a comma-separated CPU list; entries
/// that are not numbers are ignored, and an empty list leaves it unpinned).
pub fn pin_self(cpus: &str) {
    // SAFETY: a zeroed cpu_set_t filled with CPU_SET and passed by pointer
    // to sched_setaffinity for this thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let mut any = false;
        for cpu in cpus.split(',').filter_map(|c| c.trim().parse::<usize>().ok()) {
            libc::CPU_SET(cpu, &mut set);
            any = true;
        }
        if any {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}
