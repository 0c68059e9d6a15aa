//! What a job order may touch on a host: files under the directories `loadgen serve` was
//! started with (`--dir`) and the block devices it allows (`--allow-device`), nothing else.
//! Options that would read or write other files on the host (reports, records, logs, token
//! and certificate files, a metrics listener) are the host's to set, never the controller's.

use std::path::{Path, PathBuf};

use crate::options::Plan;
use crate::target::{Layout, TargetKind};

/// The directories and devices jobs may use, resolved once when the service starts.
#[derive(Clone, Debug, Default)]
pub struct Confinement {
    pub dirs: Vec<PathBuf>,
    pub devices: Vec<PathBuf>,
}

impl Confinement {
    pub fn new(dirs: &[PathBuf], devices: &[PathBuf]) -> Result<Confinement, String> {
        let canon = |flag: &str, p: &PathBuf| {
            p.canonicalize()
                .map_err(|e| format!("{flag} {}: {e}", p.display()))
        };
        let dirs = dirs
            .iter()
            .map(|d| canon("--dir", d))
            .collect::<Result<Vec<_>, _>>()?;
        let devices = devices
            .iter()
            .map(|d| canon("--allow-device", d))
            .collect::<Result<Vec<_>, _>>()?;
        for d in &devices {
            use std::os::unix::fs::FileTypeExt;
            let meta =
                std::fs::metadata(d).map_err(|e| format!("--allow-device {}: {e}", d.display()))?;
            if !meta.file_type().is_block_device() {
                return Err(format!(
                    "--allow-device {}: not a block device",
                    d.display()
                ));
            }
        }
        Ok(Confinement { dirs, devices })
    }

    /// The first directory: where a job's relative paths start (the job runs there).
    pub fn home(&self) -> &Path {
        &self.dirs[0]
    }

    /// Anchors every job's relative paths at [`home`](Self::home), as the job will see them.
    pub fn anchor(&self, plan: &mut Plan) {
        let home = self.home();
        for j in &mut plan.jobs {
            j.directory = Some(home.join(j.directory.take().unwrap_or_default()));
            if j.filename.is_some() {
                let names: Vec<String> = j
                    .filenames()
                    .iter()
                    .map(|n| home.join(n).to_string_lossy().replace(':', "\\:"))
                    .collect();
                j.filename = Some(PathBuf::from(names.join(":")));
            }
        }
    }

    /// Refuses options that name files or listeners on the host.
    pub fn check_options(&self, plan: &Plan) -> Result<(), String> {
        let s = &plan.settings;
        let c = &s.agent_client;
        let set = [
            ("--output", s.output.is_some()),
            ("--record", s.record.is_some()),
            ("--agent", !s.agents.is_empty()),
            ("--metrics-address", s.metrics_address.is_some()),
            ("--replica_token_file", s.replica_token_file.is_some()),
            (
                "--agent-*-file",
                c.ca_file.is_some()
                    || c.cert_file.is_some()
                    || c.key_file.is_some()
                    || c.bearer_token_file.is_some(),
            ),
            ("--client", !s.clients.is_empty()),
        ];
        if let Some((name, _)) = set.iter().find(|(_, on)| *on) {
            return Err(format!(
                "{name} is not taken in a job order: the host sets it (see `loadgen serve --help`)"
            ));
        }
        for j in &plan.jobs {
            if [&j.logs.lat, &j.logs.bw, &j.logs.iops, &j.logs.hist]
                .iter()
                .any(|l| l.is_some())
            {
                return Err(format!(
                    "job {}: write_*_log options are not taken in a job order (the logs would be written on the host)",
                    j.name
                ));
            }
        }
        Ok(())
    }

