//! NBD between lab namespaces: a server of an in-memory image listening in one namespace (the
//! fixed-newstyle handshake and the simple replies of the NBD protocol), and the kernel's
//! `nbd` driver connected to it from another the way `nbd-client -L` does it: the handshake
//! in user space, then the socket handed to the device by ioctl and a task left in
//! `NBD_DO_IT` for as long as the device is connected. Both are torn down on drop.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use crate::netns::{Netns, is_lab_addr};

/// The port NBD listens on by convention.
pub const PORT: u16 = 10809;

const NBDMAGIC: u64 = 0x4e42_444d_4147_4943;
const IHAVEOPT: u64 = 0x4948_4156_454f_5054;
const OPT_REPLY: u64 = 0x0003_e889_0455_65a9;
const REQUEST: u32 = 0x2560_9513;
const REPLY: u32 = 0x6744_6698;
const FLAG_FIXED_NEWSTYLE: u16 = 1;
const FLAG_NO_ZEROES: u16 = 2;
const OPT_EXPORT_NAME: u32 = 1;
const OPT_ABORT: u32 = 2;
const REP_ERR_UNSUP: u32 = 0x8000_0001;
/// Transmission flags: flags are sent, and so is flush.
const HAS_FLAGS: u16 = 1;
const SEND_FLUSH: u16 = 4;
const CMD_READ: u16 = 0;
const CMD_WRITE: u16 = 1;
const CMD_DISC: u16 = 2;
const CMD_FLUSH: u16 = 3;
const EINVAL: u32 = 22;

/// The driver's ioctls (`_IO(0xab, n)`, linux/nbd.h).
const NBD_SET_SOCK: u64 = 0xab00;
const NBD_SET_BLKSIZE: u64 = 0xab01;
const NBD_DO_IT: u64 = 0xab03;
const NBD_CLEAR_SOCK: u64 = 0xab04;
const NBD_SET_SIZE_BLOCKS: u64 = 0xab07;
const NBD_DISCONNECT: u64 = 0xab08;
const NBD_SET_FLAGS: u64 = 0xab0a;
const BLOCK: u64 = 4096;

