//! The kernel's standard pause-frame statistics (ethtool netlink) against `ethtool -I -a`,
//! on netdevsim, whose statistics a test switches on and off through debugfs (then it
//! reports 1 frame received and 2 sent). The vm tier loads netdevsim where it could build it
//! for the guest's kernel.

use std::path::PathBuf;

use stornet_lab::metrics::{Sample, sum};

/// The simulated device's id on the netdevsim bus.
const ID: u32 = 7;

/// A netdevsim device with one port, removed on drop.
struct Netdevsim {
    interface: String,
    debugfs: PathBuf,
}

impl Netdevsim {
    fn new() -> Netdevsim {
        std::fs::write("/sys/bus/netdevsim/new_device", format!("{ID} 1"))
            .expect("creating a netdevsim device (is the module loaded?)");
        let net = format!("/sys/bus/netdevsim/devices/netdevsim{ID}/net");
        // The kernel registers the port's interface as the write returns; udev renames none here.
        let interface = std::fs::read_dir(&net)
            .unwrap_or_else(|e| panic!("{net}: {e}"))
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .next()
            .unwrap_or_else(|| panic!("no interface in {net}"));
        Netdevsim {
            interface,
            debugfs: PathBuf::from(format!(
                "/sys/kernel/debug/netdevsim/netdevsim{ID}/ports/0/ethtool/pause"
            )),
        }
    }

    /// Whether the driver reports its pause statistics (debugfs `report_stats_rx|tx`).
    fn report(&self, on: bool) {
        for dir in ["rx", "tx"] {
            let f = self.debugfs.join(format!("report_stats_{dir}"));
            std::fs::write(&f, if on { "Y" } else { "N" })
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        }
    }

    /// `ethtool -I -a IFACE`'s statistics: (rx_pause_frames, tx_pause_frames) where shown.
    fn ethtool(&self) -> (Option<u64>, Option<u64>) {
        let out = std::process::Command::new("ethtool")
            .args(["-I", "-a", &self.interface])
            .output()
            .expect("ethtool runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "ethtool -I -a: {text}");
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
                .map(|v| v.trim().parse().expect("a count"))
        };
        (field("rx_pause_frames"), field("tx_pause_frames"))
    }

    fn agent(&self, s: &[Sample], name: &str) -> Option<f64> {
        let labels = [("netns", "host"), ("interface", self.interface.as_str())];
        s.iter()
            .any(|x| x.name == name && x.label("interface") == Some(&self.interface))
            .then(|| sum(s, name, &labels))
    }
}

impl Drop for Netdevsim {
    fn drop(&mut self) {
        let _ = std::fs::write("/sys/bus/netdevsim/del_device", ID.to_string());
    }
}

#[test]
fn netdevsim_pause_frames_match_ethtool() {
    let agent = crate::shared::agent();
    let dev = Netdevsim::new();
    let rx = "stornet_interface_receive_pause_frames_total";
    let tx = "stornet_interface_transmit_pause_frames_total";

    // Statistics off: ethtool shows none, the agent exports none.
    dev.report(false);
    let off = agent.scrape().unwrap();
    assert_eq!(dev.ethtool(), (None, None), "statistics off");
    assert_eq!((dev.agent(&off, rx), dev.agent(&off, tx)), (None, None));

    // On: the agent says what ethtool says.
    dev.report(true);
    let on = agent.scrape().unwrap();
    let (e_rx, e_tx) = dev.ethtool();
    let (a_rx, a_tx) = (dev.agent(&on, rx), dev.agent(&on, tx));
    eprintln!(
        "{}: ethtool rx {e_rx:?} tx {e_tx:?}, agent rx {a_rx:?} tx {a_tx:?}",
        dev.interface
    );
    assert!(e_rx.is_some() && e_tx.is_some(), "ethtool shows both");
    assert_eq!(a_rx, e_rx.map(|v| v as f64), "pause frames received");
    assert_eq!(a_tx, e_tx.map(|v| v as f64), "pause frames sent");
    assert_eq!(
        sum(
            &on,
            "stornet_net_snapshot_errors_total",
            &[("netns", "host"), ("snapshot", "pause_stats")]
        ),
        0.0,
        "the pause statistics were read at every scrape"
    );
}
