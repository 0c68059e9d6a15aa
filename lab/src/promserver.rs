//! A real Prometheus server (Debian's `prometheus`) for a test: a generated configuration
//! with rule files, a temporary storage directory and a free loopback port; stopped and
//! removed on drop. With a small client of its HTTP API: instant and range queries, label
//! values, rules and alerts.

use std::fs::File;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use promclient::encode;
use serde_json::Value;

use crate::agent::free_port;
use crate::metrics::http_get;

/// How to run Prometheus.
pub struct PromConfig {
    /// Names the temporary directory.
    pub tag: String,
    /// Scrape and rule evaluation interval, seconds.
    pub interval_s: u64,
    /// The `scrape_configs:` list items (YAML, each starting with `  - job_name:`).
    pub scrape_configs: String,
    /// Rule files to load.
    pub rule_files: Vec<PathBuf>,
    /// More command-line flags, such as `--enable-feature=native-histograms`.
    pub flags: Vec<String>,
}

pub struct PromServer {
    child: Child,
    pub addr: SocketAddr,
    dir: PathBuf,
    /// The network namespace it runs in (`/run/netns/…`), when not the test's own.
    netns: Option<String>,
}

/// One series of a query result.
#[derive(Clone, Debug)]
pub struct Series {
    pub labels: serde_json::Map<String, Value>,
    /// (unix time, value) pairs; one for an instant query.
    pub samples: Vec<(f64, f64)>,
}

impl Series {
    pub fn label(&self, k: &str) -> Option<&str> {
        self.labels.get(k).and_then(|v| v.as_str())
    }

    /// The last sample's value (the only one of an instant query).
    pub fn value(&self) -> f64 {
        self.samples.last().map_or(f64::NAN, |s| s.1)
    }
}

impl PromConfig {
    /// Scrapes every second, no rules.
    pub fn scrape(tag: &str, scrape_configs: &str) -> PromConfig {
        PromConfig {
            tag: tag.to_string(),
            interval_s: 1,
            scrape_configs: scrape_configs.to_string(),
            rule_files: Vec::new(),
            flags: Vec::new(),
        }
    }
}

