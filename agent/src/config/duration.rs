//! Durations as the flags and configuration files write them, in Prometheus' style:
//! `5s`, `250ms`, `1m30s`, `2h`.

use std::time::Duration;

/// Longest duration a flag takes (more than a year).
const MAX_DURATION: Duration = Duration::from_secs(10_000 * 3600);

/// Parses durations such as `5s`, `250ms`, `1m30s`, `2h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let mut total = Duration::ZERO;
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err("empty duration".into());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(|| format!("{s:?} needs a unit (ms, s, m, h)"))?;
        let n: f64 = rest[..digits]
            .parse()
            .map_err(|_| format!("{s:?} is not a duration like 5s or 500ms"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            u => return Err(format!("{s:?}: unknown unit {u:?} (ms, s, m, h)")),
        };
        total = Duration::try_from_secs_f64(n * scale)
            .ok()
            .and_then(|d| total.checked_add(d))
            .filter(|t| *t <= MAX_DURATION)
            .ok_or_else(|| format!("{s:?} is too long (at most 10000h)"))?;
        rest = &rest[unit_len..];
    }
    if total.is_zero() {
        return Err(format!("{s:?} must be longer than zero"));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("0.5s").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("10000h").unwrap(), MAX_DURATION);
        for bad in ["", "5", "5x", "s", "0s", "-1s", "10001h", "1e400h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        let e = parse_duration("99999999999999999999h").unwrap_err();
        assert!(e.contains("too long"), "{e}");
    }
}
