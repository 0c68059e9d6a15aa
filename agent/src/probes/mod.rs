//! Loads stornet's eBPF object and attaches each probe on its own, recording a status per
//! probe: a hook missing on this kernel takes that probe down, never the agent. The probes
//! are declared in the collector registry (`crate::collectors`); what they read from this kernel is resolved from BTF in
//! `block_layout` and `net_layout` and handed over as load-time globals, with a ready bit for
//! each probe whose part resolved.

pub mod block_layout;
pub mod field_offsets;
pub mod net_layout;
pub mod on_demand;

use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};
use aya::programs::{BtfTracePoint, RawTracePoint, TracePoint};
use aya::{Btf as AyaBtf, Ebpf, EbpfLoader};
use tracing::{debug, info, warn};

use crate::collectors::probe_spec::{self as spec, Attach, Hook, ProbeCollector, ProbeSpec};
use crate::collectors::probes as all_probes;
use crate::kernel::btf::{Btf, KernelBtf};
use crate::model::{Collector, MetricFamily};
use metric_names::labels::PROBE;
use on_demand::OnDemand;

/// The eBPF object built by `build.rs` from the `agent-ebpf` crate.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/stornet"));

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ProbeStatus {
    pub name: String,
    pub up: bool,
    /// Why a probe is down, or the hook it is attached to.
    pub detail: String,
}

/// The loaded object (kept alive: dropping it detaches every program) and each probe's status.
pub struct Probes {
    pub ebpf: Option<Ebpf>,
    pub status: Vec<ProbeStatus>,
    /// The network layout the probes were loaded with.
    net_layout: agent_common::net::NetLayout,
    /// Probes loaded and detached, for their collector to take and attach when needed.
    on_demand: Vec<OnDemand>,
    /// Whether each probe that attaches on demand is attached now.
    attached: Vec<(&'static str, Arc<AtomicBool>)>,
}

/// Load-time globals, resolved from kernel BTF, each needed by some probes.
pub struct Globals {
    pub block: Result<agent_common::block::BlockLayout>,
    /// Why the issuer probe's part of the block layout did not resolve, if it did not.
    pub issuer_missing: Option<String>,
    /// Why the bio probes' part of the block layout did not resolve, if it did not.
    pub bio_missing: Option<String>,
    pub net: net_layout::NetGlobals,
}

impl Globals {
    /// With `cgroups`, the network layout also says where a socket's cgroup lies.
    pub fn resolve(btf: &Result<Btf>, cgroups: bool) -> Globals {
        let (mut block, issuer) = match btf {
            Ok(btf) => (
                block_layout::layout(btf, crate::kernel::version()),
                block_layout::issuer(btf),
            ),
            Err(e) => (Err(anyhow::anyhow!("{e:#}")), Err(anyhow::anyhow!("{e:#}"))),
        };
        let issuer_missing = match (&mut block, issuer) {
            (Ok(layout), Ok((rq_bio, arg))) => {
                layout.rq_bio = rq_bio;
                layout.getrq_bio_arg = arg;
                None
            }
            (_, Err(e)) => Some(format!("kernel layout: {e:#}")),
            (Err(_), Ok(_)) => None,
        };
        let bio_missing = match (&mut block, btf) {
            (Ok(layout), Ok(btf)) => block_layout::bio_layers(btf, layout)
                .err()
                .map(|e| format!("kernel layout: {e:#}")),
            _ => None,
        };
        Globals {
            block,
            issuer_missing,
            bio_missing,
            net: net_layout::NetGlobals::for_running_kernel(btf, cgroups),
        }
    }

    /// Why a probe cannot run on this kernel, if a global it needs did not resolve.
    fn missing_for(&self, probe: &ProbeSpec) -> Option<String> {
        match (probe.collector, &self.block) {
            (ProbeCollector::Block, Err(e)) => Some(format!("kernel layout: {e:#}")),
            (ProbeCollector::Block, Ok(_)) if probe.ready == spec::BLOCK_ISSUER.ready => {
                self.issuer_missing.clone()
            }
            (ProbeCollector::Block, Ok(_)) if probe.ready & spec::BIO_READY != 0 => {
                self.bio_missing.clone()
            }
            (ProbeCollector::Block, Ok(_)) => None,
            _ => self.net.missing_for(probe.ready),
        }
    }

