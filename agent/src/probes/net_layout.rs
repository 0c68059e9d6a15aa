//! The network probes' view of the running kernel: struct offsets, and which arguments its
//! tracepoints pass (checked by type at the positions the probes read), all from kernel BTF
//! at load time. Each probe resolves on its own, so a kernel lacking one hook or field takes
//! only that probe down.

use agent_common::net::{
    DROP_LOCATION_ARG, DROP_REASON_ARG, EXCEED_KIND_ARG, NetLayout, OFFSET_NONE, REASON_NONE_SLOT,
    RT_ERR_ARG, RT_SK_ARG, RT_SKB_ARG, SK_CGROUP_TAGGED, SYNACK_REQ_ARG,
};
use agent_common::ready::{
    SKB_DROP, SOCK_EXCEED_BUF_LIMIT, SOCK_RCVQUEUE_FULL, TCP_RETRANSMIT, TCP_RETRANSMIT_SYNACK,
};
use anyhow::{Result, bail};

use crate::collectors::probe_spec::ProbeCollector;
use crate::collectors::probes;
use crate::kernel::btf::{ArgType, Btf};

/// The layout global and, per probe (by ready bit), why it cannot run on this kernel.
#[derive(Debug)]
pub struct NetGlobals {
    pub layout: NetLayout,
    /// The probes whose layout resolved.
    pub ready: u32,
    errors: Vec<(u32, String)>,
    /// Why retransmits cannot be counted per cgroup here, when that was asked for.
    pub cgroups_missing: Option<String>,
}

impl NetGlobals {
    /// The layout of this kernel; with `cgroups`, also where a socket's cgroup lies.
    pub fn resolve(btf: &Result<Btf>, cgroups: bool) -> NetGlobals {
        let mut g = NetGlobals {
            layout: NetLayout::EMPTY,
            ready: 0,
            errors: Vec::new(),
            cgroups_missing: None,
        };
        let btf = match btf {
            Ok(b) => b,
            Err(e) => {
                let net = probes().filter(|p| p.collector != ProbeCollector::Block);
                for p in net {
                    g.errors.push((p.ready, format!("{e:#}")));
                }
                g.cgroups_missing = cgroups.then(|| format!("{e:#}"));
                return g;
            }
        };
        let l = &mut g.layout;
        // Both retransmit probes read the peer address from `struct sock_common`.
        let sock = sock_common(btf, l).map_err(|e| format!("{e:#}"));
        let results = [
            (
                TCP_RETRANSMIT,
                (sock.clone().map_err(anyhow::Error::msg)).and_then(|()| retransmit(btf, l)),
            ),
            (
                TCP_RETRANSMIT_SYNACK,
                (sock.clone().map_err(anyhow::Error::msg)).and_then(|()| synack(btf, l)),
            ),
            (SKB_DROP, kfree_skb(btf, l)),
            (SOCK_EXCEED_BUF_LIMIT, exceed(btf, l)),
            (
                SOCK_RCVQUEUE_FULL,
                btf.tracepoint_args("sock_rcvqueue_full").map(|_| ()),
            ),
        ];
        for (probe, r) in results {
            match r {
                Ok(()) => g.ready |= probe,
                Err(e) => g.errors.push((probe, format!("kernel layout: {e:#}"))),
            }
        }
        if cgroups {
            // Without it retransmits are still counted per peer.
            let mut with = g.layout;
            match sock_cgroup(btf, &mut with) {
                Ok(()) => g.layout = with,
                Err(e) => g.cgroups_missing = Some(format!("kernel layout: {e:#}")),
            }
        }
        g
    }

    /// [`NetGlobals::resolve`] for the running kernel, under its lockdown mode.
    pub fn for_running_kernel(btf: &Result<Btf>, cgroups: bool) -> NetGlobals {
        let mut g = NetGlobals::resolve(btf, cgroups);
        if crate::kernel::lockdown() == crate::kernel::Lockdown::Confidentiality {
            g.without_helper_reads();
        }
        g
    }

