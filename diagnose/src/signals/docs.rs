//! docs/metrics.md's table of what the analysis reads, rendered from [`FAMILIES`] so the docs
//! say what the code does. `UPDATE=1 cargo test -p stornet-diagnose` writes it into the docs.

use super::{FAMILIES, Fold, MetricType, Place, SignalFamily};

/// One row per family: the series with the labels it is keyed by, how its samples become a
/// value, and where the value goes in the model.
pub fn table() -> String {
    let mut out = String::from("| metric | read as | model |\n|---|---|---|\n");
    for f in FAMILIES {
        let keys = match f.labels {
            [] => String::new(),
            l => format!("{{{}}}", l.join(",")),
        };
        out.push_str(&format!(
            "| `{}{keys}` | {} | {} |\n",
            f.series(),
            read_as(f),
            model(f)
        ));
    }
    out
}

/// `counter` or `gauge`, and how the series of the labels left out of the key combine.
fn read_as(f: &SignalFamily) -> String {
    let kind = match f.kind {
        MetricType::Counter { .. } => "counter",
        MetricType::Gauge => "gauge",
    };
    let folded: Vec<String> = f
        .metric
        .labels
        .iter()
        .filter(|l| !f.labels.contains(*l))
        .map(|l| format!("`{l}`"))
        .collect();
    if folded.is_empty() {
        return kind.to_string();
    }
    let how = match f.fold {
        Fold::Sum => "summed",
        Fold::Min => "the smallest",
        Fold::Max => "the largest",
    };
    format!("{kind}, {how} over {}", folded.join(", "))
}

fn model(f: &SignalFamily) -> String {
    match f.place {
        Place::Device(name, _) => format!("`devices[device].{name}`"),
        Place::Peer(name, _) => format!("`peers[peer].{name}`"),
        Place::Interface(name, _) => format!("`interfaces[name].{name}`"),
        Place::Custom(text) => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::table;

    const BEGIN: &str = "<!-- The table below is rendered from diagnose/src/signals (FAMILIES); \
                         UPDATE=1 cargo test -p stornet-diagnose writes it. -->\n";
    const END: &str = "<!-- End of the rendered table. -->";

    #[test]
    fn docs_show_the_table_of_what_the_analysis_reads() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/metrics.md");
        let docs = std::fs::read_to_string(path).unwrap();
        let (before, rest) = docs
            .split_once(BEGIN)
            .unwrap_or_else(|| panic!("docs/metrics.md lacks the line {BEGIN}"));
        let (_, after) = rest
            .split_once(END)
            .unwrap_or_else(|| panic!("docs/metrics.md lacks the line {END}"));
        let want = format!("{before}{BEGIN}{}{END}{after}", table());
        if want == docs {
            return;
        }
        if std::env::var_os("UPDATE").is_some() {
            std::fs::write(path, want).unwrap();
            return;
        }
        panic!(
            "docs/metrics.md's table of what the analysis reads is not what FAMILIES says: \
             UPDATE=1 cargo test -p stornet-diagnose writes it"
        );
    }
}
