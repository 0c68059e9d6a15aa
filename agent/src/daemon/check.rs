//! `stornet-agent check`: what on this host lets each probe run, as a table. It loads and
//! attaches the probes for real (and detaches them before it exits), so a probe shown `ok`
//! will run. Exit code 1 when no probe can run.

use std::path::Path;
use std::process::ExitCode;

use crate::collectors::probe_spec::Hook;
use crate::collectors::probes as all_probes;
use crate::config::Config;
use crate::kernel::btf::KernelBtf;
use crate::probes::Probes;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        }
    }
}

pub struct Row {
    pub check: String,
    pub status: Status,
    pub detail: String,
}

fn row(check: impl Into<String>, status: Status, detail: impl Into<String>) -> Row {
    Row {
        check: check.into(),
        status,
        detail: detail.into(),
    }
}

/// Capabilities stornet uses: (bit, name, what for).
const CAPS: &[(u32, &str, &str)] = &[
    (39, "CAP_BPF", "load programs and maps"),
    (38, "CAP_PERFMON", "tracing programs, reading kernel memory"),
    (
        21,
        "CAP_SYS_ADMIN",
        "BPF run-time statistics, entering other network namespaces",
    ),
    (
        19,
        "CAP_SYS_PTRACE",
        "only for [net] namespaces given as pid:N of other processes",
    ),
    (
        34,
        "CAP_SYSLOG",
        "only for the functions behind drops without a reason (kernels before 5.17)",
    ),
];

pub fn run(config: &Config) -> ExitCode {
    // Read once, for the layouts, the hooks and the probes.
    let kernel_btf = KernelBtf::read();
    let mut rows = vec![kernel(), lockdown(), btf(&kernel_btf), tracefs()];
    let caps = effective_caps();
    for &(bit, name, why) in CAPS {
        let have = caps.is_some_and(|c| c & (1 << bit) != 0);
        rows.push(row(
            format!("capability {name}"),
            if have { Status::Ok } else { Status::Warn },
            format!("{} ({why})", if have { "present" } else { "missing" }),
        ));
    }
    rows.extend(layouts(&kernel_btf));
    for spec in all_probes() {
        let (status, detail) = hook_available(spec.hook, kernel_btf.aya());
        rows.push(row(format!("hook of {}", spec.name), status, detail));
    }
    // The issuer probe and the retransmit probes' cgroup part are loaded too, so that check
    // tells whether `[cgroups]` can work here.
    let wanted = crate::agent::wanted_probes(config, true);
    let probes = Probes::load(&wanted, &kernel_btf, true);
    for s in &probes.status {
        rows.push(row(
            format!("probe {}", s.name),
            if s.up { Status::Ok } else { Status::Fail },
            if s.up {
                format!("attached ({})", s.detail)
            } else {
                s.detail.clone()
            },
        ));
    }
    for spec in all_probes().filter(|p| !config.collector_enabled(p.name)) {
        rows.push(row(
            format!("probe {}", spec.name),
            Status::Warn,
            "disabled (collector flag or config file)",
        ));
    }
    let up = probes.status.iter().filter(|s| s.up).count();
    drop(probes);
    // A closed stdout (`check | head`) ends the output, not the process with a panic.
    let mut out = table(&rows);
    let code = if up == 0 {
        out.push_str(
            "no probe can run on this host: the agent would serve only /proc and /sys data\n",
        );
        ExitCode::FAILURE
    } else {
        out.push_str(&format!(
            "{up} of {} probes can run\n",
            all_probes().count()
        ));
        ExitCode::SUCCESS
    };
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
    code
}

/// Renders rows as an aligned text table.
pub fn table(rows: &[Row]) -> String {
    let w = rows.iter().map(|r| r.check.len()).max().unwrap_or(0).max(5);
    let mut out = format!("{:<w$}  {:<6}  DETAIL\n", "CHECK", "STATUS");
    for r in rows {
        out.push_str(&format!(
            "{:<w$}  {:<6}  {}\n",
            r.check,
            r.status.as_str(),
            r.detail
        ));
    }
    out
}

fn kernel() -> Row {
    let release = crate::kernel::release();
    match crate::kernel::parse_version(&release) {
        Some(v) if v >= (5, 10) => row("kernel", Status::Ok, release),
        Some(_) => row(
            "kernel",
            Status::Warn,
            format!("{release} (5.10 or newer is supported)"),
        ),
        None => row(
            "kernel",
            Status::Warn,
            format!("unknown version {release:?}"),
        ),
    }
}

