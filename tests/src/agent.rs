//! stornet-agent as a child process of a test: started on a free loopback port, waited for,
//! and stopped (SIGTERM, then SIGKILL) on drop.

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::metrics::{self, Sample};

pub struct AgentProcess {
    pub child: Child,
    pub addr: SocketAddr,
}

/// A free port on 127.0.0.1 (bound and released; the agent binds it right after).
pub fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl AgentProcess {
    /// Starts the agent with `args` on a free port and waits until it answers /metrics.
    pub fn start(args: &[&str]) -> Result<AgentProcess> {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
        let child = Command::new(crate::bins::path("stornet-agent"))
            .arg(format!("--web.listen-address={addr}"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting stornet-agent")?;
        let mut agent = AgentProcess { child, addr };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok((200, _)) = metrics::http_get(addr, "/-/healthy") {
                return Ok(agent);
            }
            if let Some(status) = agent.child.try_wait()? {
                bail!("stornet-agent exited during start-up: {status}");
            }
            if Instant::now() > deadline {
                bail!("stornet-agent did not answer on {addr} within 30 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn scrape(&self) -> Result<Vec<Sample>> {
        let (code, body) = metrics::http_get(self.addr, "/metrics")?;
        if code != 200 {
            bail!("/metrics answered {code}: {body}");
        }
        metrics::parse(&body)
    }

    /// Sends SIGTERM and waits up to `timeout` for the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> Result<std::process::ExitStatus> {
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait()? {
                return Ok(s);
            }
            if Instant::now() > deadline {
                bail!("stornet-agent still running {timeout:?} after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None))
            && self.terminate(Duration::from_secs(3)).is_err()
        {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The agent inside the test process, started with a given configuration (for settings the
/// command line does not take). Its probes detach when it drops.
pub struct InProcessAgent {
    pub agent: stornet_agent::agent::Agent,
}

impl InProcessAgent {
    pub fn start(config: &stornet_agent::config::Config) -> InProcessAgent {
        InProcessAgent {
            agent: stornet_agent::agent::Agent::start(config),
        }
    }

    /// The samples `/metrics` would serve now.
    pub fn scrape(&self) -> Result<Vec<Sample>> {
        metrics::parse(&stornet_agent::exporter::render(&self.agent.gather())?)
    }
}
