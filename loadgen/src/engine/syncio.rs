//! The synchronous engines (`ioengine=sync`, `psync`): one IO at a time, done by a system
//! call in the job thread, as fio's engines of those names do it.

use std::os::fd::RawFd;

/// Reads or writes `len` bytes at `offset`: pread/pwrite when `pos` is None, otherwise
/// read/write after an lseek unless the file's position `pos` is already `offset`.
/// Returns the bytes transferred or a negative errno, as io_uring would.
pub fn rw(
    fd: RawFd,
    write: bool,
    buf: *mut u8,
    len: usize,
    offset: u64,
    pos: Option<&mut Option<u64>>,
) -> i32 {
    // SAFETY: `buf` points to at least `len` bytes of the job's IO buffers, which outlive
    // the call; the file descriptor is the job's own.
    let n = unsafe {
        match pos {
            None if write => {
                libc::pwrite(fd, buf as *const libc::c_void, len, offset as libc::off_t)
            }
            None => libc::pread(fd, buf as *mut libc::c_void, len, offset as libc::off_t),
            Some(pos) => {
                if *pos != Some(offset)
                    && libc::lseek(fd, offset as libc::off_t, libc::SEEK_SET) < 0
                {
                    *pos = None;
                    return -errno();
                }
                let n = if write {
                    libc::write(fd, buf as *const libc::c_void, len)
                } else {
                    libc::read(fd, buf as *mut libc::c_void, len)
                };
                *pos = (n >= 0).then(|| offset + n as u64);
                n
            }
        }
    };
    if n < 0 { -errno() } else { n as i32 }
}

/// Punches a hole of `len` bytes at `offset`, keeping the file's size (fio's trim of a
/// file); `len` or a negative errno.
pub fn punch(fd: RawFd, offset: u64, len: u64) -> i32 {
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: a plain system call on the job's own file descriptor.
    let r = unsafe { libc::fallocate(fd, mode, offset as libc::off_t, len as libc::off_t) };
    if r < 0 { -errno() } else { len as i32 }
}

/// fsync or fdatasync; 0 or a negative errno.
pub fn sync(fd: RawFd, datasync: bool) -> i32 {
    // SAFETY: plain system calls on the job's own file descriptor.
    let r = unsafe {
        if datasync {
            libc::fdatasync(fd)
        } else {
            libc::fsync(fd)
        }
    };
    if r < 0 { -errno() } else { 0 }
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}
