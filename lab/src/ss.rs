//! What `ss -tin` says about each established TCP socket: the kernel's own view, for tests
//! that compare the agent's per-peer sums with it.

use std::net::Ipv4Addr;

use anyhow::{Context, Result};

use crate::netns::Netns;

/// One socket as `ss -tin` prints it. Counters `ss` leaves out when they are 0 are 0; the
/// time limits are in whole milliseconds, as `ss` truncates them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SsSocket {
    pub local: String,
    /// The Send-Q column: bytes not yet acknowledged.
    pub send_q: u64,
    /// `notsent:`, bytes.
    pub notsent: u64,
    /// `delivery_rate`, bits per second, and how close `ss` printed it: 0 for a whole number
    /// of bits, else the value of the last digit it printed (a K, M or G suffix).
    pub delivery_rate_bps: f64,
    pub delivery_rate_step_bps: f64,
    /// `app_limited`: the application, not the path, limited the latest rate sample.
    pub app_limited: bool,
    /// `busy:`, `rwnd_limited:`, `sndbuf_limited:`, milliseconds.
    pub busy_ms: u64,
    pub rwnd_limited_ms: u64,
    pub sndbuf_limited_ms: u64,
    /// `delivered:` and `delivered_ce:`, segments.
    pub delivered: u64,
    pub delivered_ce: u64,
}

impl Netns {
    /// The established TCP sockets to `peer` in this namespace, from `ss -tin`.
    pub fn ss_sockets(&self, peer: Ipv4Addr) -> Result<Vec<SsSocket>> {
        let out = self.run(
            "ss",
            &["-tin", "state", "established", "dst", &peer.to_string()],
        )?;
        parse(&out)
    }
}

/// Parses `ss -tin state …` output: a header, then per socket a line of columns (Recv-Q,
/// Send-Q, local, peer) and an indented line of `TCP_INFO` fields.
pub fn parse(text: &str) -> Result<Vec<SsSocket>> {
    let mut out: Vec<SsSocket> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if line.starts_with("Recv-Q") {
            continue;
        }
        if !line.starts_with([' ', '\t']) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let send_q = cols
                .get(1)
                .and_then(|v| v.parse().ok())
                .with_context(|| format!("no Send-Q in ss line {line:?}"))?;
            out.push(SsSocket {
                local: cols.get(2).unwrap_or(&"").to_string(),
                send_q,
                ..SsSocket::default()
            });
            continue;
        }
        let s = out
            .last_mut()
            .with_context(|| format!("ss info line before any socket: {line:?}"))?;
        let mut words = line.split_whitespace().peekable();
        while let Some(w) = words.next() {
            if w == "app_limited" {
                s.app_limited = true;
                continue;
            }
            let (key, value) = match w.split_once(':') {
                Some(kv) => kv,
                // `delivery_rate 123bps`: the value is the next word.
                None if w == "delivery_rate" => (w, words.next().unwrap_or("")),
                None => continue,
            };
            let number = |v: &str| -> Result<u64> {
                let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
                digits
                    .parse()
                    .with_context(|| format!("ss field {key}:{v} is not a number"))
            };
            match key {
                "notsent" => s.notsent = number(value)?,
                "busy" => s.busy_ms = number(value)?,
                "rwnd_limited" => s.rwnd_limited_ms = number(value)?,
                "sndbuf_limited" => s.sndbuf_limited_ms = number(value)?,
                "delivered" => s.delivered = number(value)?,
                "delivered_ce" => s.delivered_ce = number(value)?,
                "delivery_rate" => {
                    (s.delivery_rate_bps, s.delivery_rate_step_bps) = rate(value)?;
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

/// `34177016bps` (exact) or `39.8Mbps` (to the last digit printed): bits per second and the
/// value of that digit.
fn rate(v: &str) -> Result<(f64, f64)> {
    let v = v
        .strip_suffix("bps")
        .with_context(|| format!("ss rate {v:?}"))?;
    let (num, unit) = match v.char_indices().last() {
        Some((i, 'K')) => (&v[..i], 1e3),
        Some((i, 'M')) => (&v[..i], 1e6),
        Some((i, 'G')) => (&v[..i], 1e9),
        _ => (v, 1.0),
    };
    let x: f64 = num.parse().with_context(|| format!("ss rate {v:?}"))?;
    let decimals = num.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
    let step = if unit == 1.0 {
        0.0
    } else {
        unit * 10f64.powi(-decimals)
    };
    Ok((x * unit, step))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_fields_of_ss_ti() {
        let text = "Recv-Q Send-Q  Local Address:Port  Peer Address:PortProcess\n\
0      1058488  198.19.250.1:50512 198.19.250.2:5201\n\
\t bbr wscale:10,10 rto:212 rtt:10.313/1.359 mss:1448 cwnd:38 bytes_acked:9582902 \
delivery_rate 34177016bps delivered:6620 busy:2000ms rwnd_limited:120ms(6.0%) \
sndbuf_limited:35ms(1.8%) unacked:27 notsent:1019392 minrtt:0.006 snd_wnd:1248256\n\
0      0        198.19.250.1:50496 198.19.250.2:5201\n\
\t cubic rtt:0.041/0.018 delivery_rate 39.8Mbps delivered:4 delivered_ce:2 app_limited\n";
        let s = parse(text).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].local, "198.19.250.1:50512");
        assert_eq!((s[0].send_q, s[0].notsent), (1058488, 1019392));
        assert_eq!(s[0].delivery_rate_bps, 34177016.0);
        assert_eq!(s[0].delivery_rate_step_bps, 0.0);
        assert_eq!(
            (s[0].busy_ms, s[0].rwnd_limited_ms, s[0].sndbuf_limited_ms),
            (2000, 120, 35)
        );
        assert_eq!((s[0].delivered, s[0].delivered_ce), (6620, 0));
        assert_eq!((s[1].send_q, s[1].notsent, s[1].busy_ms), (0, 0, 0));
        assert!((s[1].delivery_rate_bps - 39.8e6).abs() < 1.0);
        assert!((s[1].delivery_rate_step_bps - 0.1e6).abs() < 1e-6);
        assert_eq!(s[1].delivered_ce, 2);
        assert!(s[1].app_limited && !s[0].app_limited);
        assert!(parse("\tbusy:1ms\n").is_err());
    }
}
