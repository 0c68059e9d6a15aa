//! Counters of /proc/net/netstat: pairs of lines, one of names and one of values, per
//! group (`TcpExt:`, `IpExt:`, …).

use anyhow::{Context, Result, ensure};

/// The `TcpExt` counter `field`, None where the kernel does not count it (`TCPDeliveredCE`
/// exists since 4.18).
pub fn tcp_ext(netstat: &str, field: &str) -> Result<Option<u64>> {
    let mut lines = netstat.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (
        lines.next().context("no TcpExt in /proc/net/netstat")?,
        lines
            .next()
            .context("no TcpExt values in /proc/net/netstat")?,
    );
    let (names, values): (Vec<&str>, Vec<&str>) = (
        names.split_whitespace().collect(),
        values.split_whitespace().collect(),
    );
    ensure!(
        names.len() == values.len(),
        "TcpExt of /proc/net/netstat: {} names, {} values",
        names.len(),
        values.len()
    );
    let Some(i) = names.iter().position(|n| *n == field) else {
        return Ok(None);
    };
    values[i]
        .parse()
        .map(Some)
        .with_context(|| format!("TcpExt {field} of /proc/net/netstat: {:?}", values[i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_tcp_ext_counter() {
        let t = "TcpExt: SyncookiesSent TCPDeliveredCE TCPAckCompressed\n\
                 TcpExt: 0 4017 12\n\
                 IpExt: InNoRoutes InTruncatedPkts\n\
                 IpExt: 0 0\n";
        assert_eq!(tcp_ext(t, "TCPDeliveredCE").unwrap(), Some(4017));
        assert_eq!(tcp_ext(t, "TCPDelivered").unwrap(), None);
        assert!(tcp_ext("IpExt: a\nIpExt: 1\n", "TCPDeliveredCE").is_err());
        assert!(tcp_ext("TcpExt: a b\nTcpExt: 1\n", "a").is_err());
        assert!(tcp_ext("TcpExt: a\nTcpExt: x\n", "a").is_err());
    }
}
