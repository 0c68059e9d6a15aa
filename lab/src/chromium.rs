//! Headless Chromium for tests: renders a local HTML file to a PNG screenshot with a fresh
//! profile directory (removed afterwards), no network use beyond the file itself.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

/// Renders `html` at `width`×`height` into `png`; gives up after 90 s.
pub fn screenshot(html: &Path, png: &Path, width: u32, height: u32) -> Result<()> {
    let profile =
        std::env::temp_dir().join(format!("stornet-chromium-{}-{}", std::process::id(), width));
    let _ = std::fs::remove_dir_all(&profile);
    let _ = std::fs::remove_file(png);
    let html = html.canonicalize().context("the HTML file")?;
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting chromium")?;
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&profile);
            bail!("chromium did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = std::fs::remove_dir_all(&profile);
    ensure!(status.success(), "chromium failed: {status}");
    ensure!(
        png.is_file(),
        "chromium wrote no screenshot to {}",
        png.display()
    );
    Ok(())
}
