//! Tests the `vm` tier (`cargo xtask test --tier vm`) runs inside a qemu guest of every kernel
//! of its matrix, on the guest's own block drivers: NVMe, virtio-blk, AHCI (SATA) and
//! null_blk, NVMe over TCP and NBD between two network namespaces, device-mapper and md
//! stacks, and netdevsim's pause-frame statistics. The guest's `/init` hands its disks over
//! in `STORNET_GUEST_DISKS`; outside a guest these tests fail, and nothing else runs them.

mod dispatch;
mod drivers;
mod fabrics;
mod nbd;
mod net;
mod pause;
mod probes;
mod remote;
mod shared;
mod snapshots;
mod stacked;
