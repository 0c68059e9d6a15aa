//! A job order as the job service checks it, against a served directory that holds a link
//! out, a hard link and subdirectories: whatever the order, every file the check opens is
//! beneath the served directory, and nothing outside it is created or changed.
#![no_main]

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use loadgen::serve::jobs::policy::Confinement;
use loadgen::cluster::protocol::{self, Msg};
use loadgen::serve::jobs::check_order;

struct Host {
    served: PathBuf,
    outside: PathBuf,
    confinement: Confinement,
}

fn host() -> &'static Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| {
        let root =
            std::env::temp_dir().join(format!("stornet-fuzz-job-order-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (served, outside) = (root.join("served"), root.join("outside"));
        std::fs::create_dir_all(served.join("sub/deeper")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("victim"), vec![7u8; 1 << 16]).unwrap();
        std::fs::write(served.join("data"), vec![1u8; 1 << 16]).unwrap();
        std::os::unix::fs::symlink(outside.join("victim"), served.join("link")).unwrap();
        std::os::unix::fs::symlink(&outside, served.join("sub/out")).unwrap();
        std::fs::hard_link(outside.join("victim"), served.join("hard")).unwrap();
        let served = served.canonicalize().unwrap();
        let outside = outside.canonicalize().unwrap();
        let confinement = Confinement::new(std::slice::from_ref(&served), &[]).unwrap();
        Host {
            served,
            outside,
            confinement,
        }
    })
}

/// What is outside: every entry with its size and modification time.
fn outside_state(dir: &Path) -> Vec<(PathBuf, u64, i64)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let m = e.metadata().unwrap();
            (e.path(), m.len(), m.mtime_nsec())
        })
        .collect();
    v.sort();
    v
}

fuzz_target!(|data: &[u8]| {
    let h = host();
    let Ok(Msg::Job { name, args, files }) = protocol::parse(data) else {
        return;
    };
    let before = outside_state(&h.outside);
    let listen = "127.0.0.1:7480".parse().unwrap();
    if let Ok((_, targets)) = check_order(&h.confinement, listen, &name, &args, &files) {
        for o in &targets.opened {
            let at = std::fs::read_link(format!(
                "/proc/self/fd/{}",
                std::os::fd::AsRawFd::as_raw_fd(&o.fd)
            ))
            .unwrap();
            assert!(
                at.starts_with(&h.served),
                "{} opened {}, outside {}",
                o.path.display(),
                at.display(),
                h.served.display()
            );
        }
        targets.remove_created();
    }
    assert_eq!(
        outside_state(&h.outside),
        before,
        "something outside changed"
    );
});
