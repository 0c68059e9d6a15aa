//! Messages on stderr that cannot stop a program: when stderr is a pipe whose reader went
//! away, a line is dropped where `eprintln!` would panic (and a run would lose its report);
//! and text from elsewhere (a host, Prometheus, a record) made fit for a terminal.

use std::io::Write;

/// Writes one line to stderr, ignoring failure.
pub fn line(args: std::fmt::Arguments<'_>) {
    let _ = writeln!(std::io::stderr().lock(), "{args}");
}

/// `note!("…", args)`: one line on stderr via [`line`].
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::console::line(format_args!($($arg)*))
    };
}

/// Text from elsewhere (a host, Prometheus, a record) fit for a terminal or a log line:
/// control characters (escape sequences, bells, line breaks) written as escapes, and at most
/// `max` characters, then `…`.
pub fn plain(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max + 8));
    for (n, c) in s.chars().enumerate() {
        if n == max {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A report for the terminal: as [`plain`], but line breaks and tabs kept and no length cap.
pub fn terminal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_elsewhere_is_plain_and_short() {
        assert_eq!(plain("ok: résumé", 80), "ok: résumé");
        assert_eq!(plain("\u{1b}[2Jx\u{7}\n", 80), "\\u{1b}[2Jx\\u{7}\\n");
        assert_eq!(plain(&"a".repeat(10), 4), "aaaa…");
        assert_eq!(terminal("a\tb\n\u{1b}[31mc\n"), "a\tb\n\\u{1b}[31mc\n");
    }
}
