//! The agent under faults: stopped with SIGSTOP while IO goes on, it resumes with counts that
//! include what happened while it was stopped (the kernel side never stopped counting).

use std::time::{Duration, Instant};

use anyhow::ensure;
use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{LoopDevice, direct_writes};
use stornet_lab::metrics::http_get;
use stornet_lab::privilege::require_root;

use crate::block_util::{count, settled, up_to_three_times};

/// SIGSTOP for 10 s with 2000 writes to a loop device in between, then SIGCONT: the agent
/// answers again and its write count moved by exactly the delta of /sys/block/loopX/stat.
#[test]
fn a_stopped_agent_resumes_with_exact_counts() {
    if !require_root("a_stopped_agent_resumes_with_exact_counts") {
        return;
    }
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let disk = LoopDevice::new("sigstop", 64 << 20).expect("loop device");
    let scrape = || agent.scrape();
    let labels = [("device", disk.name.as_str()), ("op", "write")];
    let signal = |sig| {
        // SAFETY: kill(2) on our own running child.
        unsafe { libc::kill(agent.pid() as i32, sig) };
    };
    up_to_three_times("a_stopped_agent_resumes_with_exact_counts", || {
        let (before, stat0) = settled(&scrape, &disk);
        signal(libc::SIGSTOP);
        let stopped = Instant::now();
        let io = direct_writes(&disk.dev, 2000, 4096);
        // A scrape sent now waits in the socket until the agent runs again.
        let addr = agent.addr;
        let pending = std::thread::spawn(move || http_get(addr, "/-/healthy"));
        std::thread::sleep(Duration::from_secs(10).saturating_sub(stopped.elapsed()));
        signal(libc::SIGCONT);
        io?;
        let answered = pending.join().unwrap();
        ensure!(
            matches!(answered, Ok((200, _))),
            "the scrape sent while stopped: {answered:?}"
        );
        let (after, stat1) = settled(&scrape, &disk);
        let sys = stat1.write_ios - stat0.write_ios;
        let got = (count(&after, "stornet_block_io_size_bytes", &labels)
            - count(&before, "stornet_block_io_size_bytes", &labels)) as u64;
        ensure!(
            sys == 2000,
            "/sys/block/{}/stat write delta {sys}",
            disk.name
        );
        ensure!(got == sys, "agent counted {got} writes, sysfs {sys}");
        Ok(())
    });
}
