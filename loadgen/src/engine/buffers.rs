//! One page-aligned buffer per IO slot, in a single anonymous mapping (registered with the
//! ring as fixed buffers).

use anyhow::{Result, bail};

pub struct Buffers {
    base: *mut u8,
    map_len: usize,
    stride: usize,
    len: usize,
    count: usize,
}

// SAFETY: the mapping is owned by one job thread; the pointer is only used from there.
unsafe impl Send for Buffers {}

impl Buffers {
    pub fn new(count: usize, len: usize) -> Result<Buffers> {
        let stride = len.div_ceil(4096) * 4096;
        let map_len = stride * count;
        // SAFETY: an anonymous private mapping; checked for MAP_FAILED below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            bail!(
                "cannot map {map_len} bytes of IO buffers: {}",
                std::io::Error::last_os_error()
            );
        }
        // Zeros until the job's content fills them (`content`).
        let b = Buffers {
            base: p as *mut u8,
            map_len,
            stride,
            len,
            count,
        };
        Ok(b)
    }

    pub fn ptr(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.count);
        // SAFETY: i < count, so the offset is inside the mapping.
        unsafe { self.base.add(i * self.stride) }
    }

    pub fn get(&self, i: usize) -> &[u8] {
        // SAFETY: slot i is len bytes inside the mapping; no IO writes it while borrowed
        // (the engine reads a slot only after its IO completed).
        unsafe { std::slice::from_raw_parts(self.ptr(i), self.len) }
    }

    pub fn get_mut(&mut self, i: usize) -> &mut [u8] {
        // SAFETY: as in get, and &mut self makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(i), self.len) }
    }

    pub fn iovecs(&self) -> Vec<libc::iovec> {
        (0..self.count)
            .map(|i| libc::iovec {
                iov_base: self.ptr(i) as *mut libc::c_void,
                iov_len: self.len,
            })
            .collect()
    }
}

impl Drop for Buffers {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what new() mapped.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.map_len) };
    }
}
