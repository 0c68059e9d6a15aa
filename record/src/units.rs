//! fio's value syntax as a record keeps it and the reports print it: byte counts (`4k`,
//! `1m`), durations (`60` is seconds, `500ms`, `2m`), and user text quoted in an error.

/// User text for an error message: one line, at most 60 characters.
pub fn excerpt(s: &str) -> String {
    let one: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one.chars().count() <= 60 {
        return one;
    }
    let head: String = one.chars().take(57).collect();
    format!("{head}...")
}

/// Formats a byte count the way fio prints sizes in job options (`4k`, `128k`, `1m`).
pub fn format_bytes(n: u64) -> String {
    for (shift, unit) in [(40, "t"), (30, "g"), (20, "m"), (10, "k")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

/// A duration in nanoseconds; a bare number is seconds, as in fio.
pub fn parse_time_ns(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let n: f64 = t[..split].parse().map_err(|_| {
        format!(
            "`{}` is not a time (examples: 60, 500ms, 2m, 1h)",
            excerpt(s)
        )
    })?;
    let unit_ns = match t[split..].to_ascii_lowercase().as_str() {
        "" | "s" | "sec" => 1e9,
        "ms" | "msec" => 1e6,
        "us" | "usec" => 1e3,
        "ns" | "nsec" => 1.0,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "d" => 86400e9,
        u => return Err(format!("`{}` has an unknown time unit `{u}`", excerpt(s))),
    };
    let ns = n * unit_ns;
    if !ns.is_finite() || ns >= u64::MAX as f64 {
        return Err(format!("`{}` is too long", excerpt(s)));
    }
    Ok(ns as u64)
}
