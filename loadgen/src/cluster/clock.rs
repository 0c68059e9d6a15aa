//! A host's clock against the controller's, as NTP estimates it: the controller notes its
//! clock before asking (t0) and when the answer arrives (t1); the host's reading is taken to
//! be of the middle instant. The exchange with the shortest round trip bounds the error best
//! (at most half its round trip), so it is the one kept.

use std::time::{SystemTime, UNIX_EPOCH};

/// One exchange: controller clock before and after, the host's reading between them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Exchange {
    pub sent_ns: u64,
    pub host_ns: u64,
    pub received_ns: u64,
}

/// A host's clock: `offset_ns` is added to the controller's clock to get the host's.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Estimate {
    pub offset_ns: i64,
    pub rtt_ns: u64,
}

impl Estimate {
    pub fn of(exchanges: &[Exchange]) -> Option<Estimate> {
        let best = exchanges
            .iter()
            .filter(|e| e.received_ns >= e.sent_ns)
            .min_by_key(|e| e.received_ns - e.sent_ns)?;
        let rtt = best.received_ns - best.sent_ns;
        let middle = best.sent_ns + rtt / 2;
        Some(Estimate {
            offset_ns: best.host_ns as i64 - middle as i64,
            rtt_ns: rtt,
        })
    }

    /// The host's clock reading at the controller's instant `controller_ns`.
    pub fn to_host(&self, controller_ns: u64) -> u64 {
        controller_ns.saturating_add_signed(self.offset_ns)
    }

    /// The controller's clock reading at the host's instant `host_seconds`.
    pub fn to_controller_seconds(&self, host_seconds: f64) -> f64 {
        host_seconds - self.offset_ns as f64 / 1e9
    }
}

pub fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64
}

/// Sleeps until the wall clock reads `unix_ns`: most of the wait asleep, the last
/// millisecond polling, so the start lands within microseconds of it.
pub fn sleep_until(unix_ns: u64) {
    loop {
        let now = self::unix_ns();
        if now >= unix_ns {
            return;
        }
        let left = unix_ns - now;
        if left > 2_000_000 {
            std::thread::sleep(std::time::Duration::from_nanos(left - 1_000_000));
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shortest_exchange_sets_the_offset() {
        // The host is 5 ms ahead; the second exchange was delayed on the way back.
        let e = Estimate::of(&[
            Exchange {
                sent_ns: 1_000_000,
                host_ns: 6_100_000,
                received_ns: 1_200_000,
            },
            Exchange {
                sent_ns: 2_000_000,
                host_ns: 7_050_000,
                received_ns: 2_900_000,
            },
        ])
        .unwrap();
        assert_eq!(e.rtt_ns, 200_000);
        assert_eq!(e.offset_ns, 5_000_000);
        assert_eq!(e.to_host(10_000_000), 15_000_000);
        assert!((e.to_controller_seconds(0.015) - 0.010).abs() < 1e-12);
        let behind = Estimate::of(&[Exchange {
            sent_ns: 10_000_000,
            host_ns: 4_000_100,
            received_ns: 10_000_200,
        }])
        .unwrap();
        assert_eq!(behind.offset_ns, -6_000_000);
        assert_eq!(Estimate::of(&[]), None);
    }

    #[test]
    fn sleeping_until_an_instant_does_not_wake_early() {
        let at = unix_ns() + 20_000_000;
        sleep_until(at);
        assert!(unix_ns() >= at);
    }
}
