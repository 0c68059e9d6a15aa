//! What a job order may touch on a host: files beneath the directories `loadgen serve` was
//! started with (`--dir`) and the block devices it allows (`--allow-device`), nothing else.
//! Options that would read or write other files on the host (reports, records, logs, token
//! and certificate files, a metrics listener) or turn its checks off are the host's to set,
//! never the controller's. Targets are opened here, once (see `confine`); the job is handed
//! the descriptors.

use std::path::{Path, PathBuf};

use super::confine::{self, AllowedDevice, Opened, Refusal, ServedDir};
use crate::options::Plan;
use crate::target::{Layout, Placement};

/// The directories and devices jobs may use, opened once when the service starts.
#[derive(Debug)]
pub struct Confinement {
    dirs: Vec<ServedDir>,
    devices: Vec<AllowedDevice>,
}

/// A job's targets, checked and opened.
pub struct Targets {
    pub layout: Layout,
    pub placements: Vec<Placement>,
    pub opened: Vec<Opened>,
}

impl Targets {
    /// Takes back the files opening them created (for a job that will not run).
    pub fn remove_created(&self) {
        for o in &self.opened {
            o.remove_created();
        }
    }
}

impl Confinement {
    pub fn new(dirs: &[PathBuf], devices: &[PathBuf]) -> Result<Confinement, String> {
        let dirs = dirs
            .iter()
            .map(|d| ServedDir::open(d).map_err(|e| format!("--dir {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let devices = devices
            .iter()
            .map(|d| AllowedDevice::new(d).map_err(|e| format!("--allow-device {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Confinement { dirs, devices })
    }

    /// The first directory: where a job's relative paths start (the job runs there).
    pub fn home(&self) -> &Path {
        &self.dirs[0].path
    }

    /// Anchors every job's relative paths at [`home`](Self::home), as the job will see them.
    pub fn anchor(&self, plan: &mut Plan) {
        let home = self.home();
        for j in &mut plan.jobs {
            let dir = home.join(j.directory.take().unwrap_or_default());
            if j.filename.is_some() {
                // A relative name is in the job's directory, as `loadgen run` puts it.
                let names: Vec<String> = j
                    .filenames()
                    .iter()
                    .map(|n| dir.join(n).to_string_lossy().replace(':', "\\:"))
                    .collect();
                j.filename = Some(PathBuf::from(names.join(":")));
            }
            j.directory = Some(dir);
        }
    }

    /// Refuses options that name or write files or listeners on the host, or that are the host's
    /// (the real-time IO class: the host's own daemons would wait behind the job).
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
            ("--agent-insecure-skip-verify", c.insecure_skip_verify),
            ("--client", !s.clients.is_empty()),
            ("--client-token-file", s.client_token_file.is_some()),
            ("--client-timeout", s.client_timeout_ns.is_some()),
            ("--status-interval", s.status_interval_ns.is_some()),
            ("--start-gate", s.start_gate),
            ("--parse-only", s.parse_only),
            ("--replica-volume-prefix", s.replica_volume_prefix.is_some()),
        ];
        if let Some((name, _)) = set.iter().find(|(_, on)| *on) {
            return Err(format!(
                "{name} is not taken in a job order: the host sets it (see `loadgen serve --help`)"
            ));
        }
        for j in &plan.jobs {
            if j.unlink {
                return Err(format!(
                    "job {}: unlink is not taken in a job order (the host removes no file by name)",
                    j.name
                ));
            }
            if j.prio.real_time() {
                return Err(format!(
                    "job {}: the real-time IO class (prioclass or cmdprio_class 1) is not taken in a job order: it would starve the host's own IO",
                    j.name
                ));
            }
            if j.fill_device {
                return Err(format!(
                    "job {}: fill_device is not taken in a job order: it writes until the host's file system (or device) is full",
                    j.name
                ));
            }
            if j.verify_dump {
                return Err(format!(
                    "job {}: verify_dump is not taken in a job order (the dumps would be written on the host, outside the served directories)",
                    j.name
                ));
            }
            if j.logs.any() {
                return Err(format!(
                    "job {}: write_*_log options are not taken in a job order (the logs would be written on the host)",
                    j.name
                ));
            }
        }
        Ok(())
    }

    /// Opens one target of an anchored plan: a file beneath a served directory (created
    /// empty if missing) or an allowed device. The one place a job's targets are opened.
    pub fn open(&self, path: &Path) -> Result<Opened, String> {
        let refused = |r: Refusal| match r {
            Refusal::Inside(why) => format!("refused: {} {why}", path.display()),
            Refusal::Outside => format!(
                "refused: {} is outside the directories this host serves ({}) and not a device it allows (`loadgen serve --allow-device`)",
                path.display(),
                self.dirs
                    .iter()
                    .map(|d| d.path.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        for d in &self.dirs {
            if let Some(rel) = confine::beneath(&d.path, path) {
                return confine::open_file(d, path, &rel).map_err(refused);
            }
        }
        match self.devices.iter().find(|d| d.named(path)) {
            Some(dev) => dev.open(path).map_err(refused),
            None => Err(refused(Refusal::Outside)),
        }
    }

    /// Every target of an anchored plan opened and checked as `loadgen run` checks it; on a
    /// refusal, the files opening them created are taken back.
    pub fn targets(&self, plan: &Plan) -> Result<Targets, String> {
        let mut opened: Vec<Opened> = Vec::new();
        let resolved = crate::target::resolve_with(plan, &mut |path| {
            let o = self.open(path)?;
            let t = crate::target::inspect(path, &confine::proc_path(&o.fd), o.created);
            opened.push(o);
            t
        });
        match resolved {
            Ok((layout, placements)) => Ok(Targets {
                layout,
                placements,
                opened,
            }),
            Err(e) => {
                for o in &opened {
                    o.remove_created();
                }
                Err(e)
            }
        }
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
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.canonicalize().unwrap()
    }

    fn targets_of(c: &Confinement, args: &str) -> Result<(), String> {
        let mut p = plan(args);
        c.check_options(&p)?;
        c.anchor(&mut p);
        let t = c.targets(&p)?;
        t.remove_created();
        Ok(())
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
        assert!(!served.join("w.0.0").exists(), "taken back");
        assert_eq!(
            targets_of(&c, &format!("{size} --filename=sub/../f")),
            Ok(())
        );
        let outside = format!("{size} --filename={}/f", other.display());
        let e = targets_of(&c, &outside).unwrap_err();
        assert!(
            e.starts_with("refused") && e.contains("outside the directories"),
            "{e}"
        );
        let up = format!(
            "{size} --filename=../{}/f",
            other.file_name().unwrap().to_string_lossy()
        );
        assert!(targets_of(&c, &up).unwrap_err().contains("outside"));
        std::os::unix::fs::symlink(other.join("f"), served.join("link")).unwrap();
        let link = format!("{size} --filename=link");
        assert!(targets_of(&c, &link).unwrap_err().contains("symbolic link"));
        std::fs::write(other.join("f"), vec![0u8; 1 << 20]).unwrap();
        assert!(targets_of(&c, &link).unwrap_err().contains("symbolic link"));
        assert_eq!(std::fs::metadata(other.join("f")).unwrap().len(), 1 << 20);
        std::fs::remove_dir_all(&served).unwrap();
        std::fs::remove_dir_all(&other).unwrap();
    }

    #[test]
    fn a_refusal_outside_says_nothing_of_what_is_there() {
        let served = scratch("oracle");
        let c = Confinement::new(std::slice::from_ref(&served), &[]).unwrap();
        let read = |p: &str| targets_of(&c, &format!("--rw=read --name=r --filename={p}"));
        let present = read("/etc/passwd").unwrap_err();
        let absent = read("/etc/no-such-file-here").unwrap_err();
        assert_eq!(
            present.replace("passwd", "X"),
            absent.replace("no-such-file-here", "X")
        );
        std::fs::remove_dir_all(&served).unwrap();
    }

    /// fio's `fill_device` writes until ENOSPC: a remote order would fill a file system of
    /// the host (the service runs as root, so even the blocks kept for root), whatever its
    /// size says. Refused before any file is opened, on its own or from a job file.
    #[test]
    fn fill_device_is_refused_in_a_job_order() {
        let served = scratch("fill");
        let c = Confinement::new(std::slice::from_ref(&served), &[]).unwrap();
        for args in [
            "--name=w --rw=write --fill_device",
            "--name=w --rw=write --size=1m --fill_device=1",
        ] {
            let e = targets_of(&c, args).unwrap_err();
            assert!(
                e.contains("fill_device is not taken in a job order") && !e.contains('\n'),
                "{args}: {e}"
            );
        }
        assert_eq!(
            targets_of(&c, "--name=w --rw=write --size=1m --fill_device=0"),
            Ok(())
        );
        let text = "[w]\nrw=write\nfill_device=1\n".to_string();
        let given = [("f.fio".to_string(), text)];
        let p = match crate::options::parse::parse_args_from(
            &["f.fio".to_string()],
            crate::options::parse::JobFiles::Given(&given),
        )
        .unwrap()
        {
            Parsed::Plan(p) => *p,
            Parsed::Help => unreachable!(),
        };
        assert!(c.check_options(&p).unwrap_err().contains("fill_device"));
        assert_eq!(
            std::fs::read_dir(&served).unwrap().count(),
            0,
            "no file made"
        );
        std::fs::remove_dir_all(&served).unwrap();
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
            ("--name=w --rw=write --size=1m --unlink", "unlink"),
            (
                "--name=w --rw=write --size=1m --verify=crc32c --verify_dump=1",
                "verify_dump",
            ),
            ("--name=w --rw=write --size=1m --prioclass=1", "real-time"),
            (
                "--name=w --rw=write --size=1m --cmdprio_percentage=10 --cmdprio_class=2,1",
                "real-time",
            ),
            (
                "--name=w --rw=write --size=1m --cmdprio_bssplit=4k/10/1/0",
                "real-time",
            ),
            (
                "--agent-insecure-skip-verify --name=w --rw=write --size=1m",
                "--agent-insecure-skip-verify",
            ),
            (
                "--client-token-file=/etc/shadow --name=w --rw=write --size=1m",
                "--client-token-file",
            ),
        ] {
            let e = targets_of(&c, args).unwrap_err();
            assert!(e.contains(named), "{args}: {e}");
        }
        // Best-effort and idle priorities are the job's own business.
        assert_eq!(
            targets_of(&c, "--name=w --rw=write --size=1m --prioclass=2 --prio=7"),
            Ok(())
        );
        assert!(
            targets_of(&c, "--name=w --rw=read --size=1m --filename=/dev/null")
                .unwrap_err()
                .contains("outside")
        );
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

    /// The options of fio's enospc-pressure.fio in a job order: trims and writes reach only
    /// the order's served files (a relative name in its directory, there too), and a file the
    /// layout leaves to grow (`fallocate=none`, `create_on_open`) still counts in full against
    /// the served file system's free space, so an order cannot fill the host's disk.
    #[test]
    fn error_and_layout_options_keep_to_the_served_files_and_space() {
        let served = scratch("enospc");
        std::fs::create_dir_all(served.join("sub")).unwrap();
        let c = Confinement::new(std::slice::from_ref(&served), &[]).unwrap();
        let job = "--name=t --rw=randtrim --size=1m --directory=sub --filename=f \
                   --continue_on_error=all --ignore_error=,ENOSPC --error_dump=1";
        let mut p = plan(job);
        c.check_options(&p).unwrap();
        c.anchor(&mut p);
        let t = c.targets(&p).unwrap();
        assert_eq!(t.layout.targets[0].path, served.join("sub/f"));
        t.remove_created();
        assert!(
            targets_of(&c, "--name=t --rw=randtrim --size=1m --filename=../f")
                .unwrap_err()
                .contains("refused")
        );
        for layout in ["--fallocate=none", "--fallocate=keep", "--create_on_open=1"] {
            let mut p = plan(&format!(
                "--name=t --rw=write --filesize=1024p --filename=big {layout}"
            ));
            c.check_options(&p).unwrap();
            c.anchor(&mut p);
            let t = c.targets(&p).unwrap();
            let e = crate::target::check_space(&t.layout, true).unwrap_err();
            assert!(e.contains("free on its file system"), "{layout}: {e}");
            // `loadgen run` on its own machine leaves the filling to the run.
            assert_eq!(crate::target::check_space(&t.layout, false), Ok(()));
            t.remove_created();
        }
        std::fs::remove_dir_all(&served).unwrap();
    }
}