/// How the probes read this kernel: the facts that differ between kernel versions.
fn layouts(kernel: &KernelBtf) -> Vec<Row> {
    let Ok(btf) = &kernel.btf else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    match crate::probes::block_layout::layout(btf, crate::kernel::version()) {
        Ok(l) => {
            let stats = if btf.enumerator("QUEUE_FLAG_STATS").is_ok() {
                "kernel BTF"
            } else {
                "the macro table"
            };
            rows.push(row(
                "block layout",
                Status::Ok,
                format!(
                    "QUEUE_FLAG_STATS bit {} from {stats}; disk from {}; errors as {}",
                    l.queue_flag_stats,
                    if l.disk_in_rq != 0 {
                        "request.rq_disk"
                    } else {
                        "request_queue.disk"
                    },
                    if l.error_is_errno != 0 {
                        "errno"
                    } else {
                        "blk_status_t"
                    }
                ),
            ));
        }
        Err(e) => rows.push(row("block layout", Status::Fail, format!("{e:#}"))),
    }
    let net = crate::probes::net_layout::NetGlobals::for_running_kernel(&kernel.btf, true);
    let reasons = if net.layout.drop_has_reason != 0 {
        "the kernel's drop reasons"
    } else {
        "none passed by this kernel: every drop counts as not_specified, by function"
    };
    rows.push(row("drop reasons", Status::Ok, reasons));
    let sockets = match (&net.cgroups_missing, net.layout.sk_cgroup_tagged) {
        (Some(e), _) => (Status::Warn, format!("not per cgroup: {e}")),
        (None, 0) => (Status::Ok, "sk_cgrp_data.cgroup, typed reads".to_string()),
        (None, _) => (
            Status::Ok,
            "the tagged sk_cgrp_data.val of kernels before 5.15, read with bpf_probe_read_kernel"
                .to_string(),
        ),
    };
    rows.push(row("socket cgroups", sockets.0, sockets.1));
    rows
}

fn lockdown() -> Row {
    use crate::kernel::Lockdown;
    let mode = crate::kernel::lockdown();
    let (status, detail) = match mode {
        Lockdown::None | Lockdown::Integrity => (Status::Ok, mode.as_str().to_string()),
        Lockdown::Confidentiality => (
            Status::Ok,
            "confidentiality (the probes read kernel memory only through typed arguments, \
             which this mode allows)"
                .to_string(),
        ),
        Lockdown::Unknown => (
            Status::Warn,
            format!(
                "unknown ({} unreadable: no lockdown LSM, or securityfs not mounted)",
                crate::kernel::LOCKDOWN_FILE
            ),
        ),
    };
    row("kernel lockdown", status, detail)
}

fn btf(kernel: &KernelBtf) -> Row {
    match &kernel.btf {
        Ok(_) => row("kernel BTF", Status::Ok, crate::kernel::btf::KERNEL_BTF),
        Err(e) => row("kernel BTF", Status::Fail, format!("{e:#}")),
    }
}

fn tracefs_dir() -> Option<&'static str> {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .into_iter()
        .find(|d| Path::new(d).join("events").is_dir())
}

fn tracefs() -> Row {
    match tracefs_dir() {
        Some(d) => row("tracefs", Status::Ok, format!("mounted at {d}")),
        None => row(
            "tracefs",
            Status::Warn,
            "not mounted (only classic tracepoints need it)",
        ),
    }
}

/// Whether the kernel has the hook, without loading anything.
fn hook_available(hook: Hook, btf: Option<&aya::Btf>) -> (Status, String) {
    let btf_trace = |event: &str| -> (Status, String) {
        let name = format!("btf_trace_{event}");
        match btf {
            None => (Status::Fail, "kernel BTF unavailable".into()),
            Some(b) => match b.id_by_type_name_kind(&name, aya_obj::btf::BtfKind::Typedef) {
                Ok(_) => (Status::Ok, format!("{event} in kernel BTF")),
                Err(_) => (Status::Fail, format!("no {name} in kernel BTF")),
            },
        }
    };
    match hook {
        Hook::BtfTracePoint(event) => {
            let (s, d) = btf_trace(event);
            (s, format!("tp_btf/{event}: {d}"))
        }
        Hook::RawTracePoint(event) => {
            let (s, d) = btf_trace(event);
            (s, format!("raw_tp/{event}: {d}"))
        }
        Hook::TracePoint(category, name) => match tracefs_dir() {
            None => (
                Status::Fail,
                format!("tracepoint {category}:{name}: tracefs not mounted"),
            ),
            Some(d)
                if Path::new(d)
                    .join("events")
                    .join(category)
                    .join(name)
                    .is_dir() =>
            {
                (Status::Ok, format!("tracepoint {category}:{name}"))
            }
            Some(_) => (
                Status::Fail,
                format!("tracepoint {category}:{name} does not exist"),
            ),
        },
    }
}

/// The effective capability set of this process.
fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_cap_eff(&status)
}

pub fn parse_cap_eff(status: &str) -> Option<u64> {
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))?
        .trim();
    u64::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_from_proc_status() {
        let s = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000000c000000000\n";
        let c = parse_cap_eff(s).unwrap();
        assert!(c & (1 << 39) != 0 && c & (1 << 38) != 0 && c & (1 << 21) == 0);
        assert_eq!(parse_cap_eff("Name: x\n"), None);
    }

    #[test]
    fn table_is_aligned() {
        let t = table(&[
            row("kernel", Status::Ok, "6.1"),
            row("probe block_completion", Status::Fail, "EPERM"),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        let col = lines[0].find("STATUS").unwrap();
        assert_eq!(lines[2].find("FAIL"), Some(col));
        assert_eq!(lines[1].find("ok"), Some(col));
    }
}