    /// The spec as this kernel loads it: the issuer and bio queue probes have a program per
    /// position of the bio among their tracepoint's arguments.
    fn program_for(&self, spec: &ProbeSpec) -> ProbeSpec {
        match &self.block {
            Ok(l) if spec.ready == spec::BLOCK_ISSUER.ready && l.getrq_bio_arg == 1 => ProbeSpec {
                program: spec::BLOCK_ISSUER_AFTER_QUEUE,
                ..*spec
            },
            Ok(l) if spec.ready == spec::BLOCK_BIO_QUEUE.ready && l.bio_queue_arg == 1 => {
                ProbeSpec {
                    program: spec::BLOCK_BIO_QUEUE_AFTER_QUEUE,
                    ..*spec
                }
            }
            _ => *spec,
        }
    }

    /// The `PROBES_READY` bits: every probe whose layout resolved.
    fn ready(&self) -> u32 {
        all_probes()
            .filter(|p| self.missing_for(p).is_none())
            .fold(0, |bits, p| bits | p.ready)
    }
}

impl Probes {
    /// Loads the object and attaches every probe in `wanted` (by name), with the kernel's
    /// BTF read once by the caller; with `cgroups`, retransmits are also counted per cgroup.
    pub fn load(wanted: &[&str], kernel: &KernelBtf, cgroups: bool) -> Probes {
        let lockdown = crate::kernel::lockdown();
        info!(
            kernel = %crate::kernel::release(),
            lockdown = lockdown.as_str(),
            "loading probes"
        );
        let globals = Globals::resolve(&kernel.btf, cgroups);
        if let Some(reason) = &globals.net.cgroups_missing {
            warn!(%reason, "retransmits cannot be counted per cgroup on this kernel");
        }
        let specs: Vec<&ProbeSpec> = all_probes().filter(|p| wanted.contains(&p.name)).collect();
        let ebpf = match load_object(&globals) {
            Ok(e) => e,
            Err(e) => {
                let reason = format!("loading eBPF object: {e:#}");
                warn!(%reason, "no probe can run");
                return Probes {
                    ebpf: None,
                    status: specs
                        .iter()
                        .map(|p| ProbeStatus {
                            name: p.name.into(),
                            up: false,
                            detail: reason.clone(),
                        })
                        .collect(),
                    net_layout: globals.net.layout,
                    on_demand: Vec::new(),
                    attached: Vec::new(),
                };
            }
        };
        let mut probes = Probes {
            ebpf: Some(ebpf),
            status: Vec::new(),
            net_layout: globals.net.layout,
            on_demand: Vec::new(),
            attached: Vec::new(),
        };
        for spec in specs {
            let spec = &globals.program_for(spec);
            let result = match globals.missing_for(spec) {
                Some(reason) => Err(anyhow::anyhow!(reason)),
                None => probes.attach(spec, kernel.aya()),
            };
            let status = match result {
                Ok(()) if spec.attach == Attach::OnDemand => {
                    info!(probe = spec.name, hook = ?spec.hook, "probe loaded, attached when needed");
                    ProbeStatus {
                        name: spec.name.into(),
                        up: true,
                        detail: format!("{:?}, attached when needed", spec.hook),
                    }
                }
                Ok(()) => {
                    info!(probe = spec.name, hook = ?spec.hook, "probe attached");
                    ProbeStatus {
                        name: spec.name.into(),
                        up: true,
                        detail: format!("{:?}", spec.hook),
                    }
                }
                Err(e) => {
                    let full = format!("{e:#}");
                    let mut reason = concise(&full);
                    if lockdown == crate::kernel::Lockdown::Confidentiality {
                        reason = format!("under lockdown=confidentiality: {reason}");
                    }
                    warn!(probe = spec.name, %reason, "probe down");
                    if reason != full {
                        debug!(probe = spec.name, error = %full, "probe down: the whole error");
                    }
                    ProbeStatus {
                        name: spec.name.into(),
                        up: false,
                        detail: reason,
                    }
                }
            };
            probes.status.push(status);
        }
        probes
    }

