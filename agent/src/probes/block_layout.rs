//! The request layout the block probes read, resolved from the running kernel's BTF.
//!
//! Everything comes from BTF except the one fact older kernels keep only in a preprocessor
//! macro: the bit of `QUEUE_FLAG_STATS`. Its value is in [`MACROS`], by kernel version.

use agent_common::block::{BlockLayout, DISK_NAME_LEN, OFFSET_NONE};
use anyhow::{Context, Result, bail, ensure};

use crate::kernel::btf::{ArgType, Btf};

/// A kernel macro that BTF cannot carry, with the value it has on a range of kernel versions
/// (inclusive). Kernels after the range define it as an enumerator, which BTF carries.
pub struct MacroValue {
    pub name: &'static str,
    pub first: (u32, u32),
    pub last: (u32, u32),
    pub value: i64,
}

/// `QUEUE_FLAG_STATS` was `#define QUEUE_FLAG_STATS 20` in include/linux/blkdev.h until the
/// queue flags became an enum in 6.11 (renumbered; 7 there). Checked on 5.10 and 6.1 by the
/// `vm` test tier: with the bit right, every request the kernel stamps is timed from the
/// kernel's stamp and no probe stamp is left behind.
/// `GENHD_FL_HIDDEN` (include/linux/genhd.h) is `0x0400` on the kernels that name disks
/// without `diskseq`; only those read it (5.15 and later name a hidden disk by its
/// sequence number).
pub const MACROS: &[MacroValue] = &[
    MacroValue {
        name: "QUEUE_FLAG_STATS",
        first: (5, 4),
        last: (6, 10),
        value: 20,
    },
    MacroValue {
        name: "GENHD_FL_HIDDEN",
        first: (5, 4),
        last: (5, 14),
        value: 0x0400,
    },
];

/// The value of `name`: the enumerator where BTF has it, else the macro's value for this
/// kernel version.
pub fn enumerator_or_macro(btf: &Btf, name: &str, version: Option<(u32, u32)>) -> Result<i64> {
    if let Ok(v) = btf.enumerator(name) {
        return Ok(v);
    }
    let m = MACROS
        .iter()
        .find(|m| m.name == name)
        .with_context(|| format!("kernel BTF has no enumerator {name}"))?;
    match version {
        Some(v) if (m.first..=m.last).contains(&v) => Ok(m.value),
        Some((major, minor)) => bail!(
            "kernel BTF has no enumerator {name}, and its macro value is known only for kernels {}.{} to {}.{} (this is {major}.{minor})",
            m.first.0,
            m.first.1,
            m.last.0,
            m.last.1
        ),
        None => bail!("kernel BTF has no enumerator {name}, and the kernel version is unknown"),
    }
}

/// The `enum req_op` value `name` (the enum is `req_opf` before 5.19).
fn req_op(btf: &Btf, name: &str) -> Result<u32> {
    btf.enum_value("req_op", name)
        .or_else(|_| btf.enum_value("req_opf", name))
        .map(|v| v as u32)
}

/// Checks that the block tracepoints pass the request first, and tells how
/// `block_rq_complete` passes its error: `blk_status_t` (1 byte) or `int` (an errno).
fn tracepoints(btf: &Btf) -> Result<bool> {
    let request = ArgType::Ptr("request".into());
    for event in ["block_rq_issue", "block_rq_requeue", "block_rq_complete"] {
        let args = btf.tracepoint_args(event)?;
        ensure!(
            args.first() == Some(&request),
            "tracepoint {event}: the first argument is {:?}, not the request",
            args.first()
        );
    }
    let args = btf.tracepoint_args("block_rq_complete")?;
    match args.get(1) {
        Some(ArgType::Int { size: 1 }) => Ok(false),
        Some(ArgType::Int { size: 4 }) => Ok(true),
        other => bail!("tracepoint block_rq_complete: unexpected error argument {other:?}"),
    }
}

