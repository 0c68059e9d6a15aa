//! The agent's configuration file (TOML). Every section and key is optional; unknown keys are
//! errors, so a typo never silently changes what the agent does. A bad file is reported in
//! one line that names the key and its line. The operator's files are read by `files`
//! (bounded, a regular file or a pipe), durations parsed by `duration`.

pub mod duration;
pub mod files;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Deserialize;

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub probes: ProbesConfig,
    pub block: BlockConfig,
    pub cgroups: CgroupsConfig,
    pub net: NetConfig,
    pub pressure: PressureConfig,
    /// Collector name (see `collectors`) → enabled; overridden by the collector flags.
    pub collectors: BTreeMap<String, bool>,
    /// `--collector.disable-defaults`: collectors without an entry or flag are off.
    #[serde(skip)]
    pub collectors_off_by_default: bool,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ProbesConfig {
    /// Probe names (as in `stornet_probe_up{probe}`) not to attach.
    pub disable: Vec<String>,
    /// Keep the kernel's BPF run-time statistics on while the agent runs, for the probe run
    /// counts and times; they cost two clock reads per run of every BPF program on the host,
    /// so they are off by default (`stornet-agent probe-cost` samples them for a few seconds).
    pub run_statistics: bool,
    /// Without `run_statistics`: turn statistics on for `sample_statistics_seconds` every
    /// this many seconds to measure each probe's cost per run (0: never).
    pub sample_statistics_every_seconds: u64,
    pub sample_statistics_seconds: u64,
}

impl Default for ProbesConfig {
    fn default() -> Self {
        ProbesConfig {
            disable: Vec::new(),
            run_statistics: false,
            sample_statistics_every_seconds: 600,
            sample_statistics_seconds: 5,
        }
    }
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
    /// Count requests in flight at each dispatch (`stornet_block_inflight_at_issue`): an
    /// atomic add shared by all CPUs at each dispatch and completion, so opt-in.
    pub inflight_at_issue: bool,
}

impl BlockConfig {
    /// The devices to report, from `devices_include` and `devices_exclude`.
    pub fn device_filter(&self) -> crate::host::devices::DeviceFilter {
        crate::host::devices::DeviceFilter {
            include: self.devices_include.clone(),
            exclude: self.devices_exclude.clone(),
        }
    }
}

impl Default for BlockConfig {
    fn default() -> Self {
        BlockConfig {
            devices_include: Vec::new(),
            devices_exclude: vec!["ram*".into(), "zram*".into()],
            max_devices: 64,
            histogram: HistogramDetail::Coarse,
            dispatch_time: DispatchTime::Auto,
            inflight_at_issue: false,
        }
    }
}

/// Per-cgroup attribution of block IO (the `block_issuer` probe): off unless `paths` names
/// cgroups to follow.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CgroupsConfig {
    /// Cgroup v2 paths to count IO for, relative to the hierarchy's root, a glob per path
    /// component (`system.slice/*.service`, `kubepods.slice/*`); IO of a cgroup below one
    /// counts for it.
    pub paths: Vec<String>,
    /// Most cgroups labelled at once; the IO of the others counts as `cgroup="other"`.
    pub max_cgroups: usize,
}

impl Default for CgroupsConfig {
    fn default() -> Self {
        CgroupsConfig {
            paths: Vec::new(),
            max_cgroups: 32,
        }
    }
}

impl CgroupsConfig {
    pub fn enabled(&self) -> bool {
        !self.paths.is_empty()
    }

    /// The patterns (checked when the file was read).
    pub fn patterns(&self) -> Vec<crate::cgroups::PathPattern> {
        self.paths
            .iter()
            .filter_map(|p| crate::cgroups::PathPattern::parse(p).ok())
            .collect()
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
    /// Glob patterns of interface names to report (interface and qdisc series); empty
    /// means all.
    pub interfaces_include: Vec<String>,
    /// Glob patterns of interfaces never to report; by default the per-container devices
    /// of container runtimes and network plugins.
    pub interfaces_exclude: Vec<String>,
    /// Most interfaces reported by name, over all namespaces; the rest of a namespace's
    /// fold into `interface="other"`.
    pub max_interfaces: usize,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            max_peers: 64,
            namespaces: Vec::new(),
            interfaces_include: Vec::new(),
            interfaces_exclude: crate::host::interfaces::DEFAULT_EXCLUDE
                .iter()
                .map(|p| p.to_string())
                .collect(),
            max_interfaces: 64,
        }
    }
}