    fn attach(&mut self, spec: &ProbeSpec, btf: Option<&AyaBtf>) -> Result<()> {
        let ebpf = self.ebpf.as_mut().context("eBPF object not loaded")?;
        let prog = ebpf
            .program_mut(spec.program)
            .with_context(|| format!("program {} missing from the object", spec.program))?;
        match spec.hook {
            Hook::BtfTracePoint(event) => {
                let btf = btf.context("kernel BTF unavailable for tp_btf")?;
                let p: &mut BtfTracePoint = prog.try_into()?;
                p.load(event, btf)
                    .with_context(|| format!("loading tp_btf/{event}"))?;
                if spec.attach == Attach::OnDemand {
                    let p = OnDemand::new(spec.name, p.fd()?.as_fd())
                        .with_context(|| format!("tp_btf/{event}"))?;
                    self.attached.push((spec.name, p.flag()));
                    self.on_demand.push(p);
                    return Ok(());
                }
                p.attach()
                    .with_context(|| format!("attaching tp_btf/{event}"))?;
            }
            Hook::TracePoint(category, name) => {
                let p: &mut TracePoint = prog.try_into()?;
                p.load()
                    .with_context(|| format!("loading {category}:{name}"))?;
                p.attach(category, name)
                    .with_context(|| format!("attaching {category}:{name}"))?;
            }
            Hook::RawTracePoint(name) => {
                let p: &mut RawTracePoint = prog.try_into()?;
                p.load().with_context(|| format!("loading raw_tp/{name}"))?;
                p.attach(name)
                    .with_context(|| format!("attaching raw_tp/{name}"))?;
            }
        }
        Ok(())
    }

    /// Whether the retransmit probes tell sockets' network namespaces apart.
    pub fn net_layout_has_namespaces(&self) -> bool {
        self.net_layout.sk_net != agent_common::net::OFFSET_NONE
    }

    /// Whether the retransmit probes count per cgroup too.
    pub fn net_layout_has_cgroups(&self) -> bool {
        self.net_layout.sk_cgroup != agent_common::net::OFFSET_NONE
    }

    pub fn is_up(&self, probe: &str) -> bool {
        self.status.iter().any(|s| s.name == probe && s.up)
    }

    /// Takes a probe that attaches on demand, detached, for its collector to own.
    pub fn take_on_demand(&mut self, name: &str) -> Option<OnDemand> {
        let i = self.on_demand.iter().position(|p| p.name == name)?;
        Some(self.on_demand.remove(i))
    }

    /// Takes a map out of the object for a collector to own.
    pub fn take_map(&mut self, name: &str) -> Option<aya::maps::Map> {
        self.ebpf.as_mut()?.take_map(name)
    }

    pub fn status_collector(&self) -> StatusCollector {
        StatusCollector {
            status: self.status.clone(),
            attached: self.attached.clone(),
        }
    }
}

/// A reason short enough for a log line and a table cell: a verifier log is cut to its error
/// line (the whole error goes to the debug log).
pub fn concise(full: &str) -> String {
    let Some((head, log)) = full.split_once("Verifier output:") else {
        return full.to_string();
    };
    let noise = |l: &str| {
        l.is_empty()
            || l.starts_with(':')
            || ["verification time", "stack depth", "processed "]
                .iter()
                .any(|p| l.starts_with(p))
    };
    let error = log
        .lines()
        .map(str::trim)
        .rfind(|l| !noise(l))
        .unwrap_or("(no log)");
    format!("{} verifier: {error}", head.trim_end())
}

fn load_object(globals: &Globals) -> Result<Ebpf> {
    let mut loader = EbpfLoader::new();
    // Probes whose layout did not resolve keep their ready bit clear and do nothing if run.
    let ready = globals.ready();
    loader.override_global(agent_common::ready::GLOBAL, &ready, true);
    let block = globals.block.as_ref().copied().unwrap_or_default();
    loader.override_global(agent_common::block::LAYOUT_GLOBAL, &block, true);
    let op_classes = agent_common::block::op_classes(&block);
    loader.override_global(agent_common::block::OP_CLASS_GLOBAL, &op_classes, true);
    loader.override_global(agent_common::net::LAYOUT_GLOBAL, &globals.net.layout, true);
    if OBJECT.is_empty() {
        bail!(
            "this stornet-agent was built without its eBPF programs (AYA_BUILD_SKIP); rebuild it without that variable"
        );
    }
    let object = field_offsets::patch(OBJECT, &block).context("reading the eBPF object")?;
    debug!(
        loads = object.loads,
        "field offsets written into the block probes' loads"
    );
    Ok(loader.load(object.bytes())?)
}

/// `stornet_probe_up{probe}` and `stornet_probe_attached{probe}`.
pub struct StatusCollector {
    status: Vec<ProbeStatus>,
    attached: Vec<(&'static str, Arc<AtomicBool>)>,
}

impl Collector for StatusCollector {
    fn name(&self) -> &'static str {
        "probe_status"
    }