/// Which argument of tracepoint `event` is the bio: 1 after 5.10's request queue, else 0.
fn bio_arg(btf: &Btf, event: &str) -> Result<u32> {
    let args = btf.tracepoint_args(event)?;
    let index = args
        .iter()
        .position(|a| *a == ArgType::Ptr("bio".into()))
        .with_context(|| format!("tracepoint {event} passes no bio: {args:?}"))?;
    ensure!(
        index <= 1,
        "tracepoint {event}: the bio is argument {index}"
    );
    Ok(index as u32)
}

/// Where the issuer probe finds the bio: the request's `bio` offset and the index of the bio
/// among `block_getrq`'s arguments.
pub fn issuer(btf: &Btf) -> Result<(u32, u32)> {
    let rq_bio = btf.offset_of_sized("request", "bio", 8)?;
    Ok((rq_bio, bio_arg(btf, "block_getrq")?))
}

/// What the bio probes read (bio-based devices), into `layout`: the bio's disk and queue, its
/// op, size and status, where `block_bio_queue` passes the bio, and a request's bios.
/// `block_bio_complete` passes (queue, bio) on every kernel.
pub fn bio_layers(btf: &Btf, layout: &mut BlockLayout) -> Result<()> {
    let bio = ArgType::Ptr("bio".into());
    let arg = bio_arg(btf, "block_bio_queue")?;
    let complete = btf.tracepoint_args("block_bio_complete")?;
    ensure!(
        complete.get(1) == Some(&bio),
        "tracepoint block_bio_complete: the second argument is {:?}, not the bio",
        complete.get(1)
    );
    // 5.12 moved the bio's disk behind its block device.
    let (bio_bdev, bdev_disk) = match btf.offset_of_sized("bio", "bi_bdev", 8) {
        Ok(off) => (off, btf.offset_of_sized("block_device", "bd_disk", 8)?),
        Err(_) => (btf.offset_of_sized("bio", "bi_disk", 8)?, OFFSET_NONE),
    };
    *layout = BlockLayout {
        bio_bdev,
        bdev_disk,
        disk_queue: btf.offset_of_sized("gendisk", "queue", 8)?,
        q_mq_ops: btf.offset_of_sized("request_queue", "mq_ops", 8)?,
        bio_opf: btf.offset_of_sized("bio", "bi_opf", 4)?,
        bio_size: btf.offset_of_nested("bio", "bi_iter", "bi_size")?,
        bio_status: btf.offset_of_sized("bio", "bi_status", 1)?,
        bio_next: btf.offset_of_sized("bio", "bi_next", 8)?,
        rq_bio: btf.offset_of_sized("request", "bio", 8)?,
        bio_queue_arg: arg,
        ..*layout
    };
    Ok(())
}

