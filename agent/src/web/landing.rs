//! The landing page at `/`: what this is, which version, where the metrics are, and the state
//! of every probe, as exporters' landing pages have it.

use crate::agent::Agent;

pub fn page(agent: &Agent, telemetry_path: &str) -> String {
    let rows: String = agent
        .probes
        .status
        .iter()
        .map(|s| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&s.name),
                if s.up { "up" } else { "down" },
                escape(&s.detail)
            )
        })
        .collect();
    let path = escape(telemetry_path);
    format!(
        "<!doctype html><html><head><title>stornet-agent</title></head><body>\
         <h1>stornet-agent</h1>\
         <p>eBPF telemetry of storage and network paths for Prometheus. \
         Version {version} (revision {revision}).</p>\
         <ul><li><a href=\"{path}\">Metrics</a></li><li><a href=\"/-/healthy\">Health</a></li></ul>\
         <table><tr><th>probe</th><th>status</th><th>detail</th></tr>{rows}</table>\
         <p>Collectors: {collectors}</p></body></html>\n",
        version = env!("CARGO_PKG_VERSION"),
        revision = env!("STORNET_REVISION"),
        collectors = escape(&agent.collectors_enabled.join(", ")),
    )
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
