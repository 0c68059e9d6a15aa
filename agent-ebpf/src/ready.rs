//! Whether a probe may run: its bit in `PROBES_READY` (`agent_common::ready`), the one way
//! every probe checks that user space resolved what it reads from this kernel.

/// Filled by user space before load, by this name.
const _: () = assert!(agent_common::maps::same(
    "PROBES_READY",
    agent_common::ready::GLOBAL
));
#[unsafe(no_mangle)]
static PROBES_READY: u32 = 0;

/// Whether the probe of `bit` may run. A volatile read of a frozen read-only global: the
/// verifier sees its value as a constant and prunes the body of a probe that may not.
#[inline(always)]
pub fn ready(bit: u32) -> bool {
    // SAFETY: a read-only global patched at load time.
    unsafe { core::ptr::read_volatile(&raw const PROBES_READY) & bit != 0 }
}

/// Checks at compile time that each map static is named as `agent_common::maps` says, the
/// name user space takes it by (aya's `#[map(name = ...)]` takes only a literal).
macro_rules! shared_map_names {
    ($($map:ident),* $(,)?) => {
        $(
            const _: () = assert!(agent_common::maps::same(
                stringify!($map),
                agent_common::maps::$map
            ));
        )*
    };
}
pub(crate) use shared_map_names;
