//! What `loadgen run` writes with fio's data options, counted in the file it wrote:
//! `dedupe_percentage` in unique 4 KiB blocks, `buffer_compress_percentage` in the bytes of
//! each chunk equal to the fill and in what gzip makes of the file, `buffer_pattern` in the
//! pattern's bytes. No root needed.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

const BLOCK: usize = 4096;
/// 16 MiB: 4096 blocks of 4 KiB.
const SIZE: &str = "16M";

fn loadgen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .arg("run")
        .args(args)
        .output()
        .expect("loadgen runs")
}

/// Writes a fresh file sequentially, once over, with `extra` options; returns its bytes.
fn written(name: &str, extra: &[&str]) -> Vec<u8> {
    let f = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loadgen-data-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&f);
    let file = format!("--filename={}", f.display());
    let size = format!("--size={SIZE}");
    let mut args = vec![
        "--name=data",
        file.as_str(),
        size.as_str(),
        "--rw=write",
        "--bs=4k",
        "--iodepth=8",
        "--output-format=json",
    ];
    args.extend_from_slice(extra);
    let o = loadgen(&args);
    assert!(
        o.status.success(),
        "{extra:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let data = std::fs::read(&f).unwrap();
    std::fs::remove_file(&f).unwrap();
    assert_eq!(data.len(), 16 << 20, "{extra:?}: the whole file written");
    data
}

fn unique_blocks(data: &[u8]) -> usize {
    data.chunks(BLOCK).collect::<HashSet<_>>().len()
}

/// gzip's output size over the input's (gzip is part of every Debian system).
fn gzip_ratio(data: &[u8]) -> f64 {
    use std::io::Write;
    let mut gz = Command::new("gzip")
        .arg("-c")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip runs");
    let mut stdin = gz.stdin.take().unwrap();
    let input = data.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&input).unwrap());
    let out = gz.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert!(out.status.success());
    out.stdout.len() as f64 / data.len() as f64
}

#[test]
fn dedupe_percentage_makes_that_share_of_blocks_duplicates() {
    let n = (16 << 20) / BLOCK;
    // fio's default (scramble_buffers=1): every block unique; likewise refill_buffers.
    assert_eq!(unique_blocks(&written("plain", &[])), n);
    assert_eq!(unique_blocks(&written("refill", &["--refill_buffers"])), n);
    // Without scrambling every write repeats its slot's buffer: at most iodepth kinds.
    let same = unique_blocks(&written("noscramble", &["--scramble_buffers=0"]));
    assert!(same <= 8, "{same} unique blocks from 8 buffers");

    for pct in [50usize, 80] {
        let data = written(
            &format!("dedupe{pct}"),
            &[&format!("--dedupe_percentage={pct}")],
        );
        let unique = unique_blocks(&data);
        let dup_share = 1.0 - unique as f64 / n as f64;
        // Each block is a duplicate with chance p: the count of duplicates is binomial, its
        // sd sqrt(n p (1-p)) ≤ 32 blocks of 4096 (0.8 %); 5 sd is 4 %.
        let want = pct as f64 / 100.0;
        assert!(
            (dup_share - want).abs() < 0.04,
            "dedupe_percentage={pct}: {unique} unique of {n} blocks, {:.1} % duplicates",
            dup_share * 100.0
        );
        eprintln!(
            "dedupe_percentage={pct}: {unique} unique of {n} 4 KiB blocks ({:.1} % duplicates)",
            dup_share * 100.0
        );
    }
    assert_eq!(
        unique_blocks(&written("dedupe100", &["--dedupe_percentage=100"])),
        1
    );
}

#[test]
fn buffer_compress_percentage_fills_that_share_of_each_chunk() {
    // 50 % of each 512-byte chunk (fio's default chunk): random, then zeros.
    let data = written("compress50", &["--buffer_compress_percentage=50"]);
    for (i, c) in data.chunks(512).enumerate() {
        assert!(
            c[256..].iter().all(|&b| b == 0),
            "chunk {i}: its second half is not the zero fill"
        );
    }
    let zeros = data.iter().filter(|&&b| b == 0).count() as f64 / data.len() as f64;
    // The fill, and 1/256 of the random half.
    assert!((zeros - (0.5 + 0.5 / 256.0)).abs() < 0.005, "{zeros}");
    let gz = gzip_ratio(&data);
    eprintln!("buffer_compress_percentage=50: {zeros:.4} of bytes zero, gzip to {gz:.3}");
    assert!((0.45..0.60).contains(&gz), "gzip ratio {gz}");
    // Still no duplicate blocks: the random halves are refilled.
    assert_eq!(unique_blocks(&data), data.len() / BLOCK);

    // A chunk of the whole block, 75 % fill with a pattern after 1 KiB of random data.
    let data = written(
        "compress75",
        &[
            "--buffer_compress_percentage=75",
            "--buffer_compress_chunk=0",
            "--buffer_pattern=\"stornet\"",
        ],
    );
    let pattern = b"stornet";
    for (i, b) in data.chunks(BLOCK).enumerate() {
        let fill = &b[1024..];
        assert!(
            fill.iter().zip(pattern.iter().cycle()).all(|(a, p)| a == p),
            "block {i}: the last 3 KiB are not the pattern from its start"
        );
    }
    let gz = gzip_ratio(&data);
    eprintln!("buffer_compress_percentage=75, chunk=bs, pattern: gzip to {gz:.3}");
    assert!((0.22..0.35).contains(&gz), "gzip ratio {gz}");
    // Refilled random data does not compress, even across blocks (its pool is far larger
    // than gzip's 32 KiB window). fio's default, scrambled reused buffers, does across
    // blocks: its HOWTO says as much.
    let gz = gzip_ratio(&written("random", &["--refill_buffers"]));
    assert!(gz > 0.97, "refilled random data gzips to {gz}");
    let scrambled = gzip_ratio(&written("scrambled", &[]));
    eprintln!("refill_buffers: gzip to {gz:.3}; scrambled (the default): {scrambled:.3}");
}

