//! Which probes may run: one bit per probe in the `PROBES_READY` load-time global. User space
//! sets a probe's bit when everything it reads from the kernel (struct offsets, tracepoint
//! arguments) resolved from BTF; a probe whose bit is clear returns at once.

/// The name of the global, as user space overrides it at load.
pub const GLOBAL: &str = "PROBES_READY";

pub const BLOCK_ISSUE: u32 = 1;
pub const BLOCK_COMPLETION: u32 = 1 << 1;
pub const BLOCK_REQUEUE: u32 = 1 << 2;
pub const TCP_RETRANSMIT: u32 = 1 << 3;
pub const TCP_RETRANSMIT_SYNACK: u32 = 1 << 4;
pub const SKB_DROP: u32 = 1 << 5;
pub const SOCK_EXCEED_BUF_LIMIT: u32 = 1 << 6;
pub const SOCK_RCVQUEUE_FULL: u32 = 1 << 7;
pub const BLOCK_ISSUER: u32 = 1 << 8;
pub const BLOCK_BIO_QUEUE: u32 = 1 << 9;
pub const BLOCK_BIO_COMPLETION: u32 = 1 << 10;
