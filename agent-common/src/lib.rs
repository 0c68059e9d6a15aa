//! The ABI between stornet's eBPF programs and stornet-agent.
//!
//! Everything here is `#[repr(C)]` with explicit padding, and no `bool` or `Option`, so the
//! kernel side and user space agree on every byte. Sizes are checked at compile time.
#![no_std]

pub mod block;
pub mod hist;
pub mod maps;
pub mod net;
pub mod ready;

/// Asserts at compile time that a type has the expected size (no hidden padding).
#[macro_export]
macro_rules! assert_size {
    ($t:ty, $n:expr) => {
        const _: () = assert!(core::mem::size_of::<$t>() == $n);
    };
}

/// Implements `aya::Pod` for ABI types when building for user space.
#[macro_export]
macro_rules! user_pod {
    ($($t:ty),* $(,)?) => {
        $(
            #[cfg(feature = "user")]
            // SAFETY: repr(C), no padding (size asserted), every bit pattern valid.
            unsafe impl aya::Pod for $t {}
        )*
    };
}
