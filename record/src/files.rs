//! Reading the files a user names (run records, and the load generator's job files and
//! tokens), bounded ([`files`]).

pub use ::files::{read_capped, read_text};