impl NetConfig {
    /// The interfaces to report (patterns checked when the file was read).
    pub fn interface_filter(&self) -> crate::host::interfaces::InterfaceFilter {
        crate::host::interfaces::InterfaceFilter::new(
            &self.interfaces_include,
            &self.interfaces_exclude,
        )
        .unwrap_or_default()
    }
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PressureConfig {
    /// A cgroup v2 directory whose pressure to export instead of the host's (the storage
    /// daemon's slice or pod, where its CPU limit's throttling shows).
    pub cgroup: Option<std::path::PathBuf>,
    /// The cgroup whose `cpu.stat` counts the time its CPU quota held it off the CPU, where
    /// that is not `cgroup` (a host whose cpu controller is on the v1 hierarchy).
    pub cpu_cgroup: Option<std::path::PathBuf>,
}

/// What is wrong with a configuration file: where (line, key) and why, printed on one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// 1-based line of the offending key or value, when known.
    pub line: Option<usize>,
    /// Dotted key path (`net.max_peers`), when known.
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if let Some(key) = &self.key {
            write!(f, "key {key}: ")?;
        }
        // Messages from the TOML parser may span lines; the report stays on one.
        let msg: Vec<&str> = self.message.split_whitespace().collect();
        write!(f, "{}", msg.join(" "))
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Parses and validates a configuration file's text.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let de = toml::Deserializer::parse(text).map_err(|e| toml_error(text, &e, None))?;
        let config: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            toml_error(text, e.inner(), Some(path))
        })?;
        config.validate(text)?;
        Ok(config)
    }

    /// Reads, parses and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Config, String> {
        let text = files::read_text(path, files::MAX_FILE_BYTES)
            .map_err(|e| format!("config file {}: {e}", path.display()))?;
        Config::parse(&text).map_err(|e| format!("config file {}: {e}", path.display()))
    }

    /// Whether a collector (a probe or a snapshot) runs: its `[collectors]` entry (where the
    /// flags have been applied), else `[probes] disable`, else the default.
    pub fn collector_enabled(&self, name: &str) -> bool {
        if let Some(on) = self.collectors.get(name) {
            return *on;
        }
        if self.probes.disable.iter().any(|p| p == name) {
            return false;
        }
        !self.collectors_off_by_default
    }

    /// Applies the command line's collector flags: they win over the file.
    pub fn apply_collector_flags(&mut self, flags: &crate::collectors::CollectorFlags) {
        for (name, on) in &flags.set {
            self.collectors.insert(name.clone(), *on);
        }
        self.collectors_off_by_default |= flags.disable_defaults;
    }

    /// Checks what the types alone do not: names, patterns and ranges.
    fn validate(&self, text: &str) -> Result<(), ConfigError> {
        let err = |section: &str, key: &str, value: Option<&str>, message: String| ConfigError {
            line: locate(text, section, key, value),
            key: Some(format!("{section}.{key}")),
            message,
        };
        for name in &self.probes.disable {
            if !crate::collectors::probes().any(|p| p.name == name) {
                let known: Vec<&str> = crate::collectors::probes().map(|p| p.name).collect();
                return Err(err(
                    "probes",
                    "disable",
                    Some(name),
                    format!("unknown probe {name:?} (known: {})", known.join(", ")),
                ));
            }
        }
        for (name, on) in &self.collectors {
            if !crate::collectors::is_known(name) {
                let known: Vec<&str> = crate::collectors::names().collect();
                return Err(err(
                    "collectors",
                    name,
                    None,
                    format!("unknown collector {name:?} (known: {})", known.join(", ")),
                ));
            }
            if *on && self.probes.disable.iter().any(|p| p == name) {
                return Err(err(
                    "collectors",
                    name,
                    None,
                    "enabled here but listed in [probes] disable; keep one of the two".into(),
                ));
            }
        }
        for (key, patterns) in [
            ("devices_include", &self.block.devices_include),
            ("devices_exclude", &self.block.devices_exclude),
        ] {
            for p in patterns {
                if let Err(e) = glob::Pattern::new(p) {
                    return Err(err(
                        "block",
                        key,
                        Some(p),
                        format!("bad glob pattern {p:?}: {}", e.msg),
                    ));
                }
            }
        }
        let p = &self.probes;
        if p.sample_statistics_every_seconds > 0
            && (p.sample_statistics_seconds == 0
                || p.sample_statistics_seconds >= p.sample_statistics_every_seconds)
        {
            return Err(err(
                "probes",
                "sample_statistics_seconds",
                None,
                format!(
                    "must be at least 1 and less than sample_statistics_every_seconds ({})",
                    p.sample_statistics_every_seconds
                ),
            ));
        }
        if self.block.max_devices == 0 {
            return Err(err(
                "block",
                "max_devices",
                None,
                "must be at least 1".into(),
            ));
        }
        for p in &self.cgroups.paths {
            if let Err(e) = crate::cgroups::PathPattern::parse(p) {
                return Err(err("cgroups", "paths", Some(p), e));
            }
        }
        if self.cgroups.max_cgroups == 0 {
            return Err(err(
                "cgroups",
                "max_cgroups",
                None,
                "must be at least 1".into(),
            ));
        }
        if self.net.max_peers == 0 {
            return Err(err("net", "max_peers", None, "must be at least 1".into()));
        }
        for (key, patterns) in [
            ("interfaces_include", &self.net.interfaces_include),
            ("interfaces_exclude", &self.net.interfaces_exclude),
        ] {
            for p in patterns {
                if let Err(e) = glob::Pattern::new(p) {
                    return Err(err(
                        "net",
                        key,
                        Some(p),
                        format!("bad glob pattern {p:?}: {}", e.msg),
                    ));
                }
            }
        }
        if self.net.max_interfaces == 0 {
            return Err(err(
                "net",
                "max_interfaces",
                None,
                "must be at least 1".into(),
            ));
        }
        if let Some(dir) = &self.pressure.cgroup
            && let Err(e) = crate::host::pressure::check_cgroup(dir)
        {
            return Err(err("pressure", "cgroup", None, e));
        }
        if let Some(dir) = &self.pressure.cpu_cgroup
            && let Err(e) = crate::host::pressure::check_cpu_cgroup(dir)
        {
            return Err(err("pressure", "cpu_cgroup", None, e));
        }
        for ns in &self.net.namespaces {
            if let Err(e) = crate::host::netns::Namespace::parse(ns) {
                return Err(err("net", "namespaces", Some(ns), format!("{e:#}")));
            }
        }
        Ok(())
    }
}

