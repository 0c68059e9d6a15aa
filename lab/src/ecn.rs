//! ECN in the lab: a path that marks congestion instead of dropping. TCP negotiates ECN when
//! both ends have `net.ipv4.tcp_ecn = 1`; an nftables rule at the receiver marks a share of
//! the ECN-capable packets that arrive as Congestion Experienced, as an AQM queue would
//! (the receiver then echoes each mark to the sender). Nothing is dropped.

use anyhow::Result;

use crate::netns::Netns;

/// The nftables table of [`mark_ce`].
const TABLE: &str = "stornet_ecn";

/// Lets TCP in `ns` ask for ECN on the connections it opens and accept it on the others.
pub fn enable(ns: &Netns) -> Result<()> {
    ns.run("sysctl", &["-q", "-w", "net.ipv4.tcp_ecn=1"])?;
    Ok(())
}

/// Marks `per_mille` of the ECN-capable TCP packets arriving in `ns` as Congestion
/// Experienced, at random.
pub fn mark_ce(ns: &Netns, per_mille: u32) -> Result<()> {
    ns.run("nft", &["add", "table", "inet", TABLE])?;
    ns.run(
        "nft",
        &[
            "add",
            "chain",
            "inet",
            TABLE,
            "input",
            "{ type filter hook input priority 0; }",
        ],
    )?;
    let rule = format!(
        "ip protocol tcp ip ecn {{ ect0, ect1 }} numgen random mod 1000 < {per_mille} \
         ip ecn set ce counter"
    );
    let mut args = vec!["add", "rule", "inet", TABLE, "input"];
    args.extend(rule.split(' '));
    ns.run("nft", &args)?;
    Ok(())
}

/// Packets [`mark_ce`] marked in `ns` so far (the rule's counter). With GRO, one packet
/// can carry many segments.
pub fn marked(ns: &Netns) -> Result<u64> {
    let out = ns.run("nft", &["list", "table", "inet", TABLE])?;
    Ok(out
        .split("packets ")
        .skip(1)
        .filter_map(|rest| rest.split(' ').next()?.parse::<u64>().ok())
        .sum())
}
