//! NVMe over TCP between lab namespaces: a target exported by the kernel's nvmet-tcp
//! (configured through configfs) listening in one namespace, and a controller connected to it
//! from another through `/dev/nvme-fabrics`, as `nvme connect` does. Both are torn down on
//! drop: the controller disconnected, the configfs entries removed.

use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};

use crate::fs::write_attr;
use crate::netns::{Netns, is_lab_addr};

const NVMET: &str = "/sys/kernel/config/nvmet";
/// The port NVMe/TCP listens on by convention.
pub const PORT: u16 = 4420;

/// Mounts configfs where nvmet expects it, if it is not there yet.
fn configfs() -> Result<()> {
    if Path::new(NVMET).is_dir() {
        return Ok(());
    }
    let dir = Path::new("/sys/kernel/config");
    let ok = std::process::Command::new("mount")
        .args(["-t", "configfs", "none"])
        .arg(dir)
        .status()?
        .success();
    ensure!(ok, "mounting configfs on {}", dir.display());
    ensure!(
        Path::new(NVMET).is_dir(),
        "{NVMET} missing: the nvmet module is not loaded"
    );
    Ok(())
}

/// An NVMe/TCP target: subsystem `nqn` with one namespace on `device`, listening on
/// `addr`:[`PORT`] inside `ns`.
pub struct Target {
    pub nqn: String,
    pub addr: Ipv4Addr,
    subsystem: PathBuf,
    port: PathBuf,
}

impl Target {
    pub fn new(ns: &Netns, addr: Ipv4Addr, device: &Path, tag: &str) -> Result<Target> {
        ensure!(is_lab_addr(addr), "{addr} is outside 198.18.0.0/15");
        configfs()?;
        let nqn = format!("nqn.2014-08.org.stornet:{tag}-{}", std::process::id());
        let subsystem = Path::new(NVMET).join("subsystems").join(&nqn);
        let port_id = (std::process::id() % 60000) + 1;
        let port = Path::new(NVMET).join("ports").join(port_id.to_string());
        let mut t = Target {
            nqn,
            addr,
            subsystem: PathBuf::new(),
            port: PathBuf::new(),
        };
        std::fs::create_dir(&subsystem)?;
        t.subsystem = subsystem.clone();
        write_attr(&subsystem.join("attr_allow_any_host"), "1")?;
        let namespace = subsystem.join("namespaces/1");
        std::fs::create_dir(&namespace)?;
        write_attr(&namespace.join("device_path"), &device.to_string_lossy())?;
        write_attr(&namespace.join("enable"), "1")?;
        std::fs::create_dir(&port)?;
        t.port = port.clone();
        write_attr(&port.join("addr_trtype"), "tcp")?;
        write_attr(&port.join("addr_adrfam"), "ipv4")?;
        write_attr(&port.join("addr_traddr"), &addr.to_string())?;
        write_attr(&port.join("addr_trsvcid"), &PORT.to_string())?;
        // Linking the subsystem to the port opens the listening socket, in the namespace of
        // the task that links it.
        let link = port.join("subsystems").join(&t.nqn);
        ns.enter(|| {
            std::os::unix::fs::symlink(&subsystem, &link)
                .with_context(|| format!("enabling port {}", port.display()))
        })?;
        Ok(t)
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let mut errors = Vec::new();
        if !self.port.as_os_str().is_empty() {
            let _ = std::fs::remove_file(self.port.join("subsystems").join(&self.nqn));
            if let Err(e) = std::fs::remove_dir(&self.port) {
                errors.push(format!("{}: {e}", self.port.display()));
            }
        }
        if !self.subsystem.as_os_str().is_empty() {
            let namespace = self.subsystem.join("namespaces/1");
            let _ = std::fs::write(namespace.join("enable"), "0");
            let _ = std::fs::remove_dir(&namespace);
            if let Err(e) = std::fs::remove_dir(&self.subsystem) {
                errors.push(format!("{}: {e}", self.subsystem.display()));
            }
        }
        if !errors.is_empty() {
            eprintln!("warning: NVMe target left behind: {}", errors.join("; "));
        }
    }
}

