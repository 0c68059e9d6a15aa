//! The web config's `rate_limit`: a token bucket over every request, as the exporter-toolkit
//! has it (one token per `interval`, at most `burst` saved up); a request without a token is
//! answered 429.

use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct RateLimit {
    every: Duration,
    burst: u32,
    /// (tokens, when they were counted).
    state: Mutex<(f64, Instant)>,
}

impl RateLimit {
    pub fn new(every: Duration, burst: u32) -> RateLimit {
        RateLimit {
            every,
            burst,
            state: Mutex::new((f64::from(burst), Instant::now())),
        }
    }

    /// Takes a token if there is one.
    pub fn allow(&self) -> bool {
        self.allow_at(Instant::now())
    }

    fn allow_at(&self, now: Instant) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let earned = now.saturating_duration_since(s.1).as_secs_f64() / self.every.as_secs_f64();
        s.0 = (s.0 + earned).min(f64::from(self.burst));
        s.1 = now;
        if s.0 >= 1.0 {
            s.0 -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_one_per_interval() {
        let r = RateLimit::new(Duration::from_secs(1), 2);
        let t0 = Instant::now();
        assert!(r.allow_at(t0));
        assert!(r.allow_at(t0));
        assert!(!r.allow_at(t0));
        assert!(!r.allow_at(t0 + Duration::from_millis(900)));
        assert!(r.allow_at(t0 + Duration::from_millis(1100)));
        assert!(!r.allow_at(t0 + Duration::from_millis(1200)));
        // Saved up to the burst, not beyond.
        let later = t0 + Duration::from_secs(60);
        assert!(r.allow_at(later) && r.allow_at(later));
        assert!(!r.allow_at(later));
    }
}
