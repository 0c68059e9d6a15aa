//! Rendering the metrics for many requests at once: each render answers every request that
//! was waiting when it started (the data is gathered after each of them arrived), and one
//! render of each kind (format, and plain or gzip) runs at a time. A crowd of clients asking at once
//! costs a render or two and one body they all share, not one each; a scraper among them
//! is answered by the next render, not after everyone queued before it.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::oneshot;

use crate::agent::Agent;
use crate::exposition::{self, Format};

type Rendered = Result<Bytes, String>;

#[derive(Default)]
struct Queue {
    waiting: Vec<oneshot::Sender<Rendered>>,
    running: bool,
}

/// The renders of one kind.
pub struct Renders {
    format: Format,
    gzip: bool,
    queue: Mutex<Queue>,
}

impl Renders {
    pub fn new(format: Format, gzip: bool) -> Arc<Renders> {
        Arc::new(Renders {
            format,
            gzip,
            queue: Mutex::new(Queue::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The metrics as rendered by the next render to start.
    pub async fn get(self: &Arc<Self>, agent: &Arc<Agent>) -> Rendered {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut q = self.lock();
            q.waiting.push(tx);
            !std::mem::replace(&mut q.running, true)
        };
        if start {
            tokio::spawn(Arc::clone(self).drive(Arc::clone(agent)));
        }
        rx.await
            .unwrap_or_else(|_| Err("the render was dropped".into()))
    }

    /// Renders for the waiting requests, batch after batch, until none waits.
    async fn drive(self: Arc<Self>, agent: Arc<Agent>) {
        loop {
            let batch = {
                let mut q = self.lock();
                if q.waiting.is_empty() {
                    q.running = false;
                    return;
                }
                std::mem::take(&mut q.waiting)
            };
            let (agent, format, gzip) = (Arc::clone(&agent), self.format, self.gzip);
            let rendered = tokio::task::spawn_blocking(move || render(&agent, format, gzip))
                .await
                .unwrap_or_else(|e| Err(format!("collecting metrics: {e}")));
            for tx in batch {
                let _ = tx.send(rendered.clone());
            }
        }
    }
}

/// One render: collect and write the format, compressed when asked for.
fn render(agent: &Agent, format: Format, gzip: bool) -> Rendered {
    let start = Instant::now();
    let created = agent.self_metrics.start_time();
    let body = exposition::render(&agent.gather().families(), format, created)
        .map_err(|e| format!("{e:#}"))?;
    let body = if gzip {
        super::gzip::compress(&body).map_err(|e| format!("{e:#}"))?
    } else {
        body
    };
    agent.self_metrics.observe_scrape(start.elapsed());
    Ok(Bytes::from(body))
}
