//! Whole-map reads in a few `bpf()` calls (`BPF_MAP_LOOKUP_BATCH`) instead of one call per
//! key, or two per key for a hash walk: a scrape of a busy host would otherwise spend most of
//! its time entering the kernel. Kernels without batch reads for a map type (per-CPU arrays
//! before 5.13) are read key by key.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

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

/// `union bpf_attr` as `BPF_MAP_LOOKUP_ELEM` and `BPF_MAP_GET_NEXT_KEY` read it.
#[repr(C)]
struct ElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    /// The value (lookup) or the next key (get next key).
    value: u64,
    flags: u64,
}

const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;
/// The kernel's ENOTSUPP, returned for map types without batch operations.
const ENOTSUPP: i32 = 524;

/// Set once a batch read was refused: later reads go key by key at once.
static NO_BATCH: AtomicBool = AtomicBool::new(false);

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> std::io::Result<()> {
    // SAFETY: `attr` is the `bpf_attr` layout `cmd` reads; the pointers in it are the
    // caller's buffers of the sizes the map has.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T,
            std::mem::size_of::<T>() as u32,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Keys and values read in one pass, in the map's order; per-CPU values hold one
/// 8-byte-aligned copy per possible CPU, back to back. A `Batch` kept between reads
/// ([`Batch::read`]) keeps its buffers: a map of per-CPU histograms takes megabytes, which a
/// scrape would otherwise allocate and zero each time.
#[derive(Default)]
pub struct Batch {
    pub keys: Vec<u8>,
    pub values: Vec<u8>,
    pub key_size: usize,
    /// Bytes of one key's value (all CPUs' copies for a per-CPU map).
    pub value_size: usize,
    pub len: usize,
}

impl Batch {
    /// Reads every entry of the map `fd` (at most `max_entries`), `chunk` keys per call,
    /// into this batch's buffers, replacing what they held.
    pub fn read(
        &mut self,
        fd: BorrowedFd<'_>,
        key_size: usize,
        value_size: usize,
        max_entries: usize,
        chunk: usize,
    ) -> Result<()> {
        self.key_size = key_size;
        self.value_size = value_size;
        self.len = 0;
        // A hash map's batch read takes every bucket's lock, thousands of them; one call
        // says whether there is any entry at all.
        if is_empty(fd, key_size).context("BPF_MAP_GET_NEXT_KEY")? {
            return Ok(());
        }
        if !NO_BATCH.load(Ordering::Relaxed) {
            match batched(fd, max_entries, chunk, self) {
                Err(e)
                    if e.raw_os_error() == Some(ENOTSUPP)
                        || e.raw_os_error() == Some(libc::EINVAL) =>
                {
                    NO_BATCH.store(true, Ordering::Relaxed);
                    self.len = 0;
                }
                r => return r.context("BPF_MAP_LOOKUP_BATCH"),
            }
        }
        one_by_one(fd, max_entries, self).context("reading a map key by key")
    }

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

/// Reads every entry of the map `fd` (at most `max_entries`), `chunk` keys per call, into
/// new buffers.
pub fn lookup_all(
    fd: BorrowedFd<'_>,
    key_size: usize,
    value_size: usize,
    max_entries: usize,
    chunk: usize,
) -> Result<Batch> {
    let mut out = Batch::default();
    out.read(fd, key_size, value_size, max_entries, chunk)?;
    Ok(out)
}

/// Whether the map `fd` has no entry: its first key is asked for (an array always has one).
fn is_empty(fd: BorrowedFd<'_>, key_size: usize) -> std::io::Result<bool> {
    let mut first = vec![0u8; key_size];
    let mut attr = ElemAttr {
        map_fd: fd.as_raw_fd() as u32,
        _pad: 0,
        key: 0,
        value: first.as_mut_ptr() as u64,
        flags: 0,
    };
    match bpf(BPF_MAP_GET_NEXT_KEY, &mut attr) {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(true),
        Err(e) => Err(e),
        Ok(()) => Ok(false),
    }
}

/// The same read without batch operations: the next key, then its value, for each key.
fn one_by_one(fd: BorrowedFd<'_>, max_entries: usize, out: &mut Batch) -> std::io::Result<()> {
    let (key_size, value_size) = (out.key_size, out.value_size);
    out.keys.clear();
    out.values.clear();
    out.len = 0;
    let mut key = vec![0u8; key_size];
    let mut next = vec![0u8; key_size];
    let mut value = vec![0u8; value_size];
    // A hash walk restarts from its first key when the current one was deleted meanwhile:
    // a key seen before ends it, so that nothing is read twice.
    let mut seen = std::collections::HashSet::new();
    while out.len < max_entries {
        let mut attr = ElemAttr {
            map_fd: fd.as_raw_fd() as u32,
            _pad: 0,
            key: if out.len == 0 { 0 } else { key.as_ptr() as u64 },
            value: next.as_mut_ptr() as u64,
            flags: 0,
        };
        match bpf(BPF_MAP_GET_NEXT_KEY, &mut attr) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => break,
            r => r?,
        }
        std::mem::swap(&mut key, &mut next);
        if !seen.insert(key.clone()) {
            break;
        }
        let mut attr = ElemAttr {
            map_fd: fd.as_raw_fd() as u32,
            _pad: 0,
            key: key.as_ptr() as u64,
            value: value.as_mut_ptr() as u64,
            flags: 0,
        };
        match bpf(BPF_MAP_LOOKUP_ELEM, &mut attr) {
            // Deleted meanwhile: go on from it.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            r => r?,
        }
        out.keys.extend_from_slice(&key);
        out.values.extend_from_slice(&value);
        out.len += 1;
    }
    Ok(())
}

/// Batch reads straight into `out`'s buffers, which grow (and are zeroed) only past the
/// largest read so far.
fn batched(
    fd: BorrowedFd<'_>,
    max_entries: usize,
    chunk: usize,
    out: &mut Batch,
) -> std::io::Result<()> {
    let (key_size, value_size) = (out.key_size, out.value_size);
    let chunk = chunk.clamp(1, max_entries.max(1));
    // The batch token: the next key for arrays, a bucket for hash maps (at most 8 bytes).
    let mut token = [0u8; 8];
    let mut next = [0u8; 8];
    let mut first = true;
    loop {
        let room = out.len + chunk;
        if out.keys.len() < room * key_size {
            out.keys.resize(room * key_size, 0);
        }
        if out.values.len() < room * value_size {
            out.values.resize(room * value_size, 0);
        }
        let mut attr = BatchAttr {
            in_batch: if first { 0 } else { token.as_ptr() as u64 },
            out_batch: next.as_mut_ptr() as u64,
            keys: out.keys[out.len * key_size..].as_mut_ptr() as u64,
            values: out.values[out.len * value_size..].as_mut_ptr() as u64,
            count: chunk as u32,
            map_fd: fd.as_raw_fd() as u32,
            ..Default::default()
        };
        // The buffers hold `count` keys and values of the sizes the map has past `len`, and
        // the tokens the map's key size (≤ 8 for the maps read this way) or a u32 bucket.
        let err = bpf(BPF_MAP_LOOKUP_BATCH, &mut attr).err();
        out.len += (attr.count as usize).min(chunk);
        match err {
            // The end of the map.
            Some(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
            Some(e) => return Err(e),
            None if out.len >= max_entries => return Ok(()),
            None => {}
        }
        token = next;
        first = false;
    }
}

/// A copy of a map's fd, kept beside the typed map that owns it.
pub fn fd_of(map: &aya::maps::Map) -> Result<OwnedFd> {
    let data = match map {
        aya::maps::Map::Array(d)
        | aya::maps::Map::PerCpuArray(d)
        | aya::maps::Map::HashMap(d)
        | aya::maps::Map::PerCpuHashMap(d) => d,
        _ => anyhow::bail!("unexpected map type"),
    };
    Ok(data.fd().as_fd().try_clone_to_owned()?)
}

/// A plain value out of a batch's bytes.
pub fn read<T: Copy>(bytes: &[u8]) -> T {
    assert!(bytes.len() >= std::mem::size_of::<T>(), "short map value");
    // SAFETY: T is a plain-old-data map value (agent_common, `user_pod!`) and the slice
    // holds at least its size; the read is unaligned-safe.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr() as *const T) }
}

/// Each CPU's copy of a per-CPU value in a batch (8-byte aligned, back to back).
pub fn per_cpu<T: Copy + 'static>(bytes: &[u8]) -> impl Iterator<Item = T> + '_ {
    bytes
        .chunks_exact(std::mem::size_of::<T>().div_ceil(8) * 8)
        .map(read::<T>)
}