/// Resolves the offsets and enum values the block probes read. Each field is checked for the
/// size the probes load, so a kernel that changed a type fails here, not in the probe.
pub fn layout(btf: &Btf, version: Option<(u32, u32)>) -> Result<BlockLayout> {
    // REQ_OP_BITS is a macro, but the first request flag bit is defined as equal to it.
    let op_bits = btf.enum_value("req_flag_bits", "__REQ_FAILFAST_DEV")?;
    // The probes class ops by the low byte of the flags (`op_classes`).
    ensure!(
        (1..=8).contains(&op_bits),
        "kernel BTF: unexpected REQ_OP_BITS {op_bits} (stornet reads ops of at most 8 bits)"
    );
    let stats_bit = enumerator_or_macro(btf, "QUEUE_FLAG_STATS", version)?;
    ensure!(
        (0..64).contains(&stats_bit),
        "kernel BTF: unexpected QUEUE_FLAG_STATS {stats_bit}"
    );
    let error_is_errno = tracepoints(btf)?;
    // The queue points to its disk since 5.15; before, each request does.
    let (disk, disk_in_rq) = match btf.offset_of_sized("request_queue", "disk", 8) {
        Ok(off) => (off, 0),
        Err(_) => (btf.offset_of_sized("request", "rq_disk", 8)?, 1),
    };
    Ok(BlockLayout {
        rq_q: btf.offset_of_sized("request", "q", 8)?,
        rq_cmd_flags: btf.offset_of_sized("request", "cmd_flags", 4)?,
        rq_data_len: btf.offset_of_sized("request", "__data_len", 4)?,
        rq_start_time_ns: btf.offset_of_sized("request", "start_time_ns", 8)?,
        rq_io_start_time_ns: btf.offset_of_sized("request", "io_start_time_ns", 8)?,
        rq_state: btf.offset_of_sized("request", "state", 4)?,
        rq_tag: btf.offset_of_sized("request", "tag", 4)?,
        rq_mq_hctx: btf.offset_of_sized("request", "mq_hctx", 8)?,
        hctx_queue_num: btf.offset_of_sized("blk_mq_hw_ctx", "queue_num", 4)?,
        q_id: btf.offset_of_sized("request_queue", "id", 4)?,
        q_queue_flags: btf.offset_of_sized("request_queue", "queue_flags", 8)?,
        disk,
        disk_in_rq,
        disk_major: btf.offset_of_sized("gendisk", "major", 4)?,
        disk_first_minor: btf.offset_of_sized("gendisk", "first_minor", 4)?,
        op_mask: (1u32 << op_bits) - 1,
        req_op_read: req_op(btf, "REQ_OP_READ")?,
        req_op_write: req_op(btf, "REQ_OP_WRITE")?,
        req_op_flush: req_op(btf, "REQ_OP_FLUSH")?,
        req_op_discard: req_op(btf, "REQ_OP_DISCARD")?,
        req_op_drv_in: req_op(btf, "REQ_OP_DRV_IN")?,
        req_op_drv_out: req_op(btf, "REQ_OP_DRV_OUT")?,
        queue_flag_stats: stats_bit as u32,
        error_is_errno: error_is_errno as u32,
        mq_rq_idle: btf.enum_value("mq_rq_state", "MQ_RQ_IDLE")? as u32,
        // Only the issuer probe reads these; where they do not resolve it alone stays down.
        rq_bio: OFFSET_NONE,
        getrq_bio_arg: OFFSET_NONE,
        // Only the bio probes read these: see `bio_layers`.
        bio_bdev: OFFSET_NONE,
        bdev_disk: OFFSET_NONE,
        disk_queue: OFFSET_NONE,
        q_mq_ops: OFFSET_NONE,
        bio_opf: OFFSET_NONE,
        bio_size: OFFSET_NONE,
        bio_status: OFFSET_NONE,
        bio_next: OFFSET_NONE,
        bio_queue_arg: OFFSET_NONE,
        ..hidden_disks(btf, version)
    })
}