    fn collect(&self, out: &mut Vec<MetricFamily>) -> Result<()> {
        let mut up = MetricFamily::of(&metric_names::agent::PROBE_UP);
        let mut attached = MetricFamily::of(&metric_names::agent::PROBE_ATTACHED);
        for s in &self.status {
            let l = [(PROBE, s.name.as_str())];
            up.scalar(&l, if s.up { 1.0 } else { 0.0 });
            let on = match self.attached.iter().find(|(name, _)| *name == s.name) {
                Some((_, flag)) => flag.load(Ordering::Relaxed),
                None => s.up,
            };
            attached.scalar(&l, if on { 1.0 } else { 0.0 });
        }
        out.extend([up, attached]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verifier_log_is_cut_to_its_error() {
        let full = "loading tp_btf/block_rq_complete: the BPF_PROG_LOAD syscall returned \
                    Permission denied (os error 13). Verifier output: arg#0 type is not a \
                    struct\n0: (18) r3 = 0x1\n201: (79) r3 = *(u64 *)(r10 -120)\ninvalid read \
                    from stack R10 off=-120 size=8\nverification time 49849 usec\nstack depth \
                    120\nprocessed 1284 insns\n: Permission denied (os error 13)";
        assert_eq!(
            concise(full),
            "loading tp_btf/block_rq_complete: the BPF_PROG_LOAD syscall returned Permission \
             denied (os error 13). verifier: invalid read from stack R10 off=-120 size=8"
        );
        assert_eq!(concise("no such hook"), "no such hook");
    }

    /// The spec and the kernel side agree: every program and map a spec names is in the
    /// object, and every map of the object belongs to some probe.
    #[test]
    fn the_specs_match_the_object() {
        let obj = aya_obj::Object::parse(OBJECT).unwrap();
        for p in all_probes() {
            assert!(obj.programs.contains_key(p.program), "{}", p.program);
            assert!(obj.programs.contains_key(spec::BLOCK_ISSUER_AFTER_QUEUE));
            assert!(obj.programs.contains_key(spec::BLOCK_BIO_QUEUE_AFTER_QUEUE));
            for m in p.maps {
                assert!(obj.maps.contains_key(*m), "{m}");
            }
        }
        // The block settings are a global in a section of their own, a map user space writes.
        assert!(obj.maps.contains_key(agent_common::block::CONTROL_SECTION));
        for name in obj.maps.keys().filter(|n| !n.starts_with('.')) {
            assert!(
                all_probes().any(|p| p.maps.contains(&name.as_str())),
                "map {name} belongs to no probe"
            );
        }
    }

    /// Every marked field load of the object gets its offset, and the block probes have
    /// them: a load the patcher missed would keep its marker, which the verifier refuses.
    #[test]
    fn every_marked_load_of_the_object_gets_its_offset() {
        use agent_common::block::{BlockLayout, FIELD_MARK, LAYOUT_WORDS};
        let marked = |bytes: &[u8]| {
            let obj = aya_obj::Object::parse(bytes).unwrap();
            let mut n = 0;
            for f in obj.functions.values() {
                for i in &f.instructions {
                    let word = i.off as i32 - FIELD_MARK as i32;
                    if i.code & 0xe7 == 0x61 && (0..LAYOUT_WORDS as i32).contains(&word) {
                        n += 1;
                    }
                }
            }
            n
        };
        let before = marked(OBJECT);
        assert!(before > 20, "only {before} marked loads");
        // Every word an offset that fits: each load must lose its marker.
        let mut layout = BlockLayout::default();
        // SAFETY: BlockLayout is u32s only, `LAYOUT_WORDS` of them.
        let words = unsafe {
            std::slice::from_raw_parts_mut((&raw mut layout).cast::<u32>(), LAYOUT_WORDS)
        };
        for (i, w) in words.iter_mut().enumerate() {
            *w = 8 * i as u32 + 8;
        }
        let patched = field_offsets::patch(OBJECT, &layout).unwrap();
        assert_eq!(patched.loads, before);
        assert_eq!(marked(patched.bytes()), 0);
    }

    /// Each program is one BPF function: no calls of other functions (`memset`, say). A
    /// 5.10 kernel panicked when a load in a program of two functions faulted and the
    /// exception table was searched (see `disk_dev` on the kernel side).
    #[test]
    fn every_program_is_one_function() {
        let obj = aya_obj::Object::parse(OBJECT).unwrap();
        const CALL: u8 = 0x85;
        const PSEUDO_CALL: u8 = 1;
        for f in obj.functions.values() {
            let calls = f
                .instructions
                .iter()
                .filter(|i| i.code == CALL && i.src_reg() == PSEUDO_CALL)
                .count();
            assert_eq!(calls, 0, "{} calls another BPF function", f.name);
        }
    }
}
