//! Shared by the tests that hold `stornet` and `loadgen analyze` to the kept outputs.

pub mod golden;
