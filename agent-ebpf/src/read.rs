//! Reads of kernel memory at offsets resolved from BTF by user space.

use aya_ebpf::helpers::bpf_probe_read_kernel;

/// Reads a `T` at `base + offset` from kernel memory.
#[inline(always)]
pub fn at<T>(base: *const u8, offset: u32) -> Result<T, i32> {
    // SAFETY: bpf_probe_read_kernel validates the address; a bad one returns an error.
    unsafe { bpf_probe_read_kernel(base.wrapping_add(offset as usize) as *const T) }
}
