//! The request layout the block probes read, resolved from the running kernel's BTF.

use agent_common::block::BlockLayout;
use anyhow::{Result, ensure};

use crate::btf::Btf;

/// Resolves the offsets and enum values the block probes read. Each field is checked for the
/// size the probes load, so a kernel that changed a type fails here, not in the probe.
pub fn layout(btf: &Btf) -> Result<BlockLayout> {
    let req_op = |name: &str| -> Result<u32> { Ok(btf.enum_value("req_op", name)? as u32) };
    // REQ_OP_BITS is a macro, but the first request flag bit is defined as equal to it.
    let op_bits = btf.enum_value("req_flag_bits", "__REQ_FAILFAST_DEV")?;
    ensure!(
        (1..32).contains(&op_bits),
        "kernel BTF: unexpected REQ_OP_BITS {op_bits}"
    );
    let stats_bit = btf.enumerator("QUEUE_FLAG_STATS")?;
    ensure!(
        (0..64).contains(&stats_bit),
        "kernel BTF: unexpected QUEUE_FLAG_STATS {stats_bit}"
    );
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
        q_disk: btf.offset_of_sized("request_queue", "disk", 8)?,
        q_id: btf.offset_of_sized("request_queue", "id", 4)?,
        q_queue_flags: btf.offset_of_sized("request_queue", "queue_flags", 8)?,
        disk_part0: btf.offset_of_sized("gendisk", "part0", 8)?,
        bdev_dev: btf.offset_of_sized("block_device", "bd_dev", 4)?,
        op_mask: (1u32 << op_bits) - 1,
        req_op_read: req_op("REQ_OP_READ")?,
        req_op_write: req_op("REQ_OP_WRITE")?,
        req_op_flush: req_op("REQ_OP_FLUSH")?,
        req_op_discard: req_op("REQ_OP_DISCARD")?,
        req_op_drv_in: req_op("REQ_OP_DRV_IN")?,
        req_op_drv_out: req_op("REQ_OP_DRV_OUT")?,
        queue_flag_stats: stats_bit as u32,
        mq_rq_idle: btf.enum_value("mq_rq_state", "MQ_RQ_IDLE")? as u32,
        ready: 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btf::testing::Builder;

    fn kernel_like(with_stats_flag: bool) -> Vec<u8> {
        let mut b = Builder::new();
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
        b.composite(
            false,
            "request",
            64,
            &[
                ("q", ptr, 0),
                ("cmd_flags", u32_t, 64),
                ("__data_len", u32_t, 96),
                ("", times, 128),
                ("state", state, 256),
                ("tag", int_t, 288),
                ("mq_hctx", ptr, 320),
            ],
        );
        b.composite(false, "blk_mq_hw_ctx", 16, &[("queue_num", u32_t, 64)]);
        b.composite(
            false,
            "request_queue",
            32,
            &[
                ("queue_flags", u64_t, 0),
                ("disk", ptr, 64),
                ("id", int_t, 128),
            ],
        );
        b.composite(false, "gendisk", 16, &[("part0", ptr, 64)]);
        b.composite(false, "block_device", 16, &[("bd_dev", u32_t, 32)]);
        b.enumeration(
            "req_op",
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
        if with_stats_flag {
            b.enumeration("", &[("QUEUE_FLAG_DYING", 0), ("QUEUE_FLAG_STATS", 9)]);
        }
        b.build()
    }

    #[test]
    fn resolves_offsets_and_values() {
        let btf = Btf::parse(&kernel_like(true)).unwrap();
        let l = layout(&btf).unwrap();
        assert_eq!((l.rq_q, l.rq_cmd_flags, l.rq_data_len), (0, 8, 12), "{l:?}");
        assert_eq!(
            (l.rq_start_time_ns, l.rq_io_start_time_ns, l.rq_state),
            (16, 24, 32)
        );
        assert_eq!((l.rq_tag, l.rq_mq_hctx, l.hctx_queue_num), (36, 40, 8));
        assert_eq!((l.q_queue_flags, l.q_disk, l.q_id), (0, 8, 16));
        assert_eq!((l.disk_part0, l.bdev_dev), (8, 4));
        assert_eq!(l.op_mask, 0xff);
        assert_eq!((l.req_op_drv_in, l.req_op_drv_out), (34, 35));
        assert_eq!((l.queue_flag_stats, l.mq_rq_idle, l.ready), (9, 0, 1));
    }

    #[test]
    fn a_missing_enumerator_is_an_error() {
        let btf = Btf::parse(&kernel_like(false)).unwrap();
        let err = layout(&btf).unwrap_err().to_string();
        assert!(err.contains("QUEUE_FLAG_STATS"), "{err}");
    }

    #[test]
    fn the_running_kernel_resolves() {
        // Only where the kernel exposes BTF (every supported kernel does).
        if let Ok(btf) = Btf::from_kernel() {
            let l = layout(&btf).unwrap();
            assert_eq!(l.ready, 1);
            assert_ne!(l.rq_io_start_time_ns, l.rq_start_time_ns);
        }
    }
}