/// A controller connected to a [`Target`]: `nvmeN`, and the block device of its namespace.
pub struct Controller {
    /// `nvme1`.
    pub name: String,
    /// The block device IO goes to (`/dev/nvme1n1`: the multipath head where the kernel has
    /// native multipath, else the namespace itself).
    pub dev: PathBuf,
    /// The device that carries the requests (`nvme1c1n1` under a multipath head, else the
    /// same as `dev`): the one whose counts /sys/block keeps.
    pub path_device: String,
}

impl Controller {
    /// Connects from inside `ns`, as `nvme connect -t tcp` would.
    pub fn connect(ns: &Netns, target: &Target) -> Result<Controller> {
        let options = format!(
            "nqn={},transport=tcp,traddr={},trsvcid={PORT}",
            target.nqn, target.addr
        );
        // The kernel answers the write with the new controller's instance.
        let reply = ns.enter(|| {
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/nvme-fabrics")
                .context("/dev/nvme-fabrics (the nvme-fabrics module)")?;
            f.write_all(options.as_bytes())
                .with_context(|| format!("connecting with {options}"))?;
            let mut reply = String::new();
            f.read_to_string(&mut reply)?;
            Ok(reply)
        })?;
        let instance = reply
            .trim()
            .split(',')
            .find_map(|f| f.strip_prefix("instance="))
            .with_context(|| format!("no instance in {reply:?}"))?;
        let name = format!("nvme{instance}");
        let mut c = Controller {
            name,
            dev: PathBuf::new(),
            path_device: String::new(),
        };
        // The namespace appears once the controller has scanned it.
        let dir = Path::new("/sys/class/nvme").join(&c.name);
        for _ in 0..100 {
            if let Some(ns) = namespaces(&dir).into_iter().next() {
                c.path_device = ns;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        ensure!(!c.path_device.is_empty(), "{} shows no namespace", c.name);
        c.dev = Path::new("/dev").join(head_of(&c.path_device)?);
        // The controller lists the namespace before the kernel has added its disks: wait
        // for the path in /sys/block and the head's node in /dev.
        let disk = Path::new("/sys/block").join(&c.path_device);
        for _ in 0..100 {
            if disk.exists() && c.dev.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        ensure!(
            disk.exists() && c.dev.exists(),
            "{}: {} or {} did not appear within 5 s",
            c.name,
            disk.display(),
            c.dev.display()
        );
        Ok(c)
    }
}

/// The namespace devices of a controller's sysfs directory (`nvme1n1`, or `nvme1c1n1`).
fn namespaces(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| n.strip_prefix("nvme").is_some_and(|r| r.contains('n')))
        .collect();
    out.sort();
    out
}

/// `nvme1c1n1` → `nvme1n1`: a path is named `nvme<subsystem>c<controller>n<namespace>`, its
/// head `nvme<subsystem>n<namespace>`; a name without a controller part is its own head.
fn head_of(path_device: &str) -> Result<String> {
    let rest = &path_device[4..];
    let Some((subsystem, after)) = rest.split_once('c') else {
        return Ok(path_device.to_string());
    };
    let Some((_, ns)) = after.split_once('n') else {
        bail!("unexpected NVMe device name {path_device}");
    };
    Ok(format!("nvme{subsystem}n{ns}"))
}

impl Drop for Controller {
    fn drop(&mut self) {
        let delete = Path::new("/sys/class/nvme")
            .join(&self.name)
            .join("delete_controller");
        if let Err(e) = std::fs::write(&delete, "1") {
            eprintln!("warning: could not disconnect {}: {e}", self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_of_paths() {
        assert_eq!(head_of("nvme1c1n1").unwrap(), "nvme1n1");
        assert_eq!(head_of("nvme2c5n3").unwrap(), "nvme2n3");
        assert_eq!(head_of("nvme1n1").unwrap(), "nvme1n1");
    }
}
