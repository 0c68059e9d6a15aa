//! stornet-agent: eBPF telemetry of the block and network paths, served to Prometheus.
//!
//! How a measurement travels from a probe to `/metrics`, with a request's device service
//! time as the example:
//!
//! 1. **In the kernel** (`agent-ebpf`), the `block_completion` probe runs on the
//!    `block_rq_complete` tracepoint and adds the request's service time to a histogram
//!    bucket of a per-CPU map keyed by (device, op); keys, values and bucket math are the
//!    `agent-common` ABI. Nothing is sent per event.
//! 2. **At start**, [`probes`] loads the eBPF object with the struct layouts it needs, read
//!    from this kernel's BTF ([`kernel`]) and handed over as load-time globals, and attaches
//!    every probe of the registry ([`collectors`]) on its own: a hook this kernel lacks takes
//!    that probe down (`stornet_probe_up`), never the agent. [`agent`] then builds a collector
//!    for each part that is up; a collector takes its maps out of the object.
//! 3. **At each scrape**, [`web`] asks the [`agent`] to gather: every collector reads its
//!    maps in a few system calls ([`kernel::map_batch`]), sums the CPUs, and turns what it
//!    read into the plain data model ([`model`]): families whose names, help and type come
//!    from `metric-names`, with bounded labels ([`host::devices`] names `vda` and folds
//!    devices beyond the cap into `other`; [`net::peers`] does so for peers, [`cgroups`] for
//!    cgroups). Snapshots read at the same moment (netlink, sock_diag and ethtool in each
//!    namespace, pressure, block topology) join them, and [`self_metrics`] adds what the
//!    agent costs.
//! 4. [`exposition`] writes the families in the format the scraper asked for (Prometheus
//!    text, OpenMetrics, or protobuf with native histograms), and [`web`] answers `/metrics`
//!    (TLS, authentication, gzip, one render shared by the scrapes that arrive together).
//!
//! The parts:
//!
//! | module | what it is about |
//! |---|---|
//! | [`probes`] | loading the eBPF object and attaching each probe, the layouts they are given |
//! | [`block`], [`net`] | the collectors of each path: map readers, snapshots, export |
//! | [`host`] | what procfs and sysfs say besides the probes: pressure, devices, namespaces |
//! | [`cgroups`] | which cgroups IO is attributed to, and counting per cgroup label |
//! | [`kernel`] | the running kernel: version, lockdown, BTF, kallsyms, BPF system calls |
//! | [`collectors`], [`agent`] | the registry of collectors (probes, snapshots) and their wiring |
//! | [`model`], [`exposition`] | the data model between collectors and exposition, and its formats |
//! | [`self_metrics`] | the agent's own cost, map fill and process metrics |
//! | [`web`] | the HTTP(S) server and its web config |
//! | [`config`] | the configuration file, and reading the files an operator names |
//! | [`daemon`] | the command: flags, the service, `check`, `snapshot`, systemd, the log |

pub mod agent;
pub mod block;
pub mod cgroups;
pub mod collectors;
pub mod config;
pub mod daemon;
pub mod exposition;
pub mod host;
pub mod kernel;
pub mod model;
pub mod net;
pub mod probes;
pub mod self_metrics;
pub mod web;