    /// Under `lockdown=confidentiality`, which forbids `bpf_probe_read_kernel`: sockets'
    /// cgroups are read only where typed reads reach them (5.15 and later).
    pub fn without_helper_reads(&mut self) {
        if self.layout.sk_cgroup != OFFSET_NONE && self.layout.sk_cgroup_tagged != 0 {
            self.layout.sk_cgroup = OFFSET_NONE;
            self.layout.sk_cgroup_tagged = 0;
            self.cgroups_missing = Some(
                "before 5.15 a socket's cgroup is read with bpf_probe_read_kernel, which \
                 lockdown=confidentiality forbids"
                    .into(),
            );
        }
    }

    /// Why the probe of ready bit `probe` cannot run here, if it is a network probe whose
    /// layout did not resolve.
    pub fn missing_for(&self, probe: u32) -> Option<String> {
        self.errors
            .iter()
            .find(|(p, _)| *p == probe)
            .map(|(_, e)| e.clone())
    }
}

/// Checks that argument `i` of tracepoint `event` has type `t`.
fn expect(args: &[ArgType], i: usize, t: &ArgType, event: &str) -> Result<()> {
    match args.get(i) {
        Some(a) if a == t => Ok(()),
        Some(a) => bail!("tracepoint {event}: argument {i} is {a:?}, not {t:?}"),
        None => bail!("tracepoint {event} has no argument {i} ({t:?})"),
    }
}

fn ptr(name: &str) -> ArgType {
    ArgType::Ptr(name.into())
}

fn sock_common(btf: &Btf, l: &mut NetLayout) -> Result<()> {
    l.sock_common = btf.offset_of("sock", "__sk_common")?;
    l.sk_family = btf.offset_of_sized("sock_common", "skc_family", 2)?;
    l.sk_daddr = btf.offset_of_sized("sock_common", "skc_daddr", 4)?;
    // Absent on kernels without IPv6: IPv6 peers are then reported as `other`.
    l.sk_v6_daddr = btf
        .offset_of_sized("sock_common", "skc_v6_daddr", 16)
        .unwrap_or(OFFSET_NONE);
    // The socket's namespace (absent without CONFIG_NET_NS): retransmits are then not told
    // apart by namespace, and none is reported unattributed.
    let net = btf.offset_of_nested("sock_common", "skc_net", "net").ok();
    let inum = btf.offset_of_nested("net", "ns", "inum").ok();
    if let (Some(net), Some(inum)) = (net, inum) {
        l.sk_net = net;
        l.net_inum = inum;
    }
    Ok(())
}

/// Where a socket's cgroup v2 lies, and how its id is read from there.
fn sock_cgroup(btf: &Btf, l: &mut NetLayout) -> Result<()> {
    let data = btf.offset_of("sock", "sk_cgrp_data")?;
    // 5.15 and later: a pointer; before, a u64 tagged in its low bits.
    (l.sk_cgroup, l.sk_cgroup_tagged) = match btf.offset_of_sized("sock_cgroup_data", "cgroup", 8) {
        Ok(off) => (data + off, 0),
        Err(_) => (
            data + btf.offset_of_sized("sock_cgroup_data", "val", 8)?,
            SK_CGROUP_TAGGED,
        ),
    };
    l.cgroup_kn = btf.offset_of_sized("cgroup", "kn", 8)?;
    l.kn_id = btf.offset_of_sized("kernfs_node", "id", 8)?;
    Ok(())
}

fn retransmit(btf: &Btf, l: &mut NetLayout) -> Result<()> {
    const EVENT: &str = "tcp_retransmit_skb";
    let args = btf.tracepoint_args(EVENT)?;
    expect(&args, RT_SK_ARG, &ptr("sock"), EVENT)?;
    expect(&args, RT_SKB_ARG, &ptr("sk_buff"), EVENT)?;
    // Newer kernels also fire it for failed retransmits and pass the error.
    l.rt_has_err = match args.get(RT_ERR_ARG) {
        None => 0,
        Some(ArgType::Int { size: 4 }) => 1,
        Some(a) => bail!("tracepoint {EVENT}: argument {RT_ERR_ARG} is {a:?}, not the error"),
    };
    let cb = btf.member("sk_buff", "cb")?;
    let cb_size = btf.type_size(cb.type_id)?;
    let segs = btf.offset_of_sized("tcp_skb_cb", "tcp_gso_segs", 2)?;
    if segs + 2 > cb_size {
        bail!("tcp_skb_cb.tcp_gso_segs lies outside sk_buff.cb");
    }
    l.skb_gso_segs = btf.offset_of("sk_buff", "cb")? + segs;
    Ok(())
}

