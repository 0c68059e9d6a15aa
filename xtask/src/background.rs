//! A step that runs in a child process beside the foreground steps, its output printed as it
//! comes with a prefix naming it, so that interleaved lines stay attributable.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::cmd::display;

pub struct Background {
    name: String,
    child: Child,
    printers: Vec<JoinHandle<()>>,
    started: Instant,
}

impl Background {
    pub fn start(name: &str, cmd: &mut Command) -> Result<Background> {
        println!("==> {name} (in the background; its lines start with [{name}])");
        println!("$ {}", display(cmd));
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", display(cmd)))?;
        let mut printers = Vec::new();
        let out = child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>);
        let err = child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>);
        for stream in [out, err].into_iter().flatten() {
            let prefix = format!("[{name}] ");
            printers.push(std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    println!("{prefix}{line}");
                }
            }));
        }
        Ok(Background {
            name: name.to_string(),
            child,
            printers,
            started: Instant::now(),
        })
    }

    /// Waits for the child and all of its output.
    pub fn wait(mut self) -> Result<()> {
        let status = self.child.wait().context("waiting for a background step")?;
        for p in self.printers.drain(..) {
            let _ = p.join();
        }
        let failed = !status.success();
        println!(
            "<== {} (background): {:.1}s{}",
            self.name,
            self.started.elapsed().as_secs_f64(),
            if failed { " (failed)" } else { "" }
        );
        if failed {
            bail!("background step `{}` failed ({status})", self.name);
        }
        Ok(())
    }
}
