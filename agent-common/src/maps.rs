//! The eBPF maps' names: the kernel side names each `#[map]` static so (`agent-ebpf` checks
//! it at compile time) and user space takes the maps by these names.

pub const BLOCK_STATS: &str = "BLOCK_STATS";
pub const BLOCK_FAST: &str = "BLOCK_FAST";
pub const BLOCK_ZERO: &str = "BLOCK_ZERO";
pub const BLOCK_QUEUES: &str = "BLOCK_QUEUES";
pub const BLOCK_MARKS: &str = "BLOCK_MARKS";
pub const BLOCK_STAMPS: &str = "BLOCK_STAMPS";
pub const BLOCK_ERRORS: &str = "BLOCK_ERRORS";
pub const BLOCK_COUNTERS: &str = "BLOCK_COUNTERS";
pub const BLOCK_ISSUERS: &str = "BLOCK_ISSUERS";
pub const BLOCK_CGROUPS: &str = "BLOCK_CGROUPS";
pub const BLOCK_BIOS: &str = "BLOCK_BIOS";

pub const NET_COUNTERS: &str = "NET_COUNTERS";
pub const NET_RETRANSMITS: &str = "NET_RETRANSMITS";
pub const NET_CGROUP_RETRANSMITS: &str = "NET_CGROUP_RETRANSMITS";
pub const NET_DROP_REASONS: &str = "NET_DROP_REASONS";
pub const NET_UNSPECIFIED_DROPS: &str = "NET_UNSPECIFIED_DROPS";

/// The maps of the block path: every block probe uses them.
pub const BLOCK: &[&str] = &[
    BLOCK_STATS,
    BLOCK_FAST,
    BLOCK_ZERO,
    BLOCK_QUEUES,
    BLOCK_MARKS,
    BLOCK_STAMPS,
    BLOCK_ERRORS,
    BLOCK_COUNTERS,
    BLOCK_ISSUERS,
    BLOCK_CGROUPS,
    BLOCK_BIOS,
];

/// String equality in a constant, for the kernel side's compile-time check of its names.
pub const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