fn synack(btf: &Btf, l: &mut NetLayout) -> Result<()> {
    const EVENT: &str = "tcp_retransmit_synack";
    let args = btf.tracepoint_args(EVENT)?;
    expect(&args, SYNACK_REQ_ARG, &ptr("request_sock"), EVENT)?;
    l.req_common = btf.offset_of("request_sock", "__req_common")?;
    Ok(())
}

fn kfree_skb(btf: &Btf, l: &mut NetLayout) -> Result<()> {
    const EVENT: &str = "kfree_skb";
    let args = btf.tracepoint_args(EVENT)?;
    expect(&args, 0, &ptr("sk_buff"), EVENT)?;
    expect(&args, DROP_LOCATION_ARG, &ptr("void"), EVENT)?;
    match args.get(DROP_REASON_ARG) {
        // Before 5.17: no reason; every drop is counted as not specified, by location.
        None => {
            l.drop_has_reason = 0;
            l.reason_not_specified = REASON_NONE_SLOT;
        }
        Some(ArgType::Enum(e)) if e == "skb_drop_reason" => {
            l.drop_has_reason = 1;
            l.reason_not_specified =
                btf.enum_value("skb_drop_reason", "SKB_DROP_REASON_NOT_SPECIFIED")? as u32;
        }
        Some(a) => bail!("tracepoint {EVENT}: argument {DROP_REASON_ARG} is {a:?}, not the reason"),
    }
    Ok(())
}

