//! What a `vm` tier guest's `/init` tells the tests that run in it: its disks, with the tag
//! count and submission queues each driver was configured with, and the lockdown mode it
//! booted with.

/// A whole disk of the guest, which belongs to the tests.
#[derive(Clone, Debug)]
pub struct GuestDisk {
    /// `nvme`, `virtio_blk`, `ahci`, `null_blk`.
    pub driver: String,
    /// Kernel name: `nvme0n1`, `vda`, `sda`, `nullb0`.
    pub name: String,
    /// Driver tags per hardware queue, as configured by the tier (qemu device options,
    /// driver parameters): the independent count the in-flight metrics are checked against.
    pub tags: u64,
    /// Hardware queues that take submissions (a driver may add queues for polled IO).
    pub queues: u64,
}

/// Parses `driver:name:tags:queues,…`.
pub fn parse_disks(spec: &str) -> Result<Vec<GuestDisk>, String> {
    spec.split(',')
        .filter(|s| !s.is_empty())
        .map(|entry| {
            let parts: Vec<&str> = entry.split(':').collect();
            let [driver, name, tags, queues] = parts[..] else {
                return Err(format!(
                    "disk entry {entry:?} is not driver:name:tags:queues"
                ));
            };
            let num = |what: &str, v: &str| {
                v.parse::<u64>()
                    .map_err(|_| format!("disk entry {entry:?}: {what} {v:?} is not a number"))
            };
            Ok(GuestDisk {
                driver: driver.into(),
                name: name.into(),
                tags: num("tags", tags)?,
                queues: num("queues", queues)?,
            })
        })
        .collect()
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: these tests run inside the vm tier's guests (cargo xtask test --tier vm)"
        )
    })
}

/// The guest's disk of `driver`.
pub fn disk(driver: &str) -> GuestDisk {
    let spec = env("STORNET_GUEST_DISKS");
    let disks = parse_disks(&spec).unwrap_or_else(|e| panic!("STORNET_GUEST_DISKS: {e}"));
    disks
        .into_iter()
        .find(|d| d.driver == driver)
        .unwrap_or_else(|| panic!("this guest has no {driver} disk (STORNET_GUEST_DISKS={spec})"))
}

/// The lockdown mode the guest booted with (`none` or `confidentiality`).
pub fn lockdown() -> String {
    env("STORNET_GUEST_LOCKDOWN")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_specs_parse() {
        let d = parse_disks("nvme:nvme0n1:63:2,null_blk:nullb0:31:1").unwrap();
        assert_eq!(d.len(), 2);
        let n = &d[1];
        assert_eq!(
            (n.driver.as_str(), n.name.as_str(), n.tags, n.queues),
            ("null_blk", "nullb0", 31, 1)
        );
        assert!(parse_disks("nvme:nvme0n1:63").is_err());
        assert!(parse_disks("nvme:nvme0n1:x:1").is_err());
    }
}
