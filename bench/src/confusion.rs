//! What the diagnosis benches share: the confusion matrix of true classes against verdicts,
//! ratios as they print them, and the commit a run was made at.

use std::fmt::Write;
use std::process::Command;

/// The commit checked out, short; empty where git cannot say.
pub fn commit() -> String {
    Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// `n / of` with its counts, or `-` when there is nothing to count.
pub fn ratio(n: usize, of: usize) -> String {
    if of == 0 {
        "-".to_string()
    } else {
        format!("{:.2} ({n} of {of})", n as f64 / of as f64)
    }
}

/// The matrix of `judged` (true class, verdict's cause) pairs: a row per class of
/// `classes`, a column per cause of `verdicts` and then any other cause a verdict named.
pub fn matrix(s: &mut String, classes: &[&str], verdicts: &[&str], judged: &[(&str, &str)]) {
    let mut verdicts = verdicts.to_vec();
    for (_, cause) in judged {
        if !verdicts.contains(cause) {
            verdicts.push(cause);
        }
    }
    let _ = writeln!(s, "\nconfusion matrix (rows: true class; columns: verdict)");
    let _ = write!(s, "  {:<20}", "");
    for v in &verdicts {
        let _ = write!(s, "{v:>20}");
    }
    let _ = writeln!(s);
    for class in classes {
        let _ = write!(s, "  {class:<20}");
        for v in &verdicts {
            let n = judged
                .iter()
                .filter(|(c, cause)| c == class && cause == v)
                .count();
            let _ = write!(s, "{n:>20}");
        }
        let _ = writeln!(s);
    }
}

#[cfg(test)]
mod tests {
    use super::{matrix, ratio};

    #[test]
    fn ratios() {
        assert_eq!(ratio(1, 4), "0.25 (1 of 4)");
        assert_eq!(ratio(0, 0), "-");
    }

    #[test]
    fn a_cause_outside_the_columns_gets_its_own() {
        let mut s = String::new();
        matrix(
            &mut s,
            &["healthy", "cpu"],
            &["none"],
            &[("healthy", "none"), ("cpu", "cpu"), ("cpu", "none")],
        );
        let rows: Vec<Vec<&str>> = s
            .lines()
            .skip(2)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows[0], ["none", "cpu"]);
        assert_eq!(rows[1], ["healthy", "1", "0"]);
        assert_eq!(rows[2], ["cpu", "1", "1"]);
    }
}