fn exceed(btf: &Btf, _l: &mut NetLayout) -> Result<()> {
    const EVENT: &str = "sock_exceed_buf_limit";
    let args = btf.tracepoint_args(EVENT)?;
    // (sk, prot, long allocated, int kind)
    expect(&args, EXCEED_KIND_ARG, &ArgType::Int { size: 4 }, EVENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::btf::testing::Builder;
    use agent_common::ready::BLOCK_COMPLETION;

    /// A kernel like this one: 6.18 tracepoint signatures and struct layouts; without the
    /// error argument, like 5.10 (and its tagged `sock_cgroup_data`).
    fn kernel(with_err: bool, with_reason: bool) -> Btf {
        let mut b = Builder::new();
        let u8_t = b.int("unsigned char", 1);
        let u16_t = b.int("short unsigned int", 2);
        let u32_t = b.int("unsigned int", 4);
        let int_t = b.int("int", 4);
        let long_t = b.int("long int", 8);
        let in6 = b.composite(false, "in6_addr", 16, &[("s6_addr", u8_t, 0)]);
        let addrs = b.composite(
            false,
            "",
            8,
            &[("skc_daddr", u32_t, 0), ("skc_rcv_saddr", u32_t, 32)],
        );
        let pair = b.composite(true, "", 8, &[("skc_addrpair", long_t, 0), ("", addrs, 0)]);
        let common = b.composite(
            false,
            "sock_common",
            136,
            &[
                ("", pair, 0),
                ("skc_family", u16_t, 16 * 8),
                ("skc_v6_daddr", in6, 56 * 8),
            ],
        );
        let u64_t = b.int("long long unsigned int", 8);
        let cgroup_data = if with_err {
            let kn = b.composite(false, "kernfs_node", 128, &[("id", u64_t, 64 * 8)]);
            let kn_ptr = b.ptr(kn);
            let cgroup = b.composite(false, "cgroup", 2000, &[("kn", kn_ptr, 232 * 8)]);
            let cgroup_ptr = b.ptr(cgroup);
            b.composite(
                false,
                "sock_cgroup_data",
                16,
                &[("cgroup", cgroup_ptr, 0), ("classid", u32_t, 64)],
            )
        } else {
            let kn = b.composite(false, "kernfs_node", 128, &[("id", u64_t, 72 * 8)]);
            let kn_ptr = b.ptr(kn);
            b.composite(false, "cgroup", 2000, &[("kn", kn_ptr, 264 * 8)]);
            let tags = b.composite(
                false,
                "",
                8,
                &[
                    ("padding", u8_t, 8),
                    ("prioidx", u16_t, 16),
                    ("classid", u32_t, 32),
                ],
            );
            let union = b.composite(true, "", 8, &[("", tags, 0), ("val", u64_t, 0)]);
            b.composite(false, "sock_cgroup_data", 8, &[("", union, 0)])
        };
        let sock = b.composite(
            false,
            "sock",
            800,
            &[
                ("__sk_common", common, 0),
                ("sk_cgrp_data", cgroup_data, 664 * 8),
            ],
        );
        let req = b.composite(false, "request_sock", 300, &[("__req_common", common, 0)]);
        let cb_t = b.int("char48", 48);
        let skb = b.composite(false, "sk_buff", 232, &[("cb", cb_t, 40 * 8)]);
        let segs = b.composite(
            false,
            "",
            4,
            &[("tcp_gso_segs", u16_t, 0), ("tcp_gso_size", u16_t, 16)],
        );
        let cb_union = b.composite(true, "", 4, &[("tcp_tw_isn", u32_t, 0), ("", segs, 0)]);
        b.composite(
            false,
            "tcp_skb_cb",
            48,
            &[
                ("seq", u32_t, 0),
                ("end_seq", u32_t, 32),
                ("", cb_union, 64),
            ],
        );
        let reason_values: &[(&str, i32)] = &[
            ("SKB_NOT_DROPPED_YET", 0),
            ("SKB_CONSUMED", 1),
            ("SKB_DROP_REASON_NOT_SPECIFIED", 2),
        ];
        let reason = b.enumeration("skb_drop_reason", reason_values);
        let proto = b.composite(false, "proto", 400, &[]);
        let void_ptr = b.ptr(0);
        let sock_ptr = b.ptr(sock);
        let skb_ptr = b.ptr(skb);
        let req_ptr = b.ptr(req);
        let proto_ptr = b.ptr(proto);
        let mut tracepoint = |name: &str, args: &[u32]| {
            let mut params = vec![void_ptr];
            params.extend_from_slice(args);
            let fp = b.func_proto(&params);
            let p = b.ptr(fp);
            b.typedef(&format!("btf_trace_{name}"), p);
        };
        if with_err {
            tracepoint("tcp_retransmit_skb", &[sock_ptr, skb_ptr, int_t]);
        } else {
            tracepoint("tcp_retransmit_skb", &[sock_ptr, skb_ptr]);
        }
        tracepoint("tcp_retransmit_synack", &[sock_ptr, req_ptr]);
        if with_reason {
            tracepoint("kfree_skb", &[skb_ptr, void_ptr, reason, sock_ptr]);
        } else {
            tracepoint("kfree_skb", &[skb_ptr, void_ptr]);
        }
        tracepoint(
            "sock_exceed_buf_limit",
            &[sock_ptr, proto_ptr, long_t, int_t],
        );
        Btf::parse(&b.build()).unwrap()
    }

    #[test]
    fn resolves_offsets_and_argument_positions() {
        let g = NetGlobals::resolve(&Ok(kernel(true, true)), false);
        let l = g.layout;
        assert_eq!((l.sock_common, l.sk_daddr, l.sk_family), (0, 0, 16));
        assert_eq!(l.sk_v6_daddr, 56);
        assert_eq!(l.skb_gso_segs, 40 + 8);
        assert_eq!((l.rt_has_err, l.drop_has_reason), (1, 1));
        assert_eq!(l.reason_not_specified, 2);
        // No sock_rcvqueue_full in this BTF: only that probe is down.
        assert_eq!(
            g.ready,
            TCP_RETRANSMIT | TCP_RETRANSMIT_SYNACK | SKB_DROP | SOCK_EXCEED_BUF_LIMIT
        );
        assert!(g.missing_for(SOCK_RCVQUEUE_FULL).is_some());
        assert!(g.missing_for(SKB_DROP).is_none());
        assert!(g.missing_for(BLOCK_COMPLETION).is_none());
    }

    #[test]
    fn older_kernels_without_error_or_reason_arguments() {
        let g = NetGlobals::resolve(&Ok(kernel(false, false)), false);
        assert_eq!(g.layout.rt_has_err, 0);
        assert!(g.ready & TCP_RETRANSMIT != 0);
        // 5.10: drops carry no reason; they are all counted as not specified, by location.
        assert!(g.ready & SKB_DROP != 0, "{g:?}");
        assert_eq!(g.layout.drop_has_reason, 0);
        assert_eq!(g.layout.reason_not_specified, REASON_NONE_SLOT);
    }

    #[test]
    fn sockets_cgroups_are_read_only_when_asked() {
        let off = NetGlobals::resolve(&Ok(kernel(true, true)), false);
        assert_eq!(off.layout.sk_cgroup, OFFSET_NONE);
        assert!(off.cgroups_missing.is_none());
        // 5.15 and later: a typed pointer, also under lockdown.
        let mut new = NetGlobals::resolve(&Ok(kernel(true, true)), true);
        let l = new.layout;
        assert_eq!((l.sk_cgroup, l.sk_cgroup_tagged), (664, 0));
        assert_eq!((l.cgroup_kn, l.kn_id), (232, 64));
        new.without_helper_reads();
        assert_eq!(new.layout.sk_cgroup, 664);
        // Before: the tagged u64, read with the helper, which lockdown takes away.
        let mut old = NetGlobals::resolve(&Ok(kernel(false, false)), true);
        let l = old.layout;
        assert_eq!((l.sk_cgroup, l.sk_cgroup_tagged), (664, SK_CGROUP_TAGGED));
        assert_eq!((l.cgroup_kn, l.kn_id), (264, 72));
        assert!(old.ready & TCP_RETRANSMIT != 0);
        old.without_helper_reads();
        assert_eq!(old.layout.sk_cgroup, OFFSET_NONE);
        assert!(old.cgroups_missing.unwrap().contains("lockdown"));
        // Without the field, retransmits are still counted per peer.
        let g = NetGlobals::resolve(&Ok(kernel_without_cgroups()), true);
        assert!(g.ready & TCP_RETRANSMIT != 0);
        assert_eq!(g.layout.sk_cgroup, OFFSET_NONE);
        assert!(g.cgroups_missing.unwrap().contains("sk_cgrp_data"));
    }

    /// A kernel built without `CONFIG_SOCK_CGROUP_DATA`.
    fn kernel_without_cgroups() -> Btf {
        let mut b = Builder::new();
        let u16_t = b.int("short unsigned int", 2);
        let u32_t = b.int("unsigned int", 4);
        let common = b.composite(
            false,
            "sock_common",
            136,
            &[("skc_daddr", u32_t, 0), ("skc_family", u16_t, 16 * 8)],
        );
        let sock = b.composite(false, "sock", 800, &[("__sk_common", common, 0)]);
        let cb_t = b.int("char48", 48);
        let skb = b.composite(false, "sk_buff", 232, &[("cb", cb_t, 40 * 8)]);
        b.composite(false, "tcp_skb_cb", 48, &[("tcp_gso_segs", u16_t, 64)]);
        let void_ptr = b.ptr(0);
        let (sock_ptr, skb_ptr) = (b.ptr(sock), b.ptr(skb));
        let fp = b.func_proto(&[void_ptr, sock_ptr, skb_ptr]);
        let p = b.ptr(fp);
        b.typedef("btf_trace_tcp_retransmit_skb", p);
        Btf::parse(&b.build()).unwrap()
    }

    #[test]
    fn no_btf_takes_every_network_probe_down() {
        let g = NetGlobals::resolve(&Err(anyhow::anyhow!("no BTF here")), true);
        assert_eq!(g.ready, 0);
        assert!(g.missing_for(TCP_RETRANSMIT).unwrap().contains("no BTF"));
    }
}
