//! Block path ABI: the request layout read from kernel BTF and the per-device counters.

use crate::{assert_size, user_pod};

/// Operation classes stornet reports (`op` label), in this order.
pub const OP_READ: u32 = 0;
pub const OP_WRITE: u32 = 1;
pub const OP_FLUSH: u32 = 2;
pub const OP_DISCARD: u32 = 3;
pub const OP_OTHER: u32 = 4;
pub const OP_COUNT: usize = 5;
pub const OP_NAMES: [&str; OP_COUNT] = ["read", "write", "flush", "discard", "other"];

/// Kernel struct offsets and enum values the block probes need. User space fills this from
/// the running kernel's BTF and passes it as a load-time global; nothing is hard-coded.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockLayout {
    /// `struct request`: `q`, `cmd_flags`, `__data_len`.
    pub rq_q: u32,
    pub rq_cmd_flags: u32,
    pub rq_data_len: u32,
    /// `struct request_queue`: `disk`.
    pub q_disk: u32,
    /// `struct gendisk`: `part0`.
    pub disk_part0: u32,
    /// `struct block_device`: `bd_dev`.
    pub bdev_dev: u32,
    /// `cmd_flags & op_mask` is the `enum req_op` value.
    pub op_mask: u32,
    /// `enum req_op` values of read, write, flush and discard.
    pub req_op_read: u32,
    pub req_op_write: u32,
    pub req_op_flush: u32,
    pub req_op_discard: u32,
    /// Non-zero once user space has filled the layout; the probes do nothing before that.
    pub ready: u32,
}
assert_size!(BlockLayout, 48);

/// Map key: a device (kernel `dev_t`, `MAJOR << 20 | MINOR`) and an op class.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DevOp {
    pub dev: u32,
    pub op: u32,
}
assert_size!(DevOp, 8);

/// Completed IOs and bytes, per CPU; user space sums the CPUs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoCount {
    pub ios: u64,
    pub bytes: u64,
}
assert_size!(IoCount, 16);

user_pod!(BlockLayout, DevOp, IoCount);

/// Largest number of (device, op) pairs the kernel keeps; more are counted as dropped.
pub const MAX_DEV_OPS: u32 = 4096;

/// Splits a kernel `dev_t` into (major, minor).
pub const fn dev_major_minor(dev: u32) -> (u32, u32) {
    (dev >> 20, dev & ((1 << 20) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_t_split() {
        assert_eq!(dev_major_minor((7 << 20) | 3), (7, 3));
        assert_eq!(dev_major_minor((259 << 20) | 1_048_575), (259, 1_048_575));
    }
}
