//! stornet's Prometheus client, shared by loadgen, the lab and xtask: one HTTP(S) client
//! (the URLs loadgen reads, the TLS files and credentials of `--agent-*` and
//! `--prometheus-*`, GET on ureq), the text exposition parser, and range queries.

mod client;
pub mod query;
pub mod text;
mod tls;
mod url;

pub use client::{Client, Error, ErrorKind, Response, basic};
pub use tls::{ClientConfig, ClientFiles};
pub use url::{Scheme, Url, encode};
