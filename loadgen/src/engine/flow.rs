//! fio's flow control (`flow`, `flow_id`, `flow_sleep`): the jobs of one flow id share an
//! IO counter, and a job whose share of it is above its share of the flow's weights waits
//! `flow_sleep` before it tries again, so the jobs run in the ratio of their weights. As
//! fio's, a job that ends takes its weight out, and the others run on unhindered by it.

use std::sync::atomic::{AtomicU64, Ordering};

/// One flow id's shared counters.
#[derive(Debug, Default)]
pub struct Flow {
    id: u32,
    ios: AtomicU64,
    weight: AtomicU64,
}

/// The flows of the jobs of a point, from each job's (flow id, weight).
pub fn flows(jobs: impl Iterator<Item = Option<(u32, u64)>>) -> Vec<Flow> {
    let mut out: Vec<Flow> = Vec::new();
    for (id, w) in jobs.flatten() {
        match out.iter().find(|f| f.id == id) {
            Some(f) => {
                f.weight.fetch_add(w, Ordering::Relaxed);
            }
            None => out.push(Flow {
                id,
                ios: AtomicU64::new(0),
                weight: AtomicU64::new(w),
            }),
        }
    }
    out
}

/// A job's part in its flow.
#[derive(Debug)]
pub struct Member {
    flow: usize,
    weight: u64,
    ios: u64,
    pub sleep_ns: u64,
}

impl Member {
    pub fn new(flows: &[Flow], id: u32, weight: u64, sleep_ns: u64) -> Option<Member> {
        Some(Member {
            flow: flows.iter().position(|f| f.id == id)?,
            weight,
            ios: 0,
            sleep_ns,
        })
    }

    /// Whether the job may issue its next IO now (fio's `flow_threshold_exceeded`, negated);
    /// an IO admitted is counted.
    pub fn admit(&mut self, flows: &[Flow]) -> bool {
        let f = &flows[self.flow];
        let total = f.ios.load(Ordering::Relaxed);
        let weights = f.weight.load(Ordering::Relaxed).max(1);
        if total > 0 && self.ios as f64 / total as f64 > self.weight as f64 / weights as f64 {
            return false;
        }
        f.ios.fetch_add(1, Ordering::Relaxed);
        self.ios += 1;
        true
    }

    /// The job ended: its weight leaves the flow.
    pub fn leave(&self, flows: &[Flow]) {
        flows[self.flow]
            .weight
            .fetch_sub(self.weight, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_take_turns_in_the_ratio_of_their_weights() {
        let fl = flows([Some((0, 1)), Some((0, 3)), None].into_iter());
        let mut a = Member::new(&fl, 0, 1, 0).unwrap();
        let mut b = Member::new(&fl, 0, 3, 0).unwrap();
        // Both try as fast as they can; what gets through is 1:3.
        for _ in 0..4000 {
            a.admit(&fl);
            b.admit(&fl);
        }
        let r = b.ios as f64 / a.ios as f64;
        assert!((2.9..=3.1).contains(&r), "{} : {}", a.ios, b.ios);
        // Once a leaves, b is never held back.
        a.leave(&fl);
        assert!((0..1000).all(|_| b.admit(&fl)));
        assert!(Member::new(&fl, 7, 1, 0).is_none());
    }
}
