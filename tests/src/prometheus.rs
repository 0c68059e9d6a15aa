//! A real Prometheus server (Debian's `/usr/bin/prometheus`) for a test: a generated config,
//! a temporary storage directory and a free loopback port; killed and removed on drop.

use std::fs::File;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::agent::free_port;
use crate::metrics::http_get;

pub struct PrometheusServer {
    child: Child,
    pub addr: SocketAddr,
    dir: PathBuf,
}

impl PrometheusServer {
    /// Starts Prometheus with a 1 s scrape interval and the given `scrape_configs` list (YAML,
    /// indented as list items under `scrape_configs:`); waits until it is ready.
    pub fn start(tag: &str, scrape_configs: &str) -> Result<PrometheusServer> {
        let dir = std::env::temp_dir().join(format!("stornet-prom-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data"))?;
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n{scrape_configs}"
            ),
        )?;
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(dir.join("prometheus.log"))?)
            .spawn()
            .context("starting prometheus")?;
        let mut p = PrometheusServer { child, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !matches!(http_get(addr, "/-/ready"), Ok((200, _))) {
            if let Some(s) = p.child.try_wait()? {
                bail!("prometheus exited: {s}; log:\n{}", p.log());
            }
            if Instant::now() > deadline {
                bail!("prometheus not ready within 30 s; log:\n{}", p.log());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(p)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// An instant query; returns the result vector as (labels, value) pairs.
    pub fn query(&self, expr: &str) -> Result<Vec<(serde_json::Value, f64)>> {
        let (code, body) = http_get(self.addr, &format!("/api/v1/query?query={}", encode(expr)))?;
        if code != 200 {
            bail!("query {expr:?} answered {code}: {body}");
        }
        let v: serde_json::Value = serde_json::from_str(&body)?;
        let result = v["data"]["result"]
            .as_array()
            .with_context(|| format!("no result vector in {body}"))?;
        result
            .iter()
            .map(|r| {
                let value = r["value"][1]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .with_context(|| format!("bad sample {r}"))?;
                Ok((r["metric"].clone(), value))
            })
            .collect()
    }

    /// Polls `expr` until `ok` accepts its result (up to `timeout`); returns that result.
    pub fn wait_for(
        &self,
        expr: &str,
        timeout: Duration,
        ok: impl Fn(&[(serde_json::Value, f64)]) -> bool,
    ) -> Result<Vec<(serde_json::Value, f64)>> {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.query(expr)?;
            if ok(&r) {
                return Ok(r);
            }
            if Instant::now() > deadline {
                bail!(
                    "{expr:?} still {r:?} after {timeout:?}; prometheus log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for PrometheusServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Percent-encodes a query parameter value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes_promql() {
        assert_eq!(
            super::encode("up{job=\"a b\"}"),
            "up%7Bjob%3D%22a%20b%22%7D"
        );
    }
}
