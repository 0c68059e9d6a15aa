//! Reads of kernel memory at offsets resolved from BTF by user space.

/// Loads a `T` at `base + off` straight from kernel memory. `base` is a typed (BTF) pointer:
/// a tracepoint argument or a pointer read from one, so the verifier checks the access
/// against the kernel's own types, and the JIT turns a fault into a zero read. This is much
/// cheaper than a `bpf_probe_read_kernel` call per field, and allowed under
/// `lockdown=confidentiality`, which forbids that helper.
#[inline(always)]
pub fn field<T: Copy>(base: *const u8, off: u32) -> T {
    // SAFETY: see above; the access is checked by the verifier and guarded by the JIT.
    unsafe { core::ptr::read_volatile(base.wrapping_add(off as usize) as *const T) }
}

/// A value one load reads from kernel memory at a field whose offset user space writes into
/// the load instruction before the object is loaded (`agent_common::block::FIELD_MARK`): the
/// instruction is emitted with the field's marker as its offset, `base - K`.
pub trait Marked: Sized {
    fn at<const K: u32>(base: *const u8) -> Self;
}

/// One `Marked` impl per load width. The asm is not `pure`: like the volatile read of
/// `field`, the load stays where the code puts it (after the null checks that guard it).
macro_rules! marked {
    ($($t:ty => $w:literal, $bits:literal;)*) => {$(
        impl Marked for $t {
            #[inline(always)]
            fn at<const K: u32>(base: *const u8) -> $t {
                let v: u64;
                // SAFETY: as `field`: a load the verifier checks against the kernel's types,
                // at the offset user space writes in (or a marker it refuses). A load
                // narrower than 64 bits zero-extends: the compiler is told, so that it need
                // not clear the upper bits again.
                unsafe {
                    core::arch::asm!(
                        concat!("{v} = *(", $w, " *)({b} - {k})"),
                        v = out(reg) v,
                        b = in(reg) base,
                        k = const K,
                        options(readonly, nostack, preserves_flags),
                    );
                    core::hint::assert_unchecked($bits == 64 || v >> ($bits % 64) == 0);
                }
                v as $t
            }
        }
    )*};
}
marked! {
    u8 => "u8", 8;
    u16 => "u16", 16;
    u32 => "u32", 32;
    i32 => "u32", 32;
    u64 => "u64", 64;
    *const u8 => "u64", 64;
}