    /// Every target inside a `--dir` (a file) or among the `--allow-device`s (a device).
    pub fn check_targets(&self, layout: &Layout) -> Result<(), String> {
        for t in &layout.targets {
            let shown = t.path.display();
            match t.kind {
                TargetKind::BlockDevice => {
                    let real = t.path.canonicalize().map_err(|e| format!("{shown}: {e}"))?;
                    if !self.devices.contains(&real) {
                        return Err(format!(
                            "{shown}: this host allows no job on that device (`loadgen serve --allow-device` names the ones it does)"
                        ));
                    }
                }
                TargetKind::File => {
                    let real = resolved(&t.path).map_err(|e| format!("{shown}: {e}"))?;
                    if !self.dirs.iter().any(|d| real.starts_with(d)) {
                        return Err(format!(
                            "{shown}: outside the directories this host serves ({})",
                            self.dirs
                                .iter()
                                .map(|d| d.display().to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The path with every symbolic link and `..` resolved; a file that does not exist yet is
/// resolved through its directory.
fn resolved(p: &Path) -> std::io::Result<PathBuf> {
    match p.canonicalize() {
        Ok(r) => Ok(r),
        // A link to nothing would be followed by the job's open: refused, not resolved.
        Err(e) if p.symlink_metadata().is_ok() => Err(e),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
                return Err(e);
            };
            if name == ".." {
                return Err(e);
            }
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            Ok(parent.canonicalize()?.join(name))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::parse::{Parsed, parse_args};

    fn plan(args: &str) -> Plan {
        let args: Vec<String> = args.split_whitespace().map(String::from).collect();
        match parse_args(&args).unwrap() {
            Parsed::Plan(p) => *p,
            Parsed::Help => unreachable!(),
        }
    }

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("loadgen-policy-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn targets_of(c: &Confinement, args: &str) -> Result<(), String> {
        let mut p = plan(args);
        c.check_options(&p)?;
        c.anchor(&mut p);
        let (layout, _) = crate::target::resolve(&p)?;
        c.check_targets(&layout)
    }

    #[test]
    fn files_inside_the_served_directories_only() {
        let served = scratch("served");
        let other = scratch("other");
        let c = Confinement::new(std::slice::from_ref(&served), &[]).unwrap();
        std::fs::create_dir_all(served.join("sub")).unwrap();
        let size = "--rw=write --size=1m --name=w";
        assert_eq!(
            targets_of(&c, size),
            Ok(()),
            "a file named after the job, in the directory"
        );
        assert_eq!(
            targets_of(&c, &format!("{size} --filename=sub/../f")),
            Ok(())
        );
        let outside = format!("{size} --filename={}/f", other.display());
        assert!(
            targets_of(&c, &outside)
                .unwrap_err()
                .contains("outside the directories")
        );
        let up = format!(
            "{size} --filename=../{}/f",
            other.file_name().unwrap().to_string_lossy()
        );
        assert!(targets_of(&c, &up).unwrap_err().contains("outside"));
        std::os::unix::fs::symlink(other.join("f"), served.join("link")).unwrap();
        let link = format!("{size} --filename=link");
        assert!(
            targets_of(&c, &link).is_err(),
            "a link out to nothing yet is refused"
        );
        std::fs::write(other.join("f"), vec![0u8; 1 << 20]).unwrap();
        assert!(
            targets_of(&c, &link).unwrap_err().contains("outside"),
            "a link out is refused"
        );
        std::fs::remove_dir_all(&served).unwrap();
        std::fs::remove_dir_all(&other).unwrap();
    }

    #[test]
    fn options_naming_host_files_are_the_hosts() {
        let served = scratch("opts");
        let c = Confinement::new(std::slice::from_ref(&served), &[]).unwrap();
        for (args, named) in [
            ("--record=/etc/x --name=w --rw=write --size=1m", "--record"),
            ("--output=/etc/x --name=w --rw=write --size=1m", "--output"),
            (
                "--agent=http://198.18.0.1:9477 --name=w --rw=write --size=1m",
                "--agent",
            ),
            (
                "--replica_token_file=/etc/shadow --name=w --rw=write --size=1m",
                "--replica_token_file",
            ),
            (
                "--name=w --rw=write --size=1m --write_lat_log=/tmp/x",
                "write_*_log",
            ),
        ] {
            let e = targets_of(&c, args).unwrap_err();
            assert!(e.contains(named), "{args}: {e}");
        }
        assert!(targets_of(&c, "--name=w --rw=read --size=1m --filename=/dev/null").is_err());
        assert!(
            Confinement::new(&[served.join("missing")], &[])
                .unwrap_err()
                .starts_with("--dir")
        );
        assert!(
            Confinement::new(std::slice::from_ref(&served), &[PathBuf::from("/dev/null")])
                .unwrap_err()
                .contains("not a block device")
        );
        std::fs::remove_dir_all(&served).unwrap();
    }
}
