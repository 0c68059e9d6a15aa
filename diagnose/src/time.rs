//! Points in time on the command line: Unix seconds, RFC 3339 (`2025-05-01T12:00:00Z`,
//! `2025-05-01T14:00:00.5+02:00`), `now` and `now-15m`.

/// Now, in Unix seconds.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// Parses a time; `now` is the reference for `now` and `now-DURATION`.
pub fn parse(s: &str, now: f64) -> Result<f64, String> {
    let t = s.trim();
    if t == "now" {
        return Ok(now);
    }
    if let Some(ago) = t.strip_prefix("now-") {
        let ns = record::units::parse_time_ns(ago)?;
        return Ok(now - ns as f64 / 1e9);
    }
    if let Ok(v) = t.parse::<f64>() {
        return if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(format!("`{s}` is not a time"))
        };
    }
    rfc3339(t).ok_or_else(|| {
        format!("`{s}` is not a time (use Unix seconds, RFC 3339 such as 2025-05-01T12:00:00Z, now or now-15m)")
    })
}

fn rfc3339(t: &str) -> Option<f64> {
    let b = t.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = t.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &t[19..];
    let mut frac = 0.0;
    if let Some(r) = rest.strip_prefix('.') {
        let digits = r.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        frac = format!("0.{}", &r[..digits]).parse().ok()?;
        rest = &r[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let r = &rest[1..];
            if r.len() != 5 || r.as_bytes()[2] != b':' {
                return None;
            }
            let oh: i64 = r[..2].parse().ok()?;
            let om: i64 = r[3..].parse().ok()?;
            sign * (oh * 3600 + om * 60)
        }
    };
    let days = days_from_civil(y, mo, d);
    Some((days * 86400 + h * 3600 + mi * 60 + sec - offset) as f64 + frac)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix seconds as RFC 3339 in UTC, to the second.
pub fn format(t: f64) -> String {
    let s = t.floor() as i64;
    let (days, rem) = (s.div_euclid(86400), s.rem_euclid(86400));
    // Inverse of days_from_civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_every_form() {
        let now = 1_746_100_800.0;
        assert_eq!(parse("now", now), Ok(now));
        assert_eq!(parse("now-15m", now), Ok(now - 900.0));
        assert_eq!(parse("1746100800.5", now), Ok(1_746_100_800.5));
        assert_eq!(parse("2025-05-01T12:00:00Z", now), Ok(1_746_100_800.0));
        assert_eq!(
            parse("2025-05-01T14:00:00.25+02:00", now),
            Ok(1_746_100_800.25)
        );
        assert_eq!(parse("2000-02-29T00:00:00Z", now), Ok(951_782_400.0));
        for bad in [
            "yesterday",
            "2025-13-01T00:00:00Z",
            "2025-05-01",
            "-5",
            "now-x",
            "2025-05-01T12:00:00",
        ] {
            assert!(parse(bad, now).is_err(), "{bad}");
        }
        assert_eq!(format(1_746_100_800.7), "2025-05-01T12:00:00Z");
        assert_eq!(format(951_782_400.0), "2000-02-29T00:00:00Z");
    }
}
