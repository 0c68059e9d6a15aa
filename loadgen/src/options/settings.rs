//! Settings of the run as a whole (`--output-format`, `--interval`, `--agent`, …), as
//! opposed to the options of each job.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::values::{excerpt, parse_bool, parse_time_ns};

/// `--output-format`: one or more of fio's formats, comma-separated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct OutputFormat {
    /// loadgen's readable text.
    pub normal: bool,
    /// fio's JSON (`json`), with latency bins (`json+`).
    pub json: bool,
    pub json_plus: bool,
    /// fio's terse (minimal) format, version 3.
    pub terse: bool,
}

impl OutputFormat {
    pub const NORMAL: OutputFormat = OutputFormat {
        normal: true,
        json: false,
        json_plus: false,
        terse: false,
    };

    pub fn parse(s: &str) -> Result<OutputFormat, String> {
        let mut f = OutputFormat::default();
        for part in s.split(',').map(str::trim) {
            match part {
                "normal" => f.normal = true,
                "json" => f.json = true,
                "json+" => {
                    f.json = true;
                    f.json_plus = true;
                }
                "terse" | "minimal" => f.terse = true,
                _ => {
                    return Err(format!(
                        "`{}` (use normal, json, json+ or terse, or several with commas)",
                        excerpt(part)
                    ));
                }
            }
        }
        Ok(f)
    }
}

impl TryFrom<String> for OutputFormat {
    type Error = String;
    fn try_from(s: String) -> Result<OutputFormat, String> {
        OutputFormat::parse(&s)
    }
}

impl From<OutputFormat> for String {
    fn from(f: OutputFormat) -> String {
        let mut v = Vec::new();
        if f.normal {
            v.push("normal");
        }
        if f.json_plus {
            v.push("json+");
        } else if f.json {
            v.push("json");
        }
        if f.terse {
            v.push("terse");
        }
        v.join(",")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Eta {
    Auto,
    Never,
}

/// Settings of the run as a whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    pub output_format: OutputFormat,
    pub output: Option<PathBuf>,
    pub interval_ns: u64,
    pub metrics_address: Option<SocketAddr>,
    pub force_destroy_data: bool,
    pub eta: Eta,
    pub group_reporting: bool,
    pub profile: Option<String>,
    /// `--agent [NAME=]URL`, in the order given.
    #[serde(default)]
    pub agents: Vec<String>,
    /// `--agent-ca-file`, `--agent-cert-file`, … for every `--agent`.
    #[serde(default)]
    pub agent_client: promclient::ClientFiles,
    /// `--record FILE`.
    #[serde(default)]
    pub record: Option<PathBuf>,
    /// Replicas every write also goes to (`--replica`, repeatable).
    #[serde(default)]
    pub replicas: Vec<SocketAddr>,
    #[serde(default)]
    pub replica_token_file: Option<PathBuf>,
    /// How long a replica may leave a write unacknowledged (default in `replica::replicas`).
    #[serde(default)]
    pub replica_timeout_ns: Option<u64>,
    /// `--status-interval`: an interim report this often.
    #[serde(default)]
    pub status_interval_ns: Option<u64>,
    /// `--client [NAME=]HOST[:PORT]` (or a file of hosts): run the job on these hosts'
    /// job services instead of here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_token_file: Option<PathBuf>,
    /// How long a host may stay silent before the controller gives it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_timeout_ns: Option<u64>,
    /// Put before every replica volume's name (`HOST.JOB.N`): a cluster host's name, so
    /// hosts that replicate to one peer keep volumes of their own there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_volume_prefix: Option<String>,
    /// `--start-gate`: after the checks and the layout, say `ready` on stdout and wait for
    /// `start UNIX_NS` (or `abort`) on stdin; what `loadgen serve` runs a job order with.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub start_gate: bool,
    /// `--parse-only`: check the options and job files, run nothing (as fio's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parse_only: bool,
    /// `--section=NAME` (repeatable): only the job file sections so named run (fio's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sections: Vec<String>,
}

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings {
            output_format: OutputFormat::NORMAL,
            output: None,
            interval_ns: 1_000_000_000,
            metrics_address: None,
            force_destroy_data: false,
            eta: Eta::Auto,
            group_reporting: false,
            profile: None,
            agents: Vec::new(),
            agent_client: promclient::ClientFiles::default(),
            record: None,
            replicas: Vec::new(),
            replica_token_file: None,
            replica_timeout_ns: None,
            status_interval_ns: None,
            clients: Vec::new(),
            client_token_file: None,
            client_timeout_ns: None,
            replica_volume_prefix: None,
            start_gate: false,
            parse_only: false,
            sections: Vec::new(),
        }
    }
}

