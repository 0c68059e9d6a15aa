//! Whole-map reads in a few `bpf()` calls (`BPF_MAP_LOOKUP_BATCH`, Linux ≥ 5.6) instead of
//! one call per key, or two per key for a hash walk: a scrape of a busy host would otherwise
//! spend most of its time entering the kernel.

use std::os::fd::{AsRawFd, BorrowedFd};

use anyhow::{Context, Result};

/// `union bpf_attr` as the batch commands read it (include/uapi/linux/bpf.h).
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;

/// Keys and values read in one pass, in the map's order; per-CPU values hold one
/// 8-byte-aligned copy per possible CPU, back to back.
pub struct Batch {
    pub keys: Vec<u8>,
    pub values: Vec<u8>,
    pub key_size: usize,
    /// Bytes of one key's value (all CPUs' copies for a per-CPU map).
    pub value_size: usize,
    pub len: usize,
}

impl Batch {
    pub fn key(&self, i: usize) -> &[u8] {
        &self.keys[i * self.key_size..(i + 1) * self.key_size]
    }

    pub fn value(&self, i: usize) -> &[u8] {
        &self.values[i * self.value_size..(i + 1) * self.value_size]
    }
}

/// Bytes one key's value takes in a batch: per-CPU maps give a copy per possible CPU, each
/// rounded up to 8 bytes.
pub fn value_bytes(value_size: usize, per_cpu: bool) -> Result<usize> {
    if !per_cpu {
        return Ok(value_size);
    }
    let cpus = aya::util::nr_cpus().map_err(|(what, e)| anyhow::anyhow!("{what}: {e}"))?;
    Ok(value_size.div_ceil(8) * 8 * cpus)
}

/// Reads every entry of the map `fd` (at most `max_entries`), `chunk` keys per call.
pub fn lookup_all(
    fd: BorrowedFd<'_>,
    key_size: usize,
    value_size: usize,
    max_entries: usize,
    chunk: usize,
) -> Result<Batch> {
    let chunk = chunk.clamp(1, max_entries.max(1));
    let mut out = Batch {
        keys: Vec::with_capacity(chunk * key_size),
        values: Vec::with_capacity(chunk * value_size),
        key_size,
        value_size,
        len: 0,
    };
    // The batch token: the next key for arrays, a bucket for hash maps (at most 8 bytes).
    let mut token = [0u8; 8];
    let mut next = [0u8; 8];
    let mut first = true;
    let mut keys = vec![0u8; chunk * key_size];
    let mut values = vec![0u8; chunk * value_size];
    loop {
        let mut attr = BatchAttr {
            in_batch: if first { 0 } else { token.as_ptr() as u64 },
            out_batch: next.as_mut_ptr() as u64,
            keys: keys.as_mut_ptr() as u64,
            values: values.as_mut_ptr() as u64,
            count: chunk as u32,
            map_fd: fd.as_raw_fd() as u32,
            ..Default::default()
        };
        // SAFETY: the buffers hold `count` keys and values of the sizes the map has, and the
        // tokens the map's key size (≤ 8 for the maps read this way) or a u32 bucket.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_MAP_LOOKUP_BATCH,
                &mut attr as *mut BatchAttr,
                std::mem::size_of::<BatchAttr>() as u32,
            )
        };
        let err = (r < 0).then(std::io::Error::last_os_error);
        let n = attr.count as usize;
        out.keys.extend_from_slice(&keys[..n * key_size]);
        out.values.extend_from_slice(&values[..n * value_size]);
        out.len += n;
        match err {
            // The end of the map.
            Some(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(out),
            Some(e) => return Err(e).context("BPF_MAP_LOOKUP_BATCH"),
            None if out.len >= max_entries => return Ok(out),
            None => {}
        }
        token = next;
        first = false;
    }
}
