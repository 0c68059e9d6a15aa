//! The kernel's `bpf_prog_info` of a loaded program, for the agent's own metrics and the
//! statistics sampler.

use std::os::fd::{AsRawFd, BorrowedFd};

use anyhow::{Context, Result};

/// `union bpf_attr` as `BPF_OBJ_GET_INFO_BY_FD` reads it.
#[repr(C)]
struct InfoByFdAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;

/// The kernel's `bpf_prog_info` of a program: run count and time (while statistics are on)
/// and recursion misses (Linux ≥ 5.12: runs skipped because the program was already active
/// on that CPU), which aya's `ProgramInfo` does not expose.
pub fn prog_info(fd: BorrowedFd<'_>) -> Result<aya_obj::generated::bpf_prog_info> {
    // SAFETY: bpf_prog_info is plain old data; all-zero is a valid value.
    let mut info: aya_obj::generated::bpf_prog_info = unsafe { std::mem::zeroed() };
    let attr = InfoByFdAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: std::mem::size_of_val(&info) as u32,
        info: &mut info as *mut _ as u64,
    };
    // SAFETY: attr points to a bpf_prog_info of the size it states; no pointers inside it
    // are set, so the kernel fills only the fixed fields.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            &attr as *const InfoByFdAttr,
            std::mem::size_of::<InfoByFdAttr>() as u32,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error()).context("BPF_OBJ_GET_INFO_BY_FD");
    }
    Ok(info)
}
