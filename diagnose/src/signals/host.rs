//! How one host's per-interval values fill the analysis model: each family with a one-to-one
//! [`Place`] goes where it says (a device's, peer's or interface's series); the rest are
//! combined here: block devices per op (means from sums and counts), what each device sits
//! on and who serves it, the kernel's drops, CPU pressure and throttling, and the qdiscs.

use std::collections::BTreeSet;

use analysis::{BlockOp, Host, Peer, Qdisc, Series};

use super::{DEV_OP, Field, Key, Place, QDISC, Values, family_of, interface_name, replica_address};

/// Fills a host of the analysis model from its per-interval values (`n` intervals).
pub fn host(name: &str, addresses: Vec<String>, v: &Values, n: usize) -> Host {
    let mut h = Host {
        name: name.to_string(),
        addresses,
        ..Host::default()
    };
    block_ops(&mut h, v, n);
    for (k, s) in v {
        place(&mut h, k, s);
    }
    h.devices.retain(|name, _| !name.is_empty());
    device_parents(&mut h, v);
    for k in keys(v, Field::SkbDrops) {
        h.skb_drops.insert(k.labels[0].clone(), v[k].clone());
    }
    let cpu_some = ["cpu".to_string(), "some".to_string()];
    if let Some(s) = get(v, Field::PressureStalled, &cpu_some) {
        h.cpu_stalled_seconds = s.clone();
    }
    if let Some(s) = get(v, Field::CpuThrottled, &[]) {
        h.cpu_throttled_seconds = s.clone();
    }
    qdiscs(&mut h, v);
    h
}

/// Puts a series where its family's place says, if that is one series of the model.
fn place(h: &mut Host, k: &Key, s: &Series) {
    let series = match family_of(k.field).place {
        Place::Device(_, field) => field(h.devices.entry(k.labels[0].clone()).or_default()),
        Place::Peer(_, field) => match peer(h, &k.labels[0]) {
            Some(p) => field(p),
            None => return,
        },
        Place::Interface(_, field) => {
            let (namespace, interface) = (&k.labels[0], &k.labels[1]);
            if interface == "lo" || interface.is_empty() {
                return;
            }
            let name = interface_name(namespace, interface);
            field(h.interfaces.entry(name).or_default())
        }
        Place::Custom(_) => return,
    };
    *series = s.clone();
}

/// The peer of that address, unless it is no other host: `other` folds peers beyond the
/// agent's cap, and a loopback peer is this host itself.
fn peer<'a>(h: &'a mut Host, addr: &str) -> Option<&'a mut Peer> {
    let local = addr
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified());
    if addr.is_empty() || addr == "other" || local {
        return None;
    }
    Some(h.peers.entry(addr.to_string()).or_default())
}

fn get<'a>(v: &'a Values, field: Field, labels: &[String]) -> Option<&'a Series> {
    v.get(&Key {
        field,
        labels: labels.to_vec(),
    })
}

fn keys(v: &Values, field: Field) -> impl Iterator<Item = &Key> {
    v.keys().filter(move |k| k.field == field)
}

/// `a / b` per interval, where both are known and `b` is not 0.
fn ratio(a: Option<&Series>, b: Option<&Series>, n: usize) -> Series {
    let (Some(a), Some(b)) = (a, b) else {
        return Vec::new();
    };
    (0..n)
        .map(|i| {
            let (x, y) = (a.get(i).copied().flatten()?, b.get(i).copied().flatten()?);
            (y > 0.0).then(|| x / y)
        })
        .collect()
}

/// Block devices, per op: requests, mean queue and service time, errors.
fn block_ops(h: &mut Host, v: &Values, n: usize) {
    let dev_ops: BTreeSet<Vec<String>> = v
        .keys()
        .filter(|k| family_of(k.field).labels == DEV_OP)
        .map(|k| k.labels.clone())
        .collect();
    for l in &dev_ops {
        let ios = get(v, Field::BlockRequests, l).or(get(v, Field::BlockServiceCount, l));
        let op = BlockOp {
            ios: ios.cloned().unwrap_or_default(),
            queue_seconds: ratio(
                get(v, Field::BlockQueueSum, l),
                get(v, Field::BlockQueueCount, l),
                n,
            ),
            service_seconds: ratio(
                get(v, Field::BlockServiceSum, l),
                get(v, Field::BlockServiceCount, l),
                n,
            ),
            errors: get(v, Field::BlockErrors, l).cloned().unwrap_or_default(),
        };
        h.devices
            .entry(l[0].clone())
            .or_default()
            .ops
            .insert(l[1].clone(), op);
    }
}

/// What each device with IO sits on, and who serves it over the network, as the last
/// interval that read it says.
fn device_parents(h: &mut Host, v: &Values) {
    for k in keys(v, Field::BlockParent) {
        let (device, parent, peer) = (&k.labels[0], &k.labels[1], &k.labels[2]);
        let listed = v[k].iter().rev().find_map(|x| *x).is_some_and(|x| x > 0.0);
        let Some(d) = h.devices.get_mut(device).filter(|_| listed) else {
            continue;
        };
        if !parent.is_empty() && !d.parents.contains(parent) {
            d.parents.push(parent.clone());
        }
        if !peer.is_empty() {
            d.peer = Some(replica_address(peer));
        }
    }
}