#[test]
fn buffer_pattern_and_zero_buffers_are_the_files_bytes() {
    let pattern = [0xde, 0xad, 0xfa, 0xce, 0x01];
    let data = written(
        "pattern",
        &["--buffer_pattern=0xdeadface01", "--scramble_buffers=0"],
    );
    for (i, b) in data.chunks(BLOCK).enumerate() {
        assert!(
            b.iter().zip(pattern.iter().cycle()).all(|(a, p)| a == p),
            "block {i} is not the pattern repeated from its start"
        );
    }
    // fio's default scrambling stamps the first 16 bytes of every 512; the rest is the
    // pattern, and no two blocks are the same.
    let data = written("pattern-scrambled", &["--buffer_pattern=0xdeadface01"]);
    for (i, b) in data.chunks(BLOCK).enumerate() {
        for (j, s) in b.chunks(512).enumerate() {
            let at = j * 512;
            assert!(
                (16..512).all(|k| s[k] == pattern[(at + k) % pattern.len()]),
                "block {i}, sector {j}: not the pattern past the stamp"
            );
        }
    }
    assert_eq!(unique_blocks(&data), data.len() / BLOCK);

    let data = written("zero", &["--zero_buffers"]);
    assert!(
        data.iter().all(|&b| b == 0),
        "zero_buffers wrote non-zero bytes"
    );
}

#[test]
fn bad_data_options_get_one_line_and_exit_2() {
    let f = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("loadgen-data-bad");
    let _ = std::fs::remove_file(&f);
    let file = format!("--filename={}", f.display());
    for (args, needle) in [
        (
            vec!["--dedupe_percentage=150"],
            "--dedupe_percentage: `150`",
        ),
        (vec!["--buffer_pattern=0xZZ"], "--buffer_pattern: `0xZZ`"),
        (
            vec!["--buffer_compress_percentage=abc"],
            "--buffer_compress_percentage",
        ),
        (vec!["--buffer_pattern='/etc/passwd'"], "file"),
        (vec!["--dedupe_mode=sideways"], "--dedupe_mode: `sideways`"),
        (
            vec![
                "--dedupe_percentage=50",
                "--dedupe_mode=working_set",
                "--dedupe_working_set_percentage=60",
            ],
            "cannot be reached",
        ),
        (
            vec!["--verify=crc32c", "--dedupe_percentage=50"],
            "--dedupe_percentage with --verify",
        ),
        (
            vec!["--verify", "--buffer_pattern=0x55"],
            "--buffer_pattern with --verify",
        ),
    ] {
        let mut all = vec![file.as_str(), "--size=1M", "--rw=write"];
        all.extend(args.iter().copied());
        let o = loadgen(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err:?}");
        assert!(err.contains(needle), "{args:?}: {err:?} lacks {needle:?}");
    }
    assert!(!f.exists(), "a refused run created its file");
}

/// Unique 4 KiB blocks of a file's blocks.
fn blocks_of(path: &std::path::Path) -> Vec<Vec<u8>> {
    std::fs::read(path)
        .unwrap()
        .chunks(BLOCK)
        .map(<[u8]>::to_vec)
        .collect()
}

/// fio's own `dedupe-global` example, smaller, run by loadgen and by fio: the two files
/// together hold the same share of unique blocks (fio's `dedupe_mode=working_set` with
/// `dedupe_global`: the jobs draw their duplicates from one working set).
#[test]
fn dedupe_global_working_set_shares_blocks_as_fios() {
    let job = "[global]\nioengine=libaio\niodepth=16\nsize=16m\ndedupe_mode=working_set\n\
               dedupe_global=1\ndedupe_percentage=50\nblocksize=4k\nrw=write\n\
               buffer_compress_percentage=50\ndedupe_working_set_percentage=50\n\n[a]\n\n[b]\n";
    let mut shares = Vec::new();
    for tool in ["loadgen", "fio"] {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "loadgen-data-dedupe-global-{tool}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("dedupe.fio"), job).unwrap();
        let mut c = match tool {
            "loadgen" => {
                let mut c = Command::new(env!("CARGO_BIN_EXE_loadgen"));
                c.arg("run");
                c
            }
            _ => Command::new("fio"),
        };
        let o = c
            .args(["--output-format=json", "dedupe.fio"])
            .current_dir(&dir)
            .output()
            .expect("runs (cargo xtask setup installs fio)");
        assert!(
            o.status.success(),
            "{tool}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let (a, b) = (blocks_of(&dir.join("a.0.0")), blocks_of(&dir.join("b.0.0")));
        std::fs::remove_dir_all(&dir).unwrap();
        let n = (a.len() + b.len()) as f64;
        let unique = |v: &[Vec<u8>]| v.iter().collect::<HashSet<_>>().len();
        let both = a.iter().chain(&b).collect::<HashSet<_>>().len() as f64 / n;
        eprintln!(
            "{tool}: a {} and b {} unique of {} blocks each, {:.1} % of both",
            unique(&a),
            unique(&b),
            a.len(),
            both * 100.0
        );
        shares.push(both);
    }
    // 8192 blocks: a binomial share's sd is under 0.6 points; the two tools within 4.
    assert!(
        (shares[0] - shares[1]).abs() < 0.04,
        "unique share of both files: loadgen {:.3}, fio {:.3}",
        shares[0],
        shares[1]
    );
}
