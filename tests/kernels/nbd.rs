//! NBD on the guest's kernel: a server in one network namespace, the kernel's `nbd` device
//! connected to it from another (the handshake in user space, the socket handed over by
//! ioctl, as `nbd-client -L` does), joined by a lossy link. The kernel keeps no address for the device: the agent finds its server through
//! the socket of the task serving it, names it in `stornet_block_device_info`, and the
//! retransmits the lossy link causes count toward that same peer.

use std::net::SocketAddrV4;

use crate::remote::{lossy_pair, write};
use crate::shared::{agent, device_info};
use stornet_lab::blockdev::Disk;
use stornet_lab::nbd::{Client, PORT, Server};

#[test]
fn nbd_device_names_its_server_and_its_retransmits() {
    let p = lossy_pair("nbd");
    let server = Server::new(&p.b, p.b_addr(), 64 << 20).expect("NBD server");
    let client = Client::connect(&p.a, server.addr).expect("NBD device connected");
    let name = client.name.clone();
    let disk = Disk::existing(&name).expect("the NBD device");
    let w = write(&p, &client.dev, &disk);
    w.check_served(&name, "nbd", SocketAddrV4::new(p.b_addr(), PORT));
    // Disconnected, the device holds no sectors and leaves the export.
    drop(client);
    let gone = agent().scrape().expect("a scrape after the disconnect");
    let left = device_info(&gone, &name);
    assert!(
        left.is_empty(),
        "{name} still exported after its disconnect: {:?}",
        left.iter().map(|s| &s.labels).collect::<Vec<_>>()
    );
    drop(server);
}
