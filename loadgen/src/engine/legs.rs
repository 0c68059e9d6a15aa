//! An IO can have several legs that complete independently: leg 0 is the local read or
//! write; further legs (for instance the copies of a write sent to replicas over TCP) are
//! supplied by an `ExtraLegs` implementation and run on the same ring. The IO completes when
//! its last leg does; every leg's latency gets its own histogram and timeline.

use anyhow::Result;
use io_uring::squeue;

use crate::results::stats::Dir;

/// Most legs one IO can have (the local one included).
pub const MAX_LEGS: usize = 8;

/// user_data of a completion: the slot in the upper bits, the leg in the low byte.
#[inline]
pub fn user_data(slot: u32, leg: u8) -> u64 {
    ((slot as u64) << 8) | leg as u64
}

#[inline]
pub fn decode(user_data: u64) -> (u32, u8) {
    ((user_data >> 8) as u32, user_data as u8)
}

/// What an extra leg needs to know about the IO it belongs to.
pub struct IoDesc<'a> {
    pub slot: u32,
    pub dir: Dir,
    pub offset: u64,
    /// The data (for a write) as it goes to the local device.
    pub data: &'a [u8],
}

/// Extra legs of IOs, run on the job's own ring. For each IO the engine calls `start`,
/// which queues SQEs with user_data built by `user_data(slot, leg)`, leg ≥ 1. Every CQE
/// whose leg byte is not 0 goes to `complete` (an implementation may also use its own slot
/// numbers for operations of no particular IO, such as a receive that collects acks for
/// many, and queue follow-up operations there), which reports each leg it finished, of any
/// IO. Every leg started must be reported finished eventually, also when it failed (then
/// `complete` returns the error too), or the IO never completes; and no operation of the
/// legs may still be in flight with memory of theirs once every IO has completed (the ring
/// goes away then). A leg's latency is from the IO's submission to the reaping of the CQE
/// that finished it.
pub trait ExtraLegs: Send {
    /// Names of legs 1, 2, … (for example `replica 198.18.0.2:7000`).
    fn names(&self) -> Vec<String>;
    /// Number of extra legs an IO in `dir` has (0: local only).
    fn legs_for(&self, dir: Dir) -> u8;
    /// Most SQEs `start` queues for one IO (sizes the ring).
    fn sqes_per_io(&self) -> u32;
    /// Queues the extra legs of one IO.
    fn start(
        &mut self,
        io: &IoDesc<'_>,
        push: &mut dyn FnMut(&squeue::Entry) -> Result<()>,
    ) -> Result<()>;
    /// A completion with the given user_data parts; may queue more SQEs with `push`, and
    /// pushes every (slot, leg) it finished onto `done`.
    fn complete(
        &mut self,
        slot: u32,
        leg: u8,
        result: i32,
        push: &mut dyn FnMut(&squeue::Entry) -> Result<()>,
        done: &mut Vec<(u32, u8)>,
    ) -> Result<()>;
}

/// Builds a job thread's extra legs (each job thread gets its own, e.g. its own sockets).
pub type LegsFactory =
    std::sync::Arc<dyn Fn(&super::JobSpec) -> Result<Box<dyn ExtraLegs>> + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_round_trips() {
        assert_eq!(decode(user_data(4095, 3)), (4095, 3));
        assert_eq!(decode(user_data(u32::MAX, 0)), (u32::MAX, 0));
    }
}
