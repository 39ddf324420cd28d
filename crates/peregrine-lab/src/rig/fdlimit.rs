//! The open-files limit. Load generators and servers started from the lab
//! inherit it, and sockets beyond the common default of 1,024 need it
//! raised; `bench` and `stress` both call [`raise`] before opening many.

/// Raises this process's soft open-files limit to its hard one and returns
/// the soft limit now in force. wrk and servers started from here inherit
/// it: sockets beyond the common default of 1,024 need it.
pub fn raise() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read or fill the one valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit.rlim_cur = limit.rlim_max;
            }
        }
    }
    limit.rlim_cur
}
