//! The one HTTP(S) client of loadgen, the tests and xtask: the URLs loadgen reads, the TLS
//! files and credentials of `--agent-*` and `--prometheus-*`, and GET on ureq.

mod client;
mod tls;
mod url;

pub use client::{Client, Error, ErrorKind, Response, basic};
pub use tls::{ClientConfig, ClientFiles};
pub use url::{Scheme, Url, encode};
