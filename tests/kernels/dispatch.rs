//! The dispatch probe attaches on demand. Every request-based queue of the guest keeps
//! statistics (writeback throttling turns them on), so the kernel stamps every dispatch and
//! the probe is detached; NVMe passthrough commands are never stamped. The first ones a
//! device completes go untimed, the agent notices, attaches the probe, and from then on
//! times every passthrough command; when the device goes, the probe is detached again.
//! Counted against the commands issued and, where the kernel counts passthrough IO in
//! `/sys/block/<dev>/stat` (5.10), against that. (5.10 stamps passthrough dispatches too:
//! there each is timed from its stamp and the probe stays detached.)

use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::{AlignedBuf, Disk, LoopDevice, settled};
use stornet_lab::metrics::{Sample, count, sum};
use stornet_lab::netns::HostPair;
use stornet_lab::nvmf::{Controller, Target};

const COMMANDS: u64 = 200;
const SIZE: &str = "stornet_block_io_size_bytes";
const SERVICE: &str = "stornet_block_service_seconds";

/// `struct nvme_passthru_cmd` (include/uapi/linux/nvme_ioctl.h).
#[repr(C)]
#[derive(Default)]
struct PassthruCmd {
    opcode: u8,
    flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    metadata: u64,
    addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
    cdw13: u32,
    cdw14: u32,
    cdw15: u32,
    timeout_ms: u32,
    result: u32,
}
const _: () = assert!(std::mem::size_of::<PassthruCmd>() == 72);

/// `_IO('N', 0x40)` and `_IOWR('N', 0x43, struct nvme_passthru_cmd)`.
const NVME_IOCTL_ID: libc::c_ulong = 0x4e40;
const NVME_IOCTL_IO_CMD: libc::c_ulong = 0xc048_4e43;
const NVME_CMD_READ: u8 = 0x02;

/// `n` NVMe Read commands of 4 KiB through the passthrough ioctl of `dev`.
fn passthrough_reads(dev: &Path, lba_size: u32, n: u64) {
    let f = std::fs::File::open(dev).expect("open the NVMe device");
    // SAFETY: an ioctl without argument on an open fd.
    let nsid = unsafe { libc::ioctl(f.as_raw_fd(), NVME_IOCTL_ID) };
    assert!(nsid > 0, "NVME_IOCTL_ID on {}: {nsid}", dev.display());
    let mut buf = AlignedBuf::new(4096, 0);
    for i in 0..n {
        let lba = i * 4096 / lba_size as u64;
        let mut cmd = PassthruCmd {
            opcode: NVME_CMD_READ,
            nsid: nsid as u32,
            addr: buf.as_mut_slice().as_mut_ptr() as u64,
            data_len: 4096,
            cdw10: lba as u32,
            cdw11: (lba >> 32) as u32,
            cdw12: 4096 / lba_size - 1,
            ..Default::default()
        };
        // SAFETY: cmd is a valid nvme_passthru_cmd whose buffer lives through the call.
        let r = unsafe { libc::ioctl(f.as_raw_fd(), NVME_IOCTL_IO_CMD, &mut cmd) };
        assert_eq!(r, 0, "NVMe read {i} through {}", dev.display());
    }
}

fn attached(s: &[Sample]) -> f64 {
    sum(s, "stornet_probe_attached", &[("probe", "block_issue")])
}

fn no_dispatch_stamp(s: &[Sample]) -> f64 {
    sum(
        s,
        "stornet_block_unrecorded_total",
        &[("reason", "no_dispatch_stamp")],
    )
}

#[test]
fn dispatch_probe_attaches_for_passthrough_and_detaches_with_the_device() {
    let p = HostPair::new("dsp").expect("host pair");
    let backing = LoopDevice::new("dsp", 16 << 20).expect("backing device");
    let target = Target::new(&p.b, p.b_addr(), &backing.dev, "dsp").expect("nvmet-tcp target");
    let ctrl = Controller::connect(&p.a, &target).expect("nvme connect over TCP");
    let name = ctrl.path_device.clone();
    let carrier = Disk::existing(&name).expect("the path device");
    let lba_size: u32 = carrier
        .attr("queue/logical_block_size")
        .expect("logical block size")
        .parse()
        .expect("a number");
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let scrape = || agent.scrape();
    let labels = [("device", name.as_str()), ("op", "other")];

    let (s0, st0) = settled(&scrape, &carrier);
    assert_eq!(
        attached(&s0),
        0.0,
        "the dispatch probe with every queue stamped by the kernel"
    );
    passthrough_reads(&ctrl.dev, lba_size, COMMANDS);
    let (s1, st1) = settled(&scrape, &carrier);
    let sysfs = st1.read_ios - st0.read_ios;
    assert!(
        sysfs == COMMANDS || sysfs == 0,
        "{name}: sysfs reads {sysfs} for {COMMANDS} passthrough reads (all, or none where the \
         kernel does not count passthrough IO)"
    );
    let d = |a: &[Sample], b: &[Sample], m: &str| count(b, m, &labels) - count(a, m, &labels);
    assert_eq!(
        d(&s0, &s1, SIZE),
        COMMANDS as f64,
        "{name}: passthrough counted"
    );
    if d(&s0, &s1, SERVICE) == COMMANDS as f64 {
        // Before 6.x excluded passthrough from queue statistics (5.10), the kernel stamps
        // these too: every one is timed from its stamp, and nothing needs the probe.
        eprintln!("{name}: this kernel stamps passthrough dispatches");
        assert_eq!(
            no_dispatch_stamp(&s1),
            no_dispatch_stamp(&s0),
            "none untimed"
        );
        let s2 = agent.scrape().expect("scrape");
        assert_eq!(
            attached(&s2),
            0.0,
            "the dispatch probe, passthrough stamped"
        );
        drop(ctrl);
        drop(target);
        return;
    }
    assert_eq!(d(&s0, &s1, SERVICE), 0.0, "{name}: untimed while detached");
    assert_eq!(
        no_dispatch_stamp(&s1) - no_dispatch_stamp(&s0),
        COMMANDS as f64,
        "{name}: each counted as missing its dispatch stamp"
    );
    // The scrape that saw them attached the probe (the status may have been read first).
    let s2 = agent.scrape().expect("scrape");
    assert_eq!(
        attached(&s2),
        1.0,
        "the dispatch probe after untimed requests"
    );

    let (s3, st3) = settled(&scrape, &carrier);
    passthrough_reads(&ctrl.dev, lba_size, COMMANDS);
    let (s4, st4) = settled(&scrape, &carrier);
    let sysfs = st4.read_ios - st3.read_ios;
    assert!(
        sysfs == COMMANDS || sysfs == 0,
        "{name}: sysfs reads {sysfs}"
    );
    assert_eq!(
        d(&s3, &s4, SIZE),
        COMMANDS as f64,
        "{name}: passthrough counted"
    );
    assert_eq!(
        d(&s3, &s4, SERVICE),
        COMMANDS as f64,
        "{name}: every passthrough read timed with the probe attached"
    );
    assert_eq!(
        no_dispatch_stamp(&s4) - no_dispatch_stamp(&s3),
        0.0,
        "{name}: none untimed"
    );
    assert_eq!(
        sum(&s4, "stornet_agent_map_entries", &[("map", "BLOCK_STAMPS")]),
        0.0,
        "dispatch stamps left behind"
    );

    // The device goes: nothing needs the probe any more.
    drop(ctrl);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = agent.scrape().expect("scrape");
        if attached(&s) == 0.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the dispatch probe still attached 20 s after {name} went"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(target);
}
