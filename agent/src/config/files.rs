//! Reading the small files an operator names (configuration, web config, certificates),
//! bounded ([`files`]), and how much they may hold.

pub use ::files::{read_regular, read_text};

/// The most any of those files may hold.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