/// Qdiscs: named by kind, with handle and parent only where needed to tell them apart.
fn qdiscs(h: &mut Host, v: &Values) {
    let qdiscs: BTreeSet<Vec<String>> = v
        .keys()
        .filter(|k| family_of(k.field).labels == QDISC)
        .map(|k| k.labels.clone())
        .collect();
    for l in &qdiscs {
        let same = |upto: usize| {
            qdiscs
                .iter()
                .filter(|o| o[..2] == l[..2] && o[2..upto] == l[2..upto])
                .count()
        };
        let name = if same(3) == 1 {
            l[2].clone()
        } else if same(4) == 1 {
            format!("{} {}", l[2], l[3])
        } else {
            format!("{} {} {}", l[2], l[3], l[4])
        };
        h.qdiscs.push(Qdisc {
            interface: interface_name(&l[0], &l[1]),
            qdisc: name,
            drops: get(v, Field::QdiscDrops, l).cloned().unwrap_or_default(),
            backlog_bytes: get(v, Field::QdiscBacklog, l).cloned().unwrap_or_default(),
            overlimits: get(v, Field::QdiscOverlimits, l)
                .cloned()
                .unwrap_or_default(),
            sent_bytes: get(v, Field::QdiscSentBytes, l)
                .cloned()
                .unwrap_or_default(),
            rate_bytes_per_second: get(v, Field::QdiscRate, l).cloned().unwrap_or_default(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::drop_own_peers;

    #[test]
    fn values_fill_the_model() {
        let n = 2;
        let s = |a: f64, b: f64| -> Series { vec![Some(a), Some(b)] };
        let mut v = Values::new();
        let dev = ["loop3", "write"];
        v.insert(Key::new(Field::BlockQueueSum, &dev), s(0.2, 0.0));
        v.insert(Key::new(Field::BlockQueueCount, &dev), s(100.0, 0.0));
        v.insert(Key::new(Field::BlockServiceSum, &dev), s(1.0, 0.5));
        v.insert(Key::new(Field::BlockServiceCount, &dev), s(100.0, 50.0));
        v.insert(Key::new(Field::BlockRequests, &dev), s(100.0, 50.0));
        v.insert(Key::new(Field::BlockInflight, &["loop3"]), s(4.0, 4.0));
        v.insert(
            Key::new(Field::TcpRetransmits, &["198.18.0.2"]),
            s(3.0, 0.0),
        );
        v.insert(Key::new(Field::TcpRetransmits, &["other"]), s(9.0, 9.0));
        v.insert(Key::new(Field::TcpSrtt, &["127.0.0.1"]), s(1e-5, 1e-5));
        v.insert(Key::new(Field::SkbDrops, &["qdisc_drop"]), s(7.0, 1.0));
        for (h, p) in [("8001:", "root"), ("0:", "8001:1"), ("0:", "8001:2")] {
            v.insert(
                Key::new(Field::QdiscDrops, &["stn-a", "veth-a", "fq_codel", h, p]),
                s(1.0, 2.0),
            );
        }
        v.insert(
            Key::new(Field::QdiscDrops, &["host", "eth0", "tbf", "1:", "root"]),
            s(0.0, 0.0),
        );
        v.insert(
            Key::new(Field::InterfaceMtu, &["stn-a", "veth-a"]),
            s(9000.0, 9000.0),
        );
        v.insert(
            Key::new(Field::InterfaceMtu, &["stn-a", "lo"]),
            s(65536.0, 65536.0),
        );
        let h = host("h1", vec!["198.18.0.1".into()], &v, n);
        let op = &h.devices["loop3"].ops["write"];
        assert_eq!(op.queue_seconds, vec![Some(0.002), None], "0/0 is missing");
        assert_eq!(op.service_seconds, vec![Some(0.01), Some(0.01)]);
        assert_eq!(op.ios, s(100.0, 50.0));
        assert_eq!(h.devices["loop3"].inflight, s(4.0, 4.0));
        assert_eq!(h.peers.len(), 1, "`other` is no address, loopback no peer");
        assert_eq!(h.peers["198.18.0.2"].retransmits, s(3.0, 0.0));
        assert_eq!(h.skb_drops["qdisc_drop"], s(7.0, 1.0));
        let names: Vec<String> = h
            .qdiscs
            .iter()
            .map(|q| format!("{} {}", q.interface, q.qdisc))
            .collect();
        assert_eq!(
            names,
            [
                "eth0 tbf",
                "stn-a/veth-a fq_codel 0: 8001:1",
                "stn-a/veth-a fq_codel 0: 8001:2",
                "stn-a/veth-a fq_codel 8001:",
            ]
        );
        assert_eq!(h.interfaces.len(), 1, "loopback left out");
        assert_eq!(h.interfaces["stn-a/veth-a"].mtu_bytes, s(9000.0, 9000.0));
    }

    #[test]
    fn requests_come_from_the_io_size_count_or_else_the_service_count() {
        let mut v = Values::new();
        v.insert(
            Key::new(Field::BlockServiceCount, &["vda", "read"]),
            vec![Some(7.0)],
        );
        let h = host("h", Vec::new(), &v, 1);
        assert_eq!(h.devices["vda"].ops["read"].ios, vec![Some(7.0)]);
        assert!(h.devices["vda"].ops["read"].queue_seconds.is_empty());
    }

    #[test]
    fn the_hosts_own_address_is_no_peer() {
        let mut v = Values::new();
        for peer in ["198.18.0.1", "198.18.0.2"] {
            v.insert(Key::new(Field::TcpRetransmits, &[peer]), vec![Some(1.0)]);
        }
        let mut h = host("h1", vec!["198.18.0.1".into()], &v, 1);
        drop_own_peers(&mut h);
        assert_eq!(h.peers.keys().collect::<Vec<_>>(), ["198.18.0.2"]);
    }
}
