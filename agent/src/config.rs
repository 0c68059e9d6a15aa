//! The agent's configuration file (TOML). Every section and key is optional; unknown keys are
//! errors, so a typo never silently changes what the agent does.

use serde::Deserialize;

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub probes: ProbesConfig,
    pub block: BlockConfig,
    pub net: NetConfig,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ProbesConfig {
    /// Probe names (as in `stornet_probe_up{probe}`) not to attach.
    pub disable: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum HistogramDetail {
    /// Powers of two: enough for dashboards, few series.
    #[default]
    Coarse,
    /// Every in-kernel bucket (about 25% apart).
    Fine,
}

/// Where the block service time starts.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DispatchTime {
    /// The kernel's own dispatch stamp where the queue keeps one (queue statistics on), the
    /// issue probe's stamp elsewhere.
    #[default]
    Auto,
    /// Always the issue probe's stamp: a map entry per request in flight, costlier.
    Probe,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BlockConfig {
    /// Glob patterns of device names to report; empty means all.
    pub devices_include: Vec<String>,
    /// Glob patterns of device names never to report.
    pub devices_exclude: Vec<String>,
    /// Most devices reported by name; the rest fold into `device="other"`.
    pub max_devices: usize,
    pub histogram: HistogramDetail,
    pub dispatch_time: DispatchTime,
}

impl Default for BlockConfig {
    fn default() -> Self {
        BlockConfig {
            devices_include: Vec::new(),
            devices_exclude: vec!["ram*".into(), "zram*".into()],
            max_devices: 64,
            histogram: HistogramDetail::Coarse,
            dispatch_time: DispatchTime::Auto,
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NetConfig {
    /// Most peers reported by address; the rest fold into `peer="other"`.
    pub max_peers: usize,
    /// Network namespaces to read qdisc and interface statistics in, besides the agent's
    /// own: a name under /run/netns, or `pid:N` for the namespace of process N.
    pub namespaces: Vec<String>,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            max_peers: 64,
            namespaces: Vec::new(),
        }
    }
}

impl Config {
    /// Parses a configuration file's text.
    pub fn parse(text: &str) -> anyhow::Result<Config> {
        Ok(toml::from_str(text)?)
    }

    pub fn probe_enabled(&self, probe: &str) -> bool {
        !self.probes.disable.iter().any(|p| p == probe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_the_default() {
        assert_eq!(Config::parse("").unwrap(), Config::default());
    }

    #[test]
    fn reads_sections_and_rejects_unknown_keys() {
        let c = Config::parse(
            "[net]\nmax_peers = 8\nnamespaces = [\"h1\"]\n[block]\nhistogram = \"fine\"\n\
             dispatch_time = \"probe\"\n",
        )
        .unwrap();
        assert_eq!(c.net.max_peers, 8);
        assert_eq!(c.net.namespaces, ["h1"]);
        assert_eq!(c.block.histogram, HistogramDetail::Fine);
        assert_eq!(c.block.dispatch_time, DispatchTime::Probe);
        let err = Config::parse("[net]\nmax_peer = 8\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_peer"), "{err}");
    }
}
