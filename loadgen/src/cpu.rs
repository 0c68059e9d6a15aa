//! CPU accounting. The process figure comes from getrusage(RUSAGE_SELF), which sums every
//! thread of the process: the job threads and io_uring's own kernel workers (iou-wrk,
//! iou-sqp), which live in the process as threads, including those that have exited. The
//! system-wide figure comes from /proc/stat.

pub use record::stats::CpuUsage;
use record::stats::ThreadCpu;

#[derive(Clone, Copy, Debug, Default)]
pub struct CpuSnapshot {
    pub at_ns: u64,
    pub user_ns: u64,
    pub sys_ns: u64,
    /// user+sys of the io_uring worker threads alive at the time.
    pub io_workers_ns: u64,
    pub system_busy_ticks: u64,
    pub system_total_ticks: u64,
}

fn tv_ns(t: libc::timeval) -> u64 {
    t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000
}

fn ticks_ns() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1_000_000_000 / if hz > 0 { hz as u64 } else { 100 }
}

/// The calling thread's CPU so far (getrusage RUSAGE_THREAD), as fio reports per job.
pub fn thread_cpu() -> ThreadCpu {
    // SAFETY: an all-zero rusage is valid, and getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    ThreadCpu {
        user_ns: ns(ru.ru_utime),
        sys_ns: ns(ru.ru_stime),
        ctx: (ru.ru_nvcsw + ru.ru_nivcsw) as u64,
        majf: ru.ru_majflt as u64,
        minf: ru.ru_minflt as u64,
    }
}

/// user+sys of this process's io_uring worker threads, from /proc/self/task/*/stat.
fn io_worker_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let mut ticks = 0;
    for e in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // Format: pid (comm) state ppid ... utime(14) stime(15); comm may contain spaces.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with("iou-") {
            continue;
        }
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let field = |i: usize| rest.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        ticks += field(11) + field(12);
    }
    ticks * ticks_ns()
}

/// (busy, total) ticks of all CPUs from the first line of /proc/stat.
pub fn system_ticks() -> (u64, u64) {
    let Ok(text) = std::fs::read_to_string("/proc/stat") else {
        return (0, 0);
    };
    let Some(line) = text.lines().next() else {
        return (0, 0);
    };
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let total: u64 = f.iter().take(8).sum();
    let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
    (total.saturating_sub(idle), total)
}

pub fn snapshot() -> CpuSnapshot {
    // SAFETY: an all-zero rusage is valid, and getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let (busy, total) = system_ticks();
    CpuSnapshot {
        at_ns: crate::clock::now_ns(),
        user_ns: tv_ns(ru.ru_utime),
        sys_ns: tv_ns(ru.ru_stime),
        io_workers_ns: io_worker_ns(),
        system_busy_ticks: busy,
        system_total_ticks: total,
    }
}

pub fn cpus() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

pub fn usage(a: &CpuSnapshot, b: &CpuSnapshot, ios: u64) -> CpuUsage {
    let window = b.at_ns.saturating_sub(a.at_ns) as f64 / 1e9;
    let user = b.user_ns.saturating_sub(a.user_ns) as f64 / 1e9;
    let sys = b.sys_ns.saturating_sub(a.sys_ns) as f64 / 1e9;
    let total_ticks = b.system_total_ticks.saturating_sub(a.system_total_ticks);
    let busy_ticks = b.system_busy_ticks.saturating_sub(a.system_busy_ticks);
    CpuUsage {
        window_s: window,
        user_s: user,
        sys_s: sys,
        io_workers_s: b.io_workers_ns.saturating_sub(a.io_workers_ns) as f64 / 1e9,
        process_pct: if window > 0.0 {
            100.0 * (user + sys) / window
        } else {
            0.0
        },
        per_io_us: if ios > 0 {
            (user + sys) * 1e6 / ios as f64
        } else {
            0.0
        },
        system_pct: if total_ticks > 0 {
            100.0 * busy_ticks as f64 / total_ticks as f64
        } else {
            0.0
        },
        cpus: cpus(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burning_cpu_shows_up_in_the_process_figure() {
        let a = snapshot();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(200) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let b = snapshot();
        let u = usage(&a, &b, 1000);
        assert!(u.user_s + u.sys_s > 0.05, "{u:?}");
        assert!(u.per_io_us > 50.0, "{u:?}");
        assert!(u.window_s >= 0.2);
        assert!(u.system_pct >= 0.0 && u.system_pct <= 100.0);
    }
}