/// 1-based line number of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

fn toml_error(text: &str, e: &toml::de::Error, path: Option<String>) -> ConfigError {
    let message = e.message().to_string();
    // For an unknown key the path ends at its table; the key itself is in the message.
    let unknown = message
        .strip_prefix("unknown field `")
        .and_then(|m| m.split('`').next());
    let key = match (path.filter(|p| p != "."), unknown) {
        (Some(p), Some(k)) if !p.ends_with(k) => Some(format!("{p}.{k}")),
        (None, Some(k)) => Some(k.to_string()),
        (p, _) => p,
    };
    ConfigError {
        line: e.span().map(|s| line_of(text, s.start)),
        key,
        message,
    }
}

/// The line of `key` in `[section]` (or of the quoted `value` in that key's array), found by
/// scanning the text; used for errors found after parsing, when spans are gone.
fn locate(text: &str, section: &str, key: &str, value: Option<&str>) -> Option<usize> {
    let mut current = String::new();
    let mut key_line = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if let Some(h) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if key_line.is_some() {
                break;
            }
            current = h.trim().to_string();
            continue;
        }
        let dotted = format!("{section}.{key}");
        let starts_key = |k: &str| {
            line.strip_prefix(k)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        };
        if key_line.is_none()
            && ((current == section && starts_key(key))
                || (current.is_empty() && starts_key(&dotted)))
        {
            key_line = Some(i + 1);
        }
        if let (Some(_), Some(v)) = (key_line, value)
            && (raw.contains(&format!("\"{v}\"")) || raw.contains(&format!("'{v}'")))
        {
            return Some(i + 1);
        }
    }
    key_line
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

    #[test]
    fn unknown_key_names_key_and_line() {
        let e = Config::parse("# comment\n[net]\nmax_peers = 8\nmax_peer = 8\n").unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        assert_eq!(e.key.as_deref(), Some("net.max_peer"), "{e}");
        let e = Config::parse("\n\n[nett]\n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(3), Some("nett")), "{e}");
        assert!(!e.to_string().contains('\n'), "{e}");
    }

    #[test]
    fn wrong_type_names_key_and_line() {
        let e = Config::parse("[block]\n\nmax_devices = \"many\"\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert_eq!(e.key.as_deref(), Some("block.max_devices"), "{e}");
        let e = Config::parse("[block]\nhistogram = \"medium\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("block.histogram"), "{e}");
        assert_eq!(e.line, Some(2), "{e}");
        let e = Config::parse("[net]\nnamespaces = [\"a\", 3]\n").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(
            e.key.as_deref().unwrap().starts_with("net.namespaces"),
            "{e}"
        );
    }

    #[test]
    fn costly_options_are_off_by_default_and_sampling_is_checked() {
        let c = Config::default();
        assert!(!c.probes.run_statistics && !c.block.inflight_at_issue);
        let c = Config::parse("[block]\ninflight_at_issue = true\n").unwrap();
        assert!(c.block.inflight_at_issue);
        let e = Config::parse(
            "[probes]\nsample_statistics_every_seconds = 5\nsample_statistics_seconds = 5\n",
        )
        .unwrap_err();
        assert_eq!(
            e.key.as_deref(),
            Some("probes.sample_statistics_seconds"),
            "{e}"
        );
        assert_eq!(e.line, Some(3), "{e}");
        let c = Config::parse(
            "[probes]\nsample_statistics_every_seconds = 0\nsample_statistics_seconds = 0\n",
        );
        assert!(c.is_ok(), "sampling off needs no length");
    }

    #[test]
    fn syntax_error_has_a_line() {
        let e = Config::parse("[net]\nmax_peers = = 3\n").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(!e.to_string().contains('\n'), "{e}");
    }

    #[test]
    fn bad_glob_pattern_names_key_and_line() {
        let text = "[block]\ndevices_include = [\n  \"loop*\",\n  \"nvme[\",\n]\n";
        let e = Config::parse(text).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("block.devices_include"), "{e}");
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("nvme["), "{e}");
        let e = Config::parse("block.devices_exclude = [\"[\"]\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("block.devices_exclude"), "{e}");
        assert_eq!(e.line, Some(1), "{e}");
    }

    #[test]
    fn interface_patterns_and_cap_are_read_and_checked() {
        let c = Config::parse(
            "[net]\ninterfaces_include = [\"eth*\", \"bond[0-9]\"]\ninterfaces_exclude = []\n\
             max_interfaces = 8\n",
        )
        .unwrap();
        assert_eq!(c.net.max_interfaces, 8);
        let f = c.net.interface_filter();
        assert!(f.allows("bond1") && !f.allows("lo"));
        assert!(Config::default().net.interface_filter().allows("eth0"));
        assert!(
            !Config::default()
                .net
                .interface_filter()
                .allows("veth1a2b3c4")
        );
        let e = Config::parse("[net]\ninterfaces_exclude = [\n  \"veth*\",\n  \"cali[\",\n]\n")
            .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("net.interfaces_exclude"), "{e}");
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("cali["), "{e}");
        assert!(!e.to_string().contains('\n'), "{e}");
        let e = Config::parse("net.interfaces_include = [\"[\"]\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("net.interfaces_include"), "{e}");
        let e = Config::parse("[net]\nmax_interfaces = 0\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2), Some("net.max_interfaces"))
        );
    }

    #[test]
    fn bad_cgroup_patterns_name_key_line_and_pattern() {
        let text =
            "[cgroups]\npaths = [\n  \"system.slice/*.service\",\n  \"/kubepods.slice\",\n]\n";
        let e = Config::parse(text).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("cgroups.paths"), "{e}");
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("/kubepods.slice"), "{e}");
        let e = Config::parse("[cgroups]\npaths = [\"a/[x\"]\n").unwrap_err();
        assert!(e.to_string().contains("bad cgroup path pattern"), "{e}");
        let e = Config::parse("[cgroups]\nmax_cgroups = 0\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("cgroups.max_cgroups"), "{e}");
        let ok =
            Config::parse("[cgroups]\npaths = [\"kubepods.slice/*\"]\nmax_cgroups = 4\n").unwrap();
        assert!(ok.cgroups.enabled());
        assert_eq!(ok.cgroups.max_cgroups, 4);
        assert!(!Config::default().cgroups.enabled());
    }

    #[test]
    fn unknown_probe_and_bad_ranges_are_rejected() {
        let e = Config::parse("[probes]\ndisable = [\"block_complete\"]\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("probes.disable"), "{e}");
        assert_eq!(e.line, Some(2), "{e}");
        let e = Config::parse("[net]\nmax_peers = 0\n").unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(2), Some("net.max_peers")));
        let e = Config::parse("[net]\nmax_peers = -1\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("net.max_peers"), "{e}");
        let e = Config::parse("[net]\nnamespaces = [\"pid:x\"]\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("net.namespaces"), "{e}");
        assert!(Config::parse("[net]\nnamespaces = [\"pid:1\", \"h1\"]\n").is_ok());
        let e = Config::parse("[pressure]\ncgroup = \"/nonexistent/stornet.slice\"\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(2), Some("pressure.cgroup"))
        );
        assert!(e.message.contains("cpu.pressure"), "{e}");
        let e = Config::parse("[pressure]\n\ncpu_cgroup = \"/nonexistent/osd\"\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("pressure.cpu_cgroup"))
        );
        assert!(e.message.contains("cpu.stat"), "{e}");
    }

    #[test]
    fn collectors_section_flags_and_defaults_agree() {
        use crate::collectors::CollectorFlags;
        let mut c = Config::parse(
            "[collectors]\nethtool = false\nblock_issue = true\n[probes]\ndisable = [\"skb_drop\"]\n",
        )
        .unwrap();
        assert!(!c.collector_enabled("ethtool"));
        assert!(!c.collector_enabled("skb_drop"));
        assert!(c.collector_enabled("netlink"));
        // Flags win over the file; disable-defaults turns off what nothing names.
        c.apply_collector_flags(&CollectorFlags {
            disable_defaults: true,
            set: [
                ("ethtool".to_string(), true),
                ("block_issue".to_string(), false),
            ]
            .into(),
        });
        assert!(c.collector_enabled("ethtool"));
        assert!(!c.collector_enabled("block_issue"));
        assert!(!c.collector_enabled("netlink"));
        assert!(!c.collector_enabled("skb_drop"));
        let e = Config::parse("\n[collectors]\nethtol = false\n").unwrap_err();
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("collectors.ethtol")),
            "{e}"
        );
        assert!(e.message.contains("unknown collector"), "{e}");
        let e = Config::parse("[collectors]\nethtool = \"no\"\n").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        let e =
            Config::parse("[probes]\ndisable = [\"skb_drop\"]\n[collectors]\nskb_drop = true\n")
                .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("collectors.skb_drop"), "{e}");
    }

    #[test]
    fn packaged_default_config_parses_to_the_defaults() {
        let text = include_str!("../../../packaging/stornet-agent.toml");
        assert_eq!(Config::parse(text).unwrap(), Config::default());
    }
}