impl RunSettings {
    pub fn set(&mut self, key: &str, value: Option<&str>) -> Result<(), String> {
        let v = value.unwrap_or("1");
        let err = |e: String| format!("--{key}: {e}");
        match key {
            "output-format" => self.output_format = OutputFormat::parse(v).map_err(err)?,
            "minimal" => {
                if parse_bool(v).map_err(err)? {
                    self.output_format = OutputFormat::parse("terse")?;
                }
            }
            "output" => self.output = Some(PathBuf::from(v)),
            "interval" => {
                let t = parse_time_ns(v).map_err(err)?;
                if t < 10_000_000 {
                    return Err(err(format!("`{}` is shorter than 10ms", excerpt(v))));
                }
                self.interval_ns = t;
            }
            "metrics-address" => {
                self.metrics_address = Some(v.parse().map_err(|_| {
                    err(format!(
                        "`{}` is not an address with a port (e.g. 127.0.0.1:9478)",
                        excerpt(v)
                    ))
                })?)
            }
            "force-destroy-data" => self.force_destroy_data = parse_bool(v).map_err(err)?,
            "eta" => {
                self.eta = match v {
                    "auto" | "always" => Eta::Auto,
                    "never" => Eta::Never,
                    _ => return Err(err(format!("`{}` (use auto or never)", excerpt(v)))),
                }
            }
            "group_reporting" => self.group_reporting = parse_bool(v).map_err(err)?,
            "profile" => self.profile = Some(v.to_string()),
            "agent" => {
                super::values::AgentSpec::parse(v).map_err(err)?;
                self.agents.push(v.to_string());
            }
            "agent-ca-file" => self.agent_client.ca_file = Some(PathBuf::from(v)),
            "agent-cert-file" => self.agent_client.cert_file = Some(PathBuf::from(v)),
            "agent-key-file" => self.agent_client.key_file = Some(PathBuf::from(v)),
            "agent-insecure-skip-verify" => {
                self.agent_client.insecure_skip_verify = parse_bool(v).map_err(err)?
            }
            "agent-bearer-token-file" => {
                self.agent_client.bearer_token_file = Some(PathBuf::from(v))
            }
            "record" => self.record = Some(PathBuf::from(v)),
            "status-interval" => {
                let t = parse_time_ns(v).map_err(err)?;
                if t > 0 && t < 100_000_000 {
                    return Err(err(format!("`{}` is shorter than 100ms", excerpt(v))));
                }
                self.status_interval_ns = (t > 0).then_some(t);
            }
            "replica" => {
                let addr = super::values::parse_addr(v).map_err(err)?;
                if self.replicas.contains(&addr) {
                    return Err(err(format!("{addr} is given twice")));
                }
                self.replicas.push(addr);
            }
            "replica_token_file" => self.replica_token_file = Some(PathBuf::from(v)),
            "replica_timeout" => {
                self.replica_timeout_ns = Some(super::values::parse_timeout(v).map_err(err)?)
            }
            "client" => self.clients.push(v.to_string()),
            "client-token-file" => self.client_token_file = Some(PathBuf::from(v)),
            "client-timeout" => {
                self.client_timeout_ns = Some(super::values::parse_timeout(v).map_err(err)?)
            }
            "start-gate" => self.start_gate = parse_bool(v).map_err(err)?,
            "parse-only" => self.parse_only = parse_bool(v).map_err(err)?,
            "section" => {
                if v.is_empty() {
                    return Err(err("an empty section name".to_string()));
                }
                self.sections.push(v.to_string());
            }
            "replica-volume-prefix" => self.replica_volume_prefix = Some(v.to_string()),
            _ => return Err(format!("--{key} is not a run option")),
        }
        Ok(())
    }
}
