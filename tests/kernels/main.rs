//! Tests the `vm` tier (`cargo xtask test --tier vm`) runs inside a qemu guest of every kernel
//! of its matrix, on the guest's own block drivers: NVMe, virtio-blk, AHCI (SATA) and
//! null_blk, NVMe over TCP between two network namespaces, and device-mapper stacks. The guest's `/init` hands its disks over in `STORNET_GUEST_DISKS`; outside a
//! guest these tests fail, and nothing else runs them.

mod drivers;
mod fabrics;
mod net;
mod probes;
mod shared;
mod snapshots;
mod stacked;