/// Seconds since the Unix epoch.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl PromServer {
    /// Starts Prometheus and waits until it is ready and has loaded the rules.
    pub fn start(cfg: &PromConfig) -> Result<PromServer> {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
        PromServer::launch(cfg, addr, None)
    }

    /// Starts Prometheus in network namespace `ns`, listening on `addr` (an address of the
    /// namespace), to scrape targets at lab addresses; its API is then reached from inside
    /// `ns` too. It enters only the network namespace, as a host's agent does.
    pub fn start_in(
        cfg: &PromConfig,
        ns: &crate::netns::Netns,
        addr: SocketAddr,
    ) -> Result<PromServer> {
        PromServer::launch(cfg, addr, Some(ns.path()))
    }

    fn launch(cfg: &PromConfig, addr: SocketAddr, netns: Option<String>) -> Result<PromServer> {
        let dir = std::env::temp_dir().join(format!(
            "stornet-promserver-{}-{}",
            cfg.tag,
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data"))?;
        let rules: String = cfg
            .rule_files
            .iter()
            .map(|f| format!("  - {}\n", f.display()))
            .collect();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: {i}s\n  scrape_timeout: {i}s\n  evaluation_interval: {i}s\n\
                 rule_files:\n{rules}scrape_configs:\n{}",
                cfg.scrape_configs,
                i = cfg.interval_s
            ),
        )?;
        let mut cmd = match &netns {
            None => Command::new("prometheus"),
            Some(ns) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net={ns}")).arg("prometheus");
                c
            }
        };
        let child = cmd
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .args(&cfg.flags)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(dir.join("prometheus.log"))?)
            .spawn()
            .context("starting prometheus")?;
        let mut p = PromServer {
            child,
            addr,
            dir,
            netns,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !matches!(p.get("/-/ready"), Ok((200, _))) {
            if let Some(s) = p.child.try_wait()? {
                bail!("prometheus exited: {s}; log:\n{}", p.log());
            }
            if Instant::now() > deadline {
                bail!("prometheus not ready within 30 s; log:\n{}", p.log());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let groups = p.rule_groups()?;
        let loaded: usize = groups
            .iter()
            .map(|g| g["rules"].as_array().map_or(0, |r| r.len()))
            .sum();
        if !cfg.rule_files.is_empty() && loaded == 0 {
            bail!("prometheus loaded no rules; log:\n{}", p.log());
        }
        Ok(p)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// GET `path` (from inside its namespace).
    pub fn get(&self, path: &str) -> Result<(u16, String)> {
        match &self.netns {
            None => http_get(self.addr, path),
            Some(ns) => crate::netns::in_namespace(ns, || http_get(self.addr, path)),
        }
    }

    /// GET an API path; returns `data` of a successful answer.
    fn api(&self, path: &str) -> Result<Value> {
        let (code, body) = self.get(path)?;
        let v: Value =
            serde_json::from_str(&body).with_context(|| format!("GET {path}: {code} {body}"))?;
        if code != 200 || v["status"] != "success" {
            bail!("GET {path}: {code} {}", v["error"]);
        }
        Ok(v["data"].clone())
    }

    /// An instant query at `time` (now when `None`).
    pub fn query(&self, expr: &str, time: Option<f64>) -> Result<Vec<Series>> {
        let mut path = format!("/api/v1/query?query={}", encode(expr));
        if let Some(t) = time {
            path.push_str(&format!("&time={t:.3}"));
        }
        series(&self.api(&path)?)
    }

    /// A range query from `start` to `end` (Unix seconds) every `step_s` seconds.
    pub fn query_range(
        &self,
        expr: &str,
        start: f64,
        end: f64,
        step_s: u64,
    ) -> Result<Vec<Series>> {
        let path = format!(
            "/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step={step_s}",
            encode(expr)
        );
        series(&self.api(&path)?)
    }

    /// Values of `label` among series matching `selector` (all series when `None`) between
    /// `start` and `end`, sorted.
    pub fn label_values(
        &self,
        label: &str,
        selector: Option<&str>,
        start: f64,
        end: f64,
    ) -> Result<Vec<String>> {
        let mut path = format!("/api/v1/label/{label}/values?start={start:.3}&end={end:.3}");
        if let Some(s) = selector {
            path.push_str(&format!("&match[]={}", encode(s)));
        }
        let data = self.api(&path)?;
        let mut out: Vec<String> = data
            .as_array()
            .context("label values: not a list")?
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect();
        out.sort();
        Ok(out)
    }

    /// The rule groups as `/api/v1/rules` reports them (with each rule's health and error).
    pub fn rule_groups(&self) -> Result<Vec<Value>> {
        Ok(self.api("/api/v1/rules")?["groups"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// Rules that failed their last evaluation: (name, error).
    pub fn unhealthy_rules(&self) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        for g in self.rule_groups()? {
            for r in g["rules"].as_array().into_iter().flatten() {
                if r["health"] == "err" {
                    out.push((
                        r["name"].as_str().unwrap_or("").to_string(),
                        r["lastError"].as_str().unwrap_or("").to_string(),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// Active (pending or firing) alerts: (alertname, state, labels).
    pub fn alerts(&self) -> Result<Vec<(String, String, Value)>> {
        Ok(self.api("/api/v1/alerts")?["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                (
                    a["labels"]["alertname"].as_str().unwrap_or("").to_string(),
                    a["state"].as_str().unwrap_or("").to_string(),
                    a["labels"].clone(),
                )
            })
            .collect())
    }

    /// Polls the instant query `expr` until `ok` accepts its result, up to `timeout`.
    pub fn wait_for(
        &self,
        expr: &str,
        timeout: Duration,
        ok: impl Fn(&[Series]) -> bool,
    ) -> Result<Vec<Series>> {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.query(expr, None)?;
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

impl Drop for PromServer {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The series of a query answer's `data` (vector or matrix).
fn series(data: &Value) -> Result<Vec<Series>> {
    let result = data["result"]
        .as_array()
        .with_context(|| format!("no result in {data}"))?;
    let point = |p: &Value| -> Result<(f64, f64)> {
        let t = p[0].as_f64().with_context(|| format!("bad sample {p}"))?;
        let v = p[1]
            .as_str()
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("bad sample {p}"))?;
        Ok((t, v))
    };
    result
        .iter()
        .map(|r| {
            let samples = match (r.get("value"), r.get("values")) {
                (Some(v), _) => vec![point(v)?],
                (_, Some(vs)) => vs
                    .as_array()
                    .context("values")?
                    .iter()
                    .map(point)
                    .collect::<Result<_>>()?,
                _ => bail!("no samples in {r}"),
            };
            Ok(Series {
                labels: r["metric"].as_object().cloned().unwrap_or_default(),
                samples,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_and_reads_answers() {
        let matrix: Value = serde_json::from_str(
            r#"{"resultType":"matrix","result":[{"metric":{"peer":"198.18.0.2"},"values":[[1.5,"3"],[2.5,"NaN"]]}]}"#,
        )
        .unwrap();
        let s = series(&matrix).unwrap();
        assert_eq!(s[0].label("peer"), Some("198.18.0.2"));
        assert_eq!(s[0].samples[0], (1.5, 3.0));
        assert!(s[0].samples[1].1.is_nan());
        let vector: Value = serde_json::from_str(
            r#"{"resultType":"vector","result":[{"metric":{},"value":[7,"1"]}]}"#,
        )
        .unwrap();
        assert_eq!(series(&vector).unwrap()[0].samples, [(7.0, 1.0)]);
    }
}