/// How disks are named where sysfs shows no number for some (hidden NVMe multipath paths):
/// from 5.15, a disk's `dev_t` and sequence number; before, its flags and name, with the
/// hidden bit. Where neither resolves, disks are named by major and first minor only.
fn hidden_disks(btf: &Btf, version: Option<(u32, u32)>) -> BlockLayout {
    let none = BlockLayout {
        disk_part0: OFFSET_NONE,
        bdev_devt: OFFSET_NONE,
        disk_seq: OFFSET_NONE,
        disk_flags: OFFSET_NONE,
        hidden_flag: 0,
        disk_name: OFFSET_NONE,
        ..BlockLayout::default()
    };
    let by_seq = || -> Result<BlockLayout> {
        Ok(BlockLayout {
            disk_part0: btf.offset_of_sized("gendisk", "part0", 8)?,
            bdev_devt: btf.offset_of_nested("block_device", "bd_device", "devt")?,
            disk_seq: btf.offset_of_sized("gendisk", "diskseq", 8)?,
            ..none
        })
    };
    let by_name = || -> Result<BlockLayout> {
        let flag = enumerator_or_macro(btf, "GENHD_FL_HIDDEN", version)?;
        ensure!(
            flag > 0 && flag <= u32::MAX as i64,
            "kernel BTF: unexpected GENHD_FL_HIDDEN {flag}"
        );
        Ok(BlockLayout {
            disk_flags: btf.offset_of_sized("gendisk", "flags", 4)?,
            hidden_flag: flag as u32,
            disk_name: btf.offset_of_sized("gendisk", "disk_name", DISK_NAME_LEN as u32)?,
            ..none
        })
    };
    by_seq().or_else(|_| by_name()).unwrap_or(none)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::btf::testing::Builder;

    /// How a kernel generation lays out what the block probes read.
    #[derive(Clone, Copy)]
    struct Kernel {
        /// 6.11 and later: `QUEUE_FLAG_STATS` is an enumerator.
        stats_enumerator: bool,
        /// 5.15 and later: `request_queue.disk`; before, `request.rq_disk`.
        queue_disk: bool,
        /// 5.17 and later: `block_rq_complete` passes a `blk_status_t`; before, an `int`.
        status_arg: bool,
        /// 5.19 and later: `enum req_op`; before, `enum req_opf`.
        req_op: bool,
    }

    const NEW: Kernel = Kernel {
        stats_enumerator: true,
        queue_disk: true,
        status_arg: true,
        req_op: true,
    };
    const OLD: Kernel = Kernel {
        stats_enumerator: false,
        queue_disk: false,
        status_arg: false,
        req_op: false,
    };

    fn kernel_like(k: Kernel) -> Vec<u8> {
        let mut b = Builder::new();
        let u8_t = b.int("unsigned char", 1);
        let u32_t = b.int("unsigned int", 4);
        let u64_t = b.int("long long unsigned int", 8);
        let int_t = b.int("int", 4);
        let ptr = b.ptr(0);
        let state = b.enumeration("mq_rq_state", &[("MQ_RQ_IDLE", 0), ("MQ_RQ_IN_FLIGHT", 1)]);
        let times = b.composite(
            false,
            "",
            16,
            &[("start_time_ns", u64_t, 0), ("io_start_time_ns", u64_t, 64)],
        );
        let mut request = vec![
            ("q", ptr, 0),
            ("cmd_flags", u32_t, 64),
            ("__data_len", u32_t, 96),
            ("", times, 128),
            ("state", state, 256),
            ("tag", int_t, 288),
            ("mq_hctx", ptr, 320),
        ];
        if !k.queue_disk {
            request.push(("rq_disk", ptr, 384));
        }
        request.push(("bio", ptr, 448));
        let rq = b.composite(false, "request", 64, &request);
        b.composite(false, "blk_mq_hw_ctx", 16, &[("queue_num", u32_t, 64)]);
        let mut queue = vec![
            ("queue_flags", u64_t, 0),
            ("id", int_t, 128),
            ("mq_ops", ptr, 192),
        ];
        if k.queue_disk {
            queue.push(("disk", ptr, 64));
        }
        b.composite(false, "request_queue", 32, &queue);
        let name_t = b.array(u8_t, 32);
        let mut disk = vec![
            ("major", int_t, 0),
            ("first_minor", int_t, 32),
            ("queue", ptr, 192),
            ("flags", int_t, 256),
            ("disk_name", name_t, 288),
        ];
        if k.queue_disk {
            // 5.15 and later: part0 is a pointer, and disks have a sequence number.
            disk.extend([("part0", ptr, 64), ("diskseq", u64_t, 128)]);
            let device = b.composite(false, "device", 32, &[("devt", u32_t, 96)]);
            b.composite(
                false,
                "block_device",
                64,
                &[
                    ("bd_dev", u32_t, 32),
                    ("bd_device", device, 128),
                    ("bd_disk", ptr, 384),
                ],
            );
        }
        b.composite(false, "gendisk", 68, &disk);
        b.enumeration(
            if k.req_op { "req_op" } else { "req_opf" },
            &[
                ("REQ_OP_READ", 0),
                ("REQ_OP_WRITE", 1),
                ("REQ_OP_FLUSH", 2),
                ("REQ_OP_DISCARD", 3),
                ("REQ_OP_DRV_IN", 34),
                ("REQ_OP_DRV_OUT", 35),
            ],
        );
        b.enumeration("req_flag_bits", &[("__REQ_FAILFAST_DEV", 8)]);
        if k.stats_enumerator {
            b.enumeration("", &[("QUEUE_FLAG_DYING", 0), ("QUEUE_FLAG_STATS", 7)]);
        }
        let void_ptr = b.ptr(0);
        let rq_ptr = b.ptr(rq);
        let status = b.typedef("blk_status_t", u8_t);
        let error = if k.status_arg { status } else { int_t };
        let iter = b.composite(
            false,
            "bvec_iter",
            16,
            &[("bi_sector", u64_t, 0), ("bi_size", u32_t, 64)],
        );
        // 5.12 and later: the bio's block device; before, its disk.
        let dev = if k.queue_disk { "bi_bdev" } else { "bi_disk" };
        let bio = b.composite(
            false,
            "bio",
            40,
            &[
                ("bi_next", ptr, 0),
                (dev, ptr, 64),
                ("bi_opf", u32_t, 128),
                ("bi_status", status, 160),
                ("bi_iter", iter, 192),
            ],
        );
        let bio_ptr = b.ptr(bio);
        // 5.10: (struct request_queue *, struct bio *, int); later (struct bio *).
        let (getrq, bio_queue) = if k.status_arg {
            (vec![bio_ptr], vec![bio_ptr])
        } else {
            (vec![ptr, bio_ptr, int_t], vec![ptr, bio_ptr])
        };
        for (event, args) in [
            ("block_rq_issue", vec![rq_ptr]),
            ("block_rq_requeue", vec![rq_ptr]),
            ("block_rq_complete", vec![rq_ptr, error, u32_t]),
            ("block_getrq", getrq),
            ("block_bio_queue", bio_queue),
            ("block_bio_complete", vec![ptr, bio_ptr]),
        ] {
            let mut params = vec![void_ptr];
            params.extend(args);
            let fp = b.func_proto(&params);
            let p = b.ptr(fp);
            b.typedef(&format!("btf_trace_{event}"), p);
        }
        b.build()
    }

    #[test]
    fn resolves_offsets_and_values() {
        let btf = Btf::parse(&kernel_like(NEW)).unwrap();
        let l = layout(&btf, Some((6, 18))).unwrap();
        assert_eq!((l.rq_q, l.rq_cmd_flags, l.rq_data_len), (0, 8, 12), "{l:?}");
        assert_eq!(
            (l.rq_start_time_ns, l.rq_io_start_time_ns, l.rq_state),
            (16, 24, 32)
        );
        assert_eq!((l.rq_tag, l.rq_mq_hctx, l.hctx_queue_num), (36, 40, 8));
        assert_eq!((l.q_queue_flags, l.q_id), (0, 16));
        assert_eq!((l.disk, l.disk_in_rq), (8, 0));
        assert_eq!((l.disk_major, l.disk_first_minor), (0, 4));
        assert_eq!(l.op_mask, 0xff);
        assert_eq!((l.req_op_drv_in, l.req_op_drv_out), (34, 35));
        assert_eq!((l.queue_flag_stats, l.mq_rq_idle), (7, 0));
        assert_eq!(l.error_is_errno, 0);
    }

    /// 5.10 and 6.1: the stats bit from the macro table, the disk from the request, the
    /// error as an errno, `enum req_opf`.
    #[test]
    fn older_kernels_resolve_with_the_macro_table() {
        let btf = Btf::parse(&kernel_like(OLD)).unwrap();
        let l = layout(&btf, Some((5, 10))).unwrap();
        assert_eq!(l.queue_flag_stats, 20);
        assert_eq!((l.disk, l.disk_in_rq), (48, 1));
        assert_eq!(l.error_is_errno, 1);
        assert_eq!((l.req_op_read, l.req_op_write, l.req_op_flush), (0, 1, 2));
        let mixed = Kernel {
            queue_disk: true,
            status_arg: true,
            req_op: true,
            ..OLD
        };
        let btf = Btf::parse(&kernel_like(mixed)).unwrap();
        let l = layout(&btf, Some((6, 1))).unwrap();
        assert_eq!(
            (l.queue_flag_stats, l.disk_in_rq, l.error_is_errno),
            (20, 0, 0)
        );
    }

    #[test]
    fn disks_are_named_by_their_part0_where_hidden_ones_have_a_sequence() {
        let btf = Btf::parse(&kernel_like(NEW)).unwrap();
        let l = layout(&btf, Some((6, 12))).unwrap();
        assert_eq!((l.disk_part0, l.bdev_devt, l.disk_seq), (8, 16 + 12, 16));
        assert_eq!(l.hidden_flag, 0, "no need for the name");
        // Before 5.15: no sequence number; a hidden disk is named by its name, with the
        // flag's value from the macro table.
        let btf = Btf::parse(&kernel_like(OLD)).unwrap();
        let l = layout(&btf, Some((5, 10))).unwrap();
        assert_eq!(
            (l.disk_part0, l.bdev_devt, l.disk_seq),
            (OFFSET_NONE, OFFSET_NONE, OFFSET_NONE)
        );
        assert_eq!((l.disk_flags, l.hidden_flag, l.disk_name), (32, 0x400, 36));
        // Outside the macro's range: major and first minor only.
        assert_eq!(hidden_disks(&btf, Some((5, 15))).hidden_flag, 0);
        assert_eq!(hidden_disks(&btf, None).hidden_flag, 0);
    }

    #[test]
    fn the_issuer_probe_finds_the_bio_on_old_and_new_kernels() {
        let btf = Btf::parse(&kernel_like(NEW)).unwrap();
        assert_eq!(issuer(&btf).unwrap(), (56, 0));
        let btf = Btf::parse(&kernel_like(OLD)).unwrap();
        assert_eq!(issuer(&btf).unwrap(), (56, 1));
        // The other probes do not need it.
        assert_eq!(layout(&btf, Some((5, 10))).unwrap().rq_bio, OFFSET_NONE);
    }

    #[test]
    fn the_bio_probes_find_the_disk_behind_the_bio_or_in_it() {
        let btf = Btf::parse(&kernel_like(NEW)).unwrap();
        let mut l = layout(&btf, Some((6, 12))).unwrap();
        assert_eq!(l.bio_bdev, OFFSET_NONE, "resolved only for the bio probes");
        bio_layers(&btf, &mut l).unwrap();
        assert_eq!((l.bio_bdev, l.bdev_disk, l.bio_queue_arg), (8, 48, 0));
        assert_eq!((l.disk_queue, l.q_mq_ops), (24, 24));
        assert_eq!((l.bio_opf, l.bio_status, l.bio_size), (16, 20, 24 + 8));
        assert_eq!((l.rq_bio, l.bio_next), (56, 0));
        // Before 5.12: the disk is in the bio, and the bio follows the queue.
        let btf = Btf::parse(&kernel_like(OLD)).unwrap();
        let mut l = layout(&btf, Some((5, 10))).unwrap();
        bio_layers(&btf, &mut l).unwrap();
        assert_eq!(
            (l.bio_bdev, l.bdev_disk, l.bio_queue_arg),
            (8, OFFSET_NONE, 1)
        );
        // The request probes' part is left as it was.
        assert_eq!((l.disk, l.disk_in_rq), (48, 1));
    }

    /// Outside the range the macro's value is known for, the probes stay down with a reason.
    #[test]
    fn a_missing_enumerator_outside_the_table_is_an_error() {
        let btf = Btf::parse(&kernel_like(OLD)).unwrap();
        for version in [Some((6, 11)), Some((4, 19)), None] {
            let err = format!("{:#}", layout(&btf, version).unwrap_err());
            assert!(err.contains("QUEUE_FLAG_STATS"), "{err}");
        }
        // An enumerator in BTF wins over the table.
        let btf = Btf::parse(&kernel_like(NEW)).unwrap();
        assert_eq!(layout(&btf, Some((6, 1))).unwrap().queue_flag_stats, 7);
    }

    #[test]
    fn the_running_kernel_resolves() {
        // Only where the kernel exposes BTF (every supported kernel does).
        if let Ok(btf) = crate::kernel::btf::KernelBtf::read().btf {
            let l = layout(&btf, crate::kernel::version()).unwrap();
            assert_ne!(l.rq_io_start_time_ns, l.rq_start_time_ns);
        }
    }
}
