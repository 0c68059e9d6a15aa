//! Booting a guest in qemu: no network device to the outside (`-nic none`), the console on a
//! pipe, a deadline after which the guest is killed, and KVM where it works here, TCG
//! (software emulation) otherwise.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// The last line a guest's `/init` prints before it powers off.
pub const DONE: &str = "STORNET done";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "KVM",
            Accel::Tcg => "TCG (software emulation)",
        }
    }

    fn args(self) -> &'static [&'static str] {
        match self {
            Accel::Kvm => &["-accel", "kvm", "-cpu", "host"],
            Accel::Tcg => &["-accel", "tcg", "-cpu", "max"],
        }
    }
}

/// Why KVM cannot run stock kernels here, if that is known without trying.
pub fn kvm_unusable() -> Option<String> {
    if std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_err()
    {
        return Some("/dev/kvm cannot be opened".into());
    }
    // PVM (pagetable-based virtual machines) runs only guests built for it.
    if Path::new("/sys/module/kvm_pvm").exists() {
        return Some("KVM here is PVM (kvm_pvm), which boots only kernels built for it".into());
    }
    None
}

/// A disk on a virtual controller.
#[derive(Clone, Debug)]
pub enum Disk {
    /// NVMe controller; the guest sees `nvme0n1`.
    Nvme,
    /// virtio-blk with this many queues of this size; the guest sees `vda`.
    VirtioBlk { queues: u32, queue_size: u32 },
    /// A SATA disk on an AHCI controller; the guest sees `sda`.
    Ahci,
}

pub struct Guest<'a> {
    pub vmlinuz: &'a Path,
    pub initrd: &'a Path,
    pub append: String,
    pub disks: Vec<(Disk, PathBuf)>,
    pub accel: Accel,
    pub timeout: Duration,
    /// A guest that prints nothing for this long after it starts is killed then: its kernel
    /// stopped before `/init` ran (its first line comes within seconds, even emulated).
    pub first_line_within: Option<Duration>,
    /// The console is copied here, line by line.
    pub log: PathBuf,
}

/// What a guest printed, and how it ended.
pub struct Console {
    pub lines: Vec<String>,
    /// `/init` printed [`DONE`].
    pub done: bool,
    pub timed_out: bool,
}

impl Console {
    /// Killed before it printed anything: for a guest with [`Guest::first_line_within`],
    /// when that ran out.
    pub fn silent(&self) -> bool {
        self.timed_out && self.lines.is_empty()
    }

    /// The last `n` lines, for a report of a guest that failed.
    pub fn tail(&self, n: usize) -> String {
        let start = self.lines.len().saturating_sub(n);
        self.lines[start..].join("\n")
    }
}

/// Removes terminal escape sequences and carriage returns from a console line.
pub fn clean_line(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                // CSI: ESC [ params final-byte; others: ESC + one char.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '\r' => {}
            c if c.is_control() && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// Boots the guest and collects its console until `/init` is done, the guest exits or the
/// deadline passes (then it is killed). `on_line` sees each line as it arrives.
pub fn run(g: &Guest, mut on_line: impl FnMut(&str)) -> Result<Console> {
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(g.accel.args())
        .args(["-m", "2048", "-smp", "2", "-nic", "none"])
        .args(["-display", "none", "-vga", "none", "-monitor", "none"])
        .args(["-serial", "stdio", "-parallel", "none", "-no-reboot"])
        .arg("-kernel")
        .arg(g.vmlinuz)
        .arg("-initrd")
        .arg(g.initrd)
        .arg("-append")
        .arg(&g.append);
    for (i, (disk, image)) in g.disks.iter().enumerate() {
        let id = format!("d{i}");
        cmd.arg("-drive").arg(format!(
            "file={},if=none,id={id},format=raw",
            image.display()
        ));
        match disk {
            Disk::Nvme => cmd.args(["-device", &format!("nvme,drive={id},serial=stornet{i}")]),
            Disk::VirtioBlk { queues, queue_size } => cmd.args([
                "-device",
                &format!("virtio-blk-pci,drive={id},num-queues={queues},queue-size={queue_size}"),
            ]),
            Disk::Ahci => cmd.args([
                "-device",
                "ahci,id=ahci0",
                "-device",
                &format!("ide-hd,drive={id},bus=ahci0.0"),
            ]),
        };
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .context("starting qemu-system-x86_64 (cargo xtask setup installs it)")?;
    let mut log =
        std::fs::File::create(&g.log).with_context(|| format!("creating {}", g.log.display()))?;
    let (tx, rx) = mpsc::channel::<String>();
    for stream in [
        Box::new(child.stdout.take().expect("piped")) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().expect("piped")),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stream);
            let mut buf = Vec::new();
            while r.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
                let _ = tx.send(clean_line(&String::from_utf8_lossy(&buf)));
                buf.clear();
            }
        });
    }
    drop(tx);
    let started = Instant::now();
    let mut console = Console {
        lines: Vec::new(),
        done: false,
        timed_out: false,
    };
    loop {
        let limit = match g.first_line_within {
            Some(silent) if console.lines.is_empty() => silent.min(g.timeout),
            _ => g.timeout,
        };
        let left = (started + limit).saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.max(Duration::from_millis(1))) {
            Ok(line) => {
                let _ = writeln!(log, "{line}");
                on_line(&line);
                if line.trim_end() == DONE {
                    console.done = true;
                }
                console.lines.push(line);
            }
            // Both streams closed: qemu exited.
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                console.timed_out = true;
                let _ = writeln!(log, "[killed after {limit:?}]");
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(console)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_lines_lose_escapes() {
        assert_eq!(clean_line("\x1bc\x1b[?7l\x1b[2J=== x\r\n"), "=== x");
        assert_eq!(clean_line("test a ... ok\r"), "test a ... ok");
        assert_eq!(clean_line("plain"), "plain");
    }
}
