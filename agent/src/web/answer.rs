//! What an answer costs while a client takes it, and the bound on it. An answer's body goes
//! out in small chunks, so a client's flow control (an HTTP/2 window of zero) or a full
//! socket (a client that pipelines and never reads) holds back at most one chunk beyond
//! what the client took; until the body is done, its bytes count against its connection and
//! against the agent's answer budget. The server closes connections whose answers are over
//! the budget (oldest first) or not taken within the time a client has, so clients that
//! never read cost a bounded amount of memory however many there are.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

/// Bytes handed to the connection per poll of the body.
const CHUNK: usize = 16 << 10;

/// What one connection's unfinished answers hold.
#[derive(Default)]
pub struct Held {
    bytes: AtomicU64,
    /// Milliseconds after `epoch` when the connection last went from holding nothing to
    /// holding an answer; 0 while it holds none.
    since_ms: AtomicU64,
}

impl Held {
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }

    /// Since when it has held an answer, if it holds one.
    pub fn since(&self, epoch: Instant) -> Option<Instant> {
        match self.since_ms.load(Ordering::Acquire) {
            0 => None,
            ms => Some(epoch + std::time::Duration::from_millis(ms - 1)),
        }
    }
}

/// Every connection's unfinished answers together.
pub struct Budget {
    pub limit: u64,
    held: AtomicU64,
    epoch: Instant,
}

impl Budget {
    pub fn new(limit: u64) -> Budget {
        Budget {
            limit,
            held: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Acquire)
    }

    pub fn epoch(&self) -> Instant {
        self.epoch
    }
}

/// A body sent in [`CHUNK`]s; with a holding, its bytes count until it is done or dropped.
pub struct Answer {
    rest: Bytes,
    holding: Option<Holding>,
}

struct Holding {
    bytes: u64,
    conn: Arc<Held>,
    budget: Arc<Budget>,
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.bytes, Ordering::AcqRel);
        if self.conn.bytes.fetch_sub(self.bytes, Ordering::AcqRel) == self.bytes {
            self.conn.since_ms.store(0, Ordering::Release);
        }
    }
}

impl Answer {
    /// A small body that is not counted (errors, the landing page).
    pub fn plain(b: impl Into<Bytes>) -> Answer {
        Answer {
            rest: b.into(),
            holding: None,
        }
    }

    /// A body counted against `conn` and `budget` until done.
    pub fn held(b: Bytes, conn: &Arc<Held>, budget: &Arc<Budget>) -> Answer {
        let bytes = b.len() as u64;
        budget.held.fetch_add(bytes, Ordering::AcqRel);
        if conn.bytes.fetch_add(bytes, Ordering::AcqRel) == 0 {
            let ms = budget.epoch.elapsed().as_millis() as u64 + 1;
            conn.since_ms.store(ms, Ordering::Release);
        }
        Answer {
            rest: b,
            holding: Some(Holding {
                bytes,
                conn: Arc::clone(conn),
                budget: Arc::clone(budget),
            }),
        }
    }
}

impl Body for Answer {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.rest.is_empty() {
            self.holding = None;
            return Poll::Ready(None);
        }
        let n = self.rest.len().min(CHUNK);
        let chunk = self.rest.split_to(n);
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.rest.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn an_answer_counts_until_it_is_taken() {
        let budget = Arc::new(Budget::new(1 << 20));
        let conn = Arc::new(Held::default());
        let body = Bytes::from(vec![7u8; 40_000]);
        let a = Answer::held(body.clone(), &conn, &budget);
        assert_eq!((budget.held(), conn.bytes()), (40_000, 40_000));
        assert!(conn.since(budget.epoch()).is_some());
        let mut a = a;
        let first = a.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first.len(), CHUNK, "a chunk at a time");
        assert_eq!(budget.held(), 40_000, "held until done");
        let rest = a.collect().await.unwrap().to_bytes();
        assert_eq!([first, rest].concat(), body.to_vec());
        assert_eq!((budget.held(), conn.bytes()), (0, 0));
        assert!(conn.since(budget.epoch()).is_none());
        let b = Answer::held(Bytes::from_static(b"x"), &conn, &budget);
        drop(b);
        assert_eq!(budget.held(), 0, "a dropped answer is released");
    }
}
