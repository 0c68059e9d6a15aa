//! The HTML report as a reader sees it: rendered by headless Chromium to a PNG, its charts
//! hold data. One report comes from a real run sampled by a real agent on a loop device, the
//! other from a synthetic record of congestion on the path to a replica, so every chart has
//! lines: latency, retransmits and drops, the breakdown by replica.

#[allow(
    dead_code,
    reason = "the synthetic lab of the analysis tests; this test uses a part"
)]
#[path = "../../analysis/tests/synth/mod.rs"]
mod synth;

use std::path::{Path, PathBuf};
use std::process::Command;

use record::Record;
use stornet_lab::agent::AgentProcess;
use stornet_lab::blockdev::LoopDevice;
use stornet_lab::chromium::screenshot;
use stornet_lab::loadgen::run;
use stornet_lab::privilege::{require_root, require_tool};

const WIDTH: u32 = 1400;
const HEIGHT: u32 = 2400;

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("stornet-html-{}-{name}", std::process::id()))
}

/// Where the screenshots stay for a reader to look at (kept in the build's temp directory).
fn kept(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    dir.join(name)
}

fn analyze_html(record: &Path, html: &Path) {
    let o = Command::new(stornet_lab::bins::path("stornet"))
        .args(["report", record.to_str().unwrap(), "--html"])
        .arg(html)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Polylines with at least `min` points in the page.
fn long_polylines(page: &str, min: usize) -> usize {
    page.split("<polyline points=\"")
        .skip(1)
        .filter(|p| p.split('"').next().unwrap().split(' ').count() >= min)
        .count()
}

struct Image {
    width: usize,
    height: usize,
    rgb: Vec<[u8; 3]>,
}

fn decode(png_path: &Path) -> Image {
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected PNG color type {other:?}"),
    };
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let rgb = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    Image {
        width: info.width as usize,
        height: info.height as usize,
        rgb,
    }
}

fn hex(c: &str) -> [u8; 3] {
    let v = u32::from_str_radix(c.trim_start_matches('#'), 16).unwrap();
    [(v >> 16) as u8, (v >> 8) as u8, v as u8]
}

impl Image {
    /// Columns in which `color` appears (close to it: anti-aliasing blends edges).
    fn columns_with(&self, color: [u8; 3]) -> usize {
        let near = |p: &[u8; 3]| p.iter().zip(color).all(|(a, b)| a.abs_diff(b) <= 12);
        (0..self.width)
            .filter(|&x| (0..self.height).any(|y| near(&self.rgb[y * self.width + x])))
            .count()
    }

    /// Distinct colors and the share of pixels that are not white, in a band of rows.
    fn variety(&self, rows: std::ops::Range<usize>) -> (usize, f64) {
        let mut seen = std::collections::HashSet::new();
        let mut ink = 0usize;
        let band = &self.rgb[rows.start * self.width..rows.end.min(self.height) * self.width];
        for p in band {
            seen.insert(*p);
            if p.iter().any(|c| *c < 240) {
                ink += 1;
            }
        }
        (seen.len(), ink as f64 / band.len().max(1) as f64)
    }
}

/// Renders a report and checks that its charts hold data: lines in the given colors run across
/// most of the plot width, and the chart bands are far from blank.
fn render_and_check(html: &Path, png_path: &Path, colors: &[(&str, &str)]) -> Image {
    screenshot(html, png_path, WIDTH, HEIGHT).expect("chromium renders the report");
    let img = decode(png_path);
    assert_eq!((img.width, img.height), (WIDTH as usize, HEIGHT as usize));
    for (what, c) in colors {
        let cols = img.columns_with(hex(c));
        assert!(
            cols >= 500,
            "{what} ({c}) drawn in only {cols} of {WIDTH} columns of {}",
            png_path.display()
        );
    }
    for band in [300..800, 800..1400] {
        let (distinct, ink) = img.variety(band.clone());
        assert!(
            distinct >= 40 && ink >= 0.03,
            "rows {band:?} look blank: {distinct} colors, {:.1}% ink",
            ink * 100.0
        );
    }
    img
}

#[test]
fn correlate_html_report_of_a_real_run_renders_with_data() {
    let test = "correlate_html_report_of_a_real_run_renders_with_data";
    if !require_root(test) || !require_tool(test, "chromium") {
        return;
    }
    let agent = AgentProcess::start(&[]).expect("agent starts");
    let disk = LoopDevice::new("html", 64 << 20).expect("loop device");
    let rec = tmp("real.json");
    let r = run(&[
        "--name=html",
        &format!("--filename={}", disk.dev.display()),
        "--rw=randrw",
        "--bs=4k",
        "--iodepth=8",
        "--time_based",
        "--runtime=4",
        "--interval=100ms",
        "--output-format=json",
        &format!("--agent=h1=http://{}", agent.addr),
        &format!("--record={}", rec.display()),
    ])
    .unwrap();
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let html = tmp("real.html");
    analyze_html(&rec, &html);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        long_polylines(&page, 30) >= 6,
        "latency p50/p99 of reads and writes, breakdown, histograms"
    );
    let png_path = kept("correlate-report-real.png");
    render_and_check(
        &html,
        &png_path,
        &[("p99 write", "#d62728"), ("p99 read", "#1f77b4")],
    );
    println!("rendered report: {}", png_path.display());
    for f in [&rec, &html] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn correlate_html_report_of_congestion_shows_every_chart() {
    let test = "correlate_html_report_of_congestion_shows_every_chart";
    if !require_root(test) || !require_tool(test, "chromium") {
        return;
    }
    let mut lab = synth::Lab::new(synth::Fault::Congestion).noisy();
    lab.reads = true;
    lab.n = 60;
    lab.from = 20;
    lab.to = 38;
    let rec = tmp("congestion.json");
    Record::for_run("h1", lab.build()).write(&rec).unwrap();
    let html = tmp("congestion.html");
    analyze_html(&rec, &html);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("network_congestion"));
    assert!(page.contains("replica 198.18.0.2 round trip"));
    assert!(
        long_polylines(&page, 60) >= 8,
        "every series has its 60 points"
    );
    let png_path = kept("correlate-report-congestion.png");
    let img = render_and_check(
        &html,
        &png_path,
        &[
            ("p99 write", "#d62728"),
            ("p99 read", "#1f77b4"),
            // The first congestion counter (retransmits) and the local device line.
            ("retransmits", "#2ca02c"),
        ],
    );
    // The raised intervals are shaded: yellow under the latency lines.
    let shade = img.columns_with([255, 243, 199]);
    assert!(shade >= 150, "shaded columns: {shade}");
    println!("rendered report: {}", png_path.display());
    for f in [&rec, &html] {
        let _ = std::fs::remove_file(f);
    }
}
