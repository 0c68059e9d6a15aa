//! The network paths the network causes act on: the peers, their share of the latency and
//! the signals on the path to each.

use super::score::candidate;
use crate::breakdown::PartKind;
use crate::context::Context;
use crate::prose;
use crate::report::{Candidate, Cause};
use crate::signals::{SignalKind, path_hosts};

/// Replica peers (from the breakdown) and TCP peers; one host-wide entry when there are
/// network signals but no peer.
pub(super) fn peers(cx: &Context) -> Vec<Option<String>> {
    let mut out: Vec<Option<String>> = cx.parts.replicas().map(|p| Some(p.key.clone())).collect();
    for addr in cx.subject.peers.keys() {
        if !out.iter().any(|p| p.as_deref() == Some(addr)) {
            out.push(Some(addr.clone()));
        }
    }
    if out.is_empty()
        && cx
            .signals
            .iter()
            .any(|s| s.kind.is_interface_level() || s.kind == SignalKind::SkbDrops)
    {
        out.push(None);
    }
    out
}

/// The replica's share, or the local device's when `peer` serves it over the network; none
/// at all when the application's breakdown has no part for this peer (local-only IO),
/// unknown without a breakdown.
pub(super) fn net_share(cx: &Context, peer: Option<&str>) -> Option<f64> {
    let replica = peer.and_then(|p| cx.share(PartKind::Replica, Some(p)));
    let served = || {
        if served_device(cx, peer).is_none() && !network_file_system(cx) {
            return None;
        }
        cx.share(PartKind::LocalDevice, None)
    };
    let known = cx.parts.complete && !cx.shares.is_empty();
    replica.or_else(served).or(known.then_some(0.0))
}

/// The local IO reached no block device of the host, which has TCP peers: a file on a
/// network file system (NFS, CephFS, a FUSE client), whose time is spent with its servers.
/// Which of them holds it is not known, so each peer may hold all of it; the signals on
/// each path tell them apart.
pub(super) fn network_file_system(cx: &Context) -> bool {
    cx.parts.devices.is_empty() && cx.subject.devices.is_empty() && !cx.subject.peers.is_empty()
}

/// The local device that `peer` serves over the network (NVMe over TCP, iSCSI): a layer
/// the local IO's time goes to ([`Context::local_layers`]), when its `peer` is this one.
pub(super) fn served_device(cx: &Context, peer: Option<&str>) -> Option<String> {
    let peer = peer?;
    cx.local_layers()
        .iter()
        .find(|layer| {
            cx.subject
                .devices
                .get(*layer)
                .and_then(|d| d.peer.as_deref())
                == Some(peer)
        })
        .cloned()
}

/// A candidate of `cause` on the path to `peer`: its place, share and replica.
pub(super) fn net_candidate(cx: &Context, cause: Cause, peer: Option<&str>) -> Candidate {
    let mut c = candidate(cause, net_location(cx, peer), net_share(cx, peer));
    c.replica = net_replica(cx, peer);
    c
}

pub(super) fn net_location(cx: &Context, peer: Option<&str>) -> String {
    prose::net_location(
        peer,
        net_replica(cx, peer).is_some(),
        served_device(cx, peer).as_deref(),
        &cx.subject.name,
    )
}

/// The peer, when it is one of the replicas of the breakdown.
pub(super) fn net_replica(cx: &Context, peer: Option<&str>) -> Option<String> {
    peer.filter(|p| cx.parts.replicas().any(|r| r.key == *p))
        .map(str::to_string)
}

/// Network signals on the path to `peer`: TCP toward it, and drops, qdiscs and interfaces
/// of the hosts on the path (only the route's interface on the analysed host, when known).
pub(super) fn net_signals(cx: &Context, peer: Option<&str>) -> Vec<usize> {
    let hosts: Vec<&str> = path_hosts(cx.run, cx.subject, cx.parts)
        .into_iter()
        .filter(|h| {
            h.name == cx.subject.name
                || h.switch
                || peer.is_some_and(|p| h.addresses.iter().any(|a| a == p))
        })
        .map(|h| h.name.as_str())
        .collect();
    let only = peer.and_then(|p| cx.subject.peers.get(p)?.interface.as_deref());
    cx.signals
        .iter()
        .enumerate()
        .filter(|(_, s)| match s.kind {
            SignalKind::Retransmits | SignalKind::Srtt => {
                peer.is_some() && s.peer.as_deref() == peer
            }
            k if k.is_interface_level() || k == SignalKind::SkbDrops => {
                hosts.contains(&s.host.as_str())
                    && !(s.host == cx.subject.name
                        && only.is_some()
                        && s.interface.as_deref() != only)
            }
            _ => false,
        })
        .map(|(i, _)| i)
        .collect()
}
