//! Serving HTTP: the web config file (TLS, client certificates, basic auth, headers, rate
//! limit), the server and what it answers (metrics, gzip, landing page), and the watch that
//! reloads the web config when its files change.

pub mod answer;
pub mod auth;
pub mod config;
pub mod gzip;
pub mod landing;
pub mod rate_limit;
pub mod scrape;
pub mod server;
pub mod tls;
pub mod tls_settings;
pub mod watch;
pub mod write_deadline;
