//! Numbers as an operator writes them: durations, shares, counts, sizes, and a signal's
//! level in its unit. A leaf: it uses nothing of the crate but the plain [`SignalKind`].

use crate::signals::SignalKind;

/// A duration: "212 ms", "1.9 ms", "850 µs", "2.3 s".
pub fn secs(v: f64) -> String {
    let (x, unit) = if v >= 1.0 {
        (v, "s")
    } else if v >= 1e-3 {
        (v * 1e3, "ms")
    } else {
        (v * 1e6, "µs")
    };
    if x >= 10.0 || x == 0.0 {
        format!("{x:.0} {unit}")
    } else {
        format!("{x:.1} {unit}")
    }
}

/// A share: "96%" (below 1%: "<1%").
pub fn pct(v: f64) -> String {
    let p = v * 100.0;
    if p > 0.0 && p < 1.0 {
        "<1%".into()
    } else {
        format!("{p:.0}%")
    }
}

/// A count with thousands separators: "1,874".
pub fn count(v: f64) -> String {
    let n = v.round().max(0.0) as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A size: "512 B", "64 KiB", "3.9 MiB".
pub fn bytes(v: f64) -> String {
    if v >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", v / (1024.0 * 1024.0))
    } else if v >= 1024.0 {
        format!("{:.0} KiB", v / 1024.0)
    } else {
        format!("{v:.0} B")
    }
}

/// A rate given in bytes per second, in bits as links are rated: "39.8 Mbit/s",
/// "10 Gbit/s".
pub fn bit_rate(bytes_per_second: f64) -> String {
    let bits = bytes_per_second * 8.0;
    let (x, unit) = if bits >= 1e9 {
        (bits / 1e9, "Gbit/s")
    } else if bits >= 1e6 {
        (bits / 1e6, "Mbit/s")
    } else {
        (bits / 1e3, "kbit/s")
    };
    if x >= 100.0 || x == x.round() {
        format!("{x:.0} {unit}")
    } else {
        format!("{x:.1} {unit}")
    }
}

/// A value of a signal, in its unit.
pub fn level(kind: SignalKind, v: f64) -> String {
    use SignalKind::*;
    match kind {
        Srtt | QueueTime | ServiceTime | AboveBlock | ReplicaRtt => secs(v),
        QdiscBacklog => bytes(v),
        InflightRatio => format!("{} of the queue limit", pct(v)),
        CpuStalled | CpuThrottled => pct(v),
        _ => count(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_like_an_operator_writes_them() {
        assert_eq!(secs(0.212), "212 ms");
        assert_eq!(secs(0.0019), "1.9 ms");
        assert_eq!(secs(0.00085), "850 µs");
        assert_eq!(secs(2.34), "2.3 s");
        assert_eq!(secs(0.0), "0 µs");
        assert_eq!(count(1874.2), "1,874");
        assert_eq!(count(1234567.0), "1,234,567");
        assert_eq!(count(12.0), "12");
        assert_eq!(pct(0.956), "96%");
        assert_eq!(pct(0.001), "<1%");
        assert_eq!(bytes(65536.0), "64 KiB");
        assert_eq!(bytes(4.0 * 1024.0 * 1024.0), "4.0 MiB");
        assert_eq!(bit_rate(4.975e6), "39.8 Mbit/s");
        assert_eq!(bit_rate(5e6), "40 Mbit/s");
        assert_eq!(bit_rate(1.25e9), "10 Gbit/s");
        assert_eq!(bit_rate(2e7), "160 Mbit/s");
    }
}
