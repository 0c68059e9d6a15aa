//! Preset workloads. A profile supplies defaults; every option given on the command line or
//! in a job file overrides them.

use crate::options::table::Pairs;

pub struct Profile {
    pub name: &'static str,
    pub about: &'static str,
    pub options: &'static [(&'static str, &'static str)],
}

pub const PROFILES: &[Profile] = &[
    Profile {
        name: "hcibench-easy",
        about: "HCIBench's easy-run shape: 4 KiB, 70% read, 100% random, 4 IOs in flight, 60 s",
        options: &[
            ("rw", "randrw"),
            ("rwmixread", "70"),
            ("bs", "4k"),
            ("iodepth", "4"),
            ("time_based", "1"),
            ("runtime", "60"),
        ],
    },
    Profile {
        name: "hcibench-cluster",
        about: "HCIBench's shape per host of a cluster run: 4 KiB, 70% read, 100% random, 4 jobs of 8 IOs in flight, direct, 30 s ramp then 300 s steady state",
        options: &[
            ("rw", "randrw"),
            ("rwmixread", "70"),
            ("bs", "4k"),
            ("numjobs", "4"),
            ("iodepth", "8"),
            ("direct", "1"),
            ("ramp_time", "30"),
            ("time_based", "1"),
            ("runtime", "300"),
        ],
    },
    Profile {
        name: "io-size-sweep",
        about: "random reads at 32 IOs in flight, IO size 4 KiB to 256 KiB, 30 s per point",
        options: &[
            ("rw", "randread"),
            ("bs_sweep", "4k,8k,16k,32k,64k,128k,256k"),
            ("iodepth", "32"),
            ("time_based", "1"),
            ("runtime", "30"),
        ],
    },
    Profile {
        name: "queue-depth-sweep",
        about: "4 KiB random reads, 1 to 64 IOs in flight, 30 s per point",
        options: &[
            ("rw", "randread"),
            ("bs", "4k"),
            ("iodepth_sweep", "1,2,4,8,16,32,64"),
            ("time_based", "1"),
            ("runtime", "30"),
        ],
    },
];

pub fn pairs(name: &str) -> Result<Pairs, String> {
    let p = PROFILES.iter().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
        format!("unknown profile `{name}` (use {})", names.join(", "))
    })?;
    Ok(p.options
        .iter()
        .map(|(k, v)| (k.to_string(), Some(v.to_string())))
        .collect())
}