fn ioctl(fd: i32, request: u64, arg: u64) -> std::io::Result<()> {
    // SAFETY: the NBD ioctls used here take an integer argument, not a pointer.
    if unsafe { libc::ioctl(fd, request as _, arg as libc::c_ulong) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn get<const N: usize>(r: &mut impl Read) -> std::io::Result<[u8; N]> {
    let mut b = [0u8; N];
    r.read_exact(&mut b)?;
    Ok(b)
}

fn u16_of(r: &mut impl Read) -> std::io::Result<u16> {
    Ok(u16::from_be_bytes(get(r)?))
}

fn u32_of(r: &mut impl Read) -> std::io::Result<u32> {
    Ok(u32::from_be_bytes(get(r)?))
}

fn u64_of(r: &mut impl Read) -> std::io::Result<u64> {
    Ok(u64::from_be_bytes(get(r)?))
}

/// An NBD server of a zeroed in-memory image of `size` bytes on `addr`:[`PORT`] inside a
/// namespace; it serves one connection.
pub struct Server {
    pub addr: SocketAddrV4,
    stop: Arc<AtomicBool>,
    conn: Arc<Mutex<Option<TcpStream>>>,
    thread: Option<JoinHandle<Result<()>>>,
}

impl Server {
    pub fn new(ns: &Netns, addr: Ipv4Addr, size: u64) -> Result<Server> {
        ensure!(is_lab_addr(addr), "{addr} is outside 198.18.0.0/15");
        ensure!(size > 0 && size.is_multiple_of(BLOCK), "image size {size}");
        let at = SocketAddrV4::new(addr, PORT);
        let listener = ns.enter(|| {
            let l = TcpListener::bind(at).with_context(|| format!("binding {at}"))?;
            l.set_nonblocking(true)?;
            Ok(l)
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let conn = Arc::new(Mutex::new(None));
        let (stop2, conn2) = (stop.clone(), conn.clone());
        let thread = std::thread::spawn(move || -> Result<()> {
            let stream = loop {
                match listener.accept() {
                    Ok((s, _)) => break s,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        if stop2.load(Ordering::Relaxed) {
                            return Ok(());
                        }
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(e) => return Err(e).context("accepting"),
                }
            };
            stream.set_nonblocking(false)?;
            stream.set_nodelay(true)?;
            *conn2.lock().unwrap() = Some(stream.try_clone()?);
            serve(stream, size)
        });
        Ok(Server {
            addr: at,
            stop,
            conn,
            thread: Some(thread),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(c) = self.conn.lock().unwrap().as_ref() {
            let _ = c.shutdown(Shutdown::Both);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The handshake, then requests until the client disconnects.
fn serve(mut s: TcpStream, size: u64) -> Result<()> {
    s.write_all(&NBDMAGIC.to_be_bytes())?;
    s.write_all(&IHAVEOPT.to_be_bytes())?;
    s.write_all(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes())?;
    let client = u32_of(&mut s)?;
    loop {
        ensure!(u64_of(&mut s)? == IHAVEOPT, "an option without its magic");
        let (opt, len) = (u32_of(&mut s)?, u32_of(&mut s)?);
        ensure!(len <= 4096, "an option of {len} bytes");
        let mut data = vec![0u8; len as usize];
        s.read_exact(&mut data)?;
        match opt {
            OPT_EXPORT_NAME => break,
            OPT_ABORT => return Ok(()),
            _ => {
                s.write_all(&OPT_REPLY.to_be_bytes())?;
                s.write_all(&opt.to_be_bytes())?;
                s.write_all(&REP_ERR_UNSUP.to_be_bytes())?;
                s.write_all(&0u32.to_be_bytes())?;
            }
        }
    }
    s.write_all(&size.to_be_bytes())?;
    s.write_all(&(HAS_FLAGS | SEND_FLUSH).to_be_bytes())?;
    if client & u32::from(FLAG_NO_ZEROES) == 0 {
        s.write_all(&[0u8; 124])?;
    }
    let mut image = vec![0u8; size as usize];
    loop {
        let magic = match u32_of(&mut s) {
            Ok(m) => m,
            // The client went away: the driver closes its socket after a disconnect.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        ensure!(magic == REQUEST, "a request with magic {magic:#x}");
        let _flags = u16_of(&mut s)?;
        let (cmd, handle) = (u16_of(&mut s)?, u64_of(&mut s)?);
        let (offset, len) = (u64_of(&mut s)?, u32_of(&mut s)?);
        let range = offset
            .checked_add(u64::from(len))
            .filter(|&end| end <= size)
            .map(|end| offset as usize..end as usize);
        match (cmd & 0xff, range) {
            (CMD_READ, Some(r)) => reply(&mut s, handle, 0, &image[r])?,
            (CMD_WRITE, r) => {
                let mut data = vec![0u8; len as usize];
                s.read_exact(&mut data)?;
                match r {
                    Some(r) => {
                        image[r].copy_from_slice(&data);
                        reply(&mut s, handle, 0, &[])?
                    }
                    None => reply(&mut s, handle, EINVAL, &[])?,
                }
            }
            (CMD_DISC, _) => return Ok(()),
            (CMD_FLUSH, _) => reply(&mut s, handle, 0, &[])?,
            _ => reply(&mut s, handle, EINVAL, &[])?,
        }
    }
}

/// A simple reply to request `handle`, with the data of a read.
fn reply(s: &mut TcpStream, handle: u64, error: u32, data: &[u8]) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(16 + data.len());
    out.extend(REPLY.to_be_bytes());
    out.extend(error.to_be_bytes());
    out.extend(handle.to_be_bytes());
    out.extend(data);
    s.write_all(&out)
}

/// The client side of the handshake: the export's size and transmission flags.
fn handshake(s: &mut TcpStream) -> Result<(u64, u16)> {
    ensure!(u64_of(s)? == NBDMAGIC, "not an NBD server");
    ensure!(
        u64_of(s)? == IHAVEOPT,
        "the server does not speak the newstyle handshake"
    );
    let flags = u16_of(s)?;
    ensure!(
        flags & FLAG_FIXED_NEWSTYLE != 0,
        "the server does not speak the fixed newstyle handshake"
    );
    let zeroes = flags & FLAG_NO_ZEROES == 0;
    let ours = u32::from(FLAG_FIXED_NEWSTYLE | (flags & FLAG_NO_ZEROES));
    s.write_all(&ours.to_be_bytes())?;
    s.write_all(&IHAVEOPT.to_be_bytes())?;
    s.write_all(&OPT_EXPORT_NAME.to_be_bytes())?;
    s.write_all(&0u32.to_be_bytes())?;
    let (size, tflags) = (u64_of(s)?, u16_of(s)?);
    if zeroes {
        let _: [u8; 124] = get(s)?;
    }
    ensure!(
        size > 0 && size.is_multiple_of(BLOCK),
        "the server exports {size} bytes"
    );
    Ok((size, tflags))
}

/// `/dev/nbdN` connected to a [`Server`] from `ns`, as `nbd-client -L` connects one.
pub struct Client {
    /// `/dev/nbdN`.
    pub dev: PathBuf,
    /// `nbdN`.
    pub name: String,
    file: Arc<File>,
    sock: TcpStream,
    thread: Option<JoinHandle<Result<()>>>,
}

/// The first NBD device that is not connected.
fn free_device() -> Result<String> {
    ensure!(
        Path::new("/sys/block/nbd0").exists(),
        "no /sys/block/nbd0: the nbd module is not loaded"
    );
    (0..128)
        .map(|i| format!("nbd{i}"))
        .take_while(|n| Path::new("/sys/block").join(n).exists())
        .find(|n| !Path::new("/sys/block").join(n).join("pid").exists())
        .context("every NBD device is connected")
}

impl Client {
    pub fn connect(ns: &Netns, server: SocketAddrV4) -> Result<Client> {
        let name = free_device()?;
        let dev = Path::new("/dev").join(&name);
        let mut sock = ns.enter(|| {
            TcpStream::connect_timeout(&SocketAddr::V4(server), Duration::from_secs(5))
                .with_context(|| format!("connecting to {server}"))
        })?;
        let (size, flags) = handshake(&mut sock).context("the NBD handshake")?;
        let file = Arc::new(
            File::options()
                .read(true)
                .write(true)
                .open(&dev)
                .with_context(|| format!("opening {}", dev.display()))?,
        );
        let (fd, sock_fd) = (file.as_raw_fd(), sock.as_raw_fd());
        let held = file.clone();
        // One task sets the device up and serves it (the driver refuses a socket from any
        // other), in the namespace of its socket, as a client process runs.
        let thread = ns.spawn(move || -> Result<()> {
            let _file = held;
            ioctl(fd, NBD_SET_BLKSIZE, BLOCK).context("NBD_SET_BLKSIZE")?;
            ioctl(fd, NBD_SET_SIZE_BLOCKS, size / BLOCK).context("NBD_SET_SIZE_BLOCKS")?;
            ioctl(fd, NBD_SET_FLAGS, u64::from(flags)).context("NBD_SET_FLAGS")?;
            ioctl(fd, NBD_SET_SOCK, sock_fd as u64).context("NBD_SET_SOCK")?;
            // Until a disconnect, which ends it with an error on some kernels.
            let _ = ioctl(fd, NBD_DO_IT, 0);
            let _ = ioctl(fd, NBD_CLEAR_SOCK, 0);
            Ok(())
        });
        let mut c = Client {
            dev,
            name,
            file,
            sock,
            thread: Some(thread),
        };
        c.wait_connected(size)?;
        Ok(c)
    }

    /// Until sysfs shows the device connected with the export's size.
    fn wait_connected(&mut self, size: u64) -> Result<()> {
        let sys = Path::new("/sys/block").join(&self.name);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let sectors: u64 = std::fs::read_to_string(sys.join("size"))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            if sys.join("pid").exists() && sectors * 512 == size {
                return Ok(());
            }
            if self.thread.as_ref().is_some_and(|t| t.is_finished()) {
                let r = self.thread.take().unwrap().join();
                match r {
                    Ok(Err(e)) => return Err(e.context(format!("setting up {}", self.name))),
                    _ => bail!("{} stopped serving before it was connected", self.name),
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "{} not connected within 10 s ({sectors} sectors)",
                    self.name
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = ioctl(self.file.as_raw_fd(), NBD_DISCONNECT, 0);
        let Some(t) = self.thread.take() else { return };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !t.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        // A server that never answers the disconnect: closing the socket ends it.
        let _ = self.sock.shutdown(Shutdown::Both);
        let _ = t.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(s: &mut TcpStream, cmd: u16, handle: u64, offset: u64, len: u32) {
        let mut out = Vec::new();
        out.extend(REQUEST.to_be_bytes());
        out.extend(0u16.to_be_bytes());
        out.extend(cmd.to_be_bytes());
        out.extend(handle.to_be_bytes());
        out.extend(offset.to_be_bytes());
        out.extend(len.to_be_bytes());
        s.write_all(&out).unwrap();
    }

    /// (error, handle) of a simple reply.
    fn answer(s: &mut TcpStream) -> (u32, u64) {
        assert_eq!(u32_of(s).unwrap(), REPLY);
        (u32_of(s).unwrap(), u64_of(s).unwrap())
    }

    /// The server speaks the protocol as the kernel's driver does: a write is read back, a
    /// request beyond the image is refused, a disconnect ends the service.
    #[test]
    fn the_server_keeps_what_is_written_and_refuses_beyond_its_image() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        let server = std::thread::spawn(move || serve(l.accept().unwrap().0, 1 << 20));
        let mut s = TcpStream::connect(at).unwrap();
        assert_eq!(
            handshake(&mut s).unwrap(),
            (1 << 20, HAS_FLAGS | SEND_FLUSH)
        );
        request(&mut s, CMD_WRITE, 7, 8192, 4);
        s.write_all(b"nbd!").unwrap();
        assert_eq!(answer(&mut s), (0, 7));
        request(&mut s, CMD_READ, 8, 8190, 8);
        assert_eq!(answer(&mut s), (0, 8));
        assert_eq!(&get::<8>(&mut s).unwrap(), b"\0\0nbd!\0\0");
        request(&mut s, CMD_READ, 9, (1 << 20) - 2, 4);
        assert_eq!(answer(&mut s), (EINVAL, 9), "beyond the image");
        request(&mut s, CMD_WRITE, 10, u64::MAX - 1, 4);
        s.write_all(b"over").unwrap();
        assert_eq!(answer(&mut s), (EINVAL, 10), "an offset that wraps");
        request(&mut s, CMD_FLUSH, 11, 0, 0);
        assert_eq!(answer(&mut s), (0, 11));
        request(&mut s, CMD_DISC, 12, 0, 0);
        server.join().unwrap().unwrap();
    }

    #[test]
    fn a_client_refuses_what_is_not_an_nbd_server() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            c.write_all(b"HTTP/1.1 400 Bad\r\n\r\n").unwrap();
        });
        let mut s = TcpStream::connect(at).unwrap();
        let e = handshake(&mut s).unwrap_err();
        assert_eq!(e.to_string(), "not an NBD server");
        t.join().unwrap();
    }
}
