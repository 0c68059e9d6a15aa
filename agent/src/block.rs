//! Block path: the request layout from kernel BTF, and the collector of the per-device
//! completion counters the `block_rq_complete` probe keeps.

use std::sync::Mutex;

use agent_common::block::{BlockLayout, DevOp, IoCount, OP_NAMES};
use anyhow::{Context, Result};
use aya::maps::{MapData, PerCpuHashMap};

use crate::btf::Btf;
use crate::devices::DeviceNames;
use crate::model::{Collector, Family, Kind};

/// Resolves the offsets and enum values the block probes read, from the running kernel's BTF.
pub fn layout(btf: &Btf) -> Result<BlockLayout> {
    let req_op = |name: &str| -> Result<u32> { Ok(btf.enum_value("req_op", name)? as u32) };
    // REQ_OP_BITS is a macro, but the first request flag bit is defined as equal to it.
    let op_bits = btf.enum_value("req_flag_bits", "__REQ_FAILFAST_DEV")?;
    Ok(BlockLayout {
        rq_q: btf.offset_of_sized("request", "q", 8)?,
        rq_cmd_flags: btf.offset_of_sized("request", "cmd_flags", 4)?,
        rq_data_len: btf.offset_of_sized("request", "__data_len", 4)?,
        q_disk: btf.offset_of_sized("request_queue", "disk", 8)?,
        disk_part0: btf.offset_of_sized("gendisk", "part0", 8)?,
        bdev_dev: btf.offset_of_sized("block_device", "bd_dev", 4)?,
        op_mask: (1u32 << op_bits) - 1,
        req_op_read: req_op("REQ_OP_READ")?,
        req_op_write: req_op("REQ_OP_WRITE")?,
        req_op_flush: req_op("REQ_OP_FLUSH")?,
        req_op_discard: req_op("REQ_OP_DISCARD")?,
        ready: 1,
    })
}

/// Reads `BLOCK_COMPLETIONS` at scrape time.
pub struct BlockCollector {
    completions: Mutex<PerCpuHashMap<MapData, DevOp, IoCount>>,
    names: DeviceNames,
}

impl BlockCollector {
    pub fn new(map: aya::maps::Map) -> Result<BlockCollector> {
        Ok(BlockCollector {
            completions: Mutex::new(PerCpuHashMap::try_from(map).context("BLOCK_COMPLETIONS map")?),
            names: DeviceNames::default(),
        })
    }

    /// Completed IOs and bytes per (device, op), summed over CPUs.
    pub fn completions(&self) -> Result<Vec<(DevOp, IoCount)>> {
        let map = self.completions.lock().expect("block map");
        let mut out = Vec::new();
        for entry in map.iter() {
            let (key, per_cpu) = entry?;
            let total = per_cpu.iter().fold(IoCount::default(), |a, c| IoCount {
                ios: a.ios + c.ios,
                bytes: a.bytes + c.bytes,
            });
            out.push((key, total));
        }
        out.sort_by_key(|(k, _)| (k.dev, k.op));
        Ok(out)
    }
}

impl Collector for BlockCollector {
    fn collect(&self, out: &mut Vec<Family>) -> Result<()> {
        let mut ios = Family::new(
            "stornet_block_completed_ios_total",
            "Block requests completed, by device and op (block_rq_complete).",
            Kind::Counter,
        );
        let mut bytes = Family::new(
            "stornet_block_completed_bytes_total",
            "Bytes completed by block requests, by device and op.",
            Kind::Counter,
        );
        for (key, count) in self.completions()? {
            let device = self.names.name(key.dev);
            let op = OP_NAMES.get(key.op as usize).copied().unwrap_or("other");
            let labels = [("device", device.as_str()), ("op", op)];
            ios.scalar(&labels, count.ios as f64);
            bytes.scalar(&labels, count.bytes as f64);
        }
        out.push(ios);
        out.push(bytes);
        Ok(())
    }
}
