//! The whole machine's CPU time, for benchmarks that compare tools by the CPU they cost.

/// (busy, total) clock ticks of all CPUs since boot, from the `cpu` line of /proc/stat;
/// idle and iowait are not busy, guest time is already inside user.
pub fn ticks() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let total = fields.iter().sum::<u64>();
    let idle = fields.iter().skip(3).take(2).sum::<u64>();
    (total - idle, total)
}

#[cfg(test)]
mod tests {
    #[test]
    fn busy_is_part_of_total_and_grows() {
        let (b0, t0) = super::ticks();
        assert!(b0 <= t0 && t0 > 0);
        let spin = std::time::Instant::now();
        while spin.elapsed().as_millis() < 50 {}
        let (b1, t1) = super::ticks();
        assert!(b1 >= b0 && t1 >= t0);
    }
}
