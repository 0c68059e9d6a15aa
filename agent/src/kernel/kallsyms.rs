//! Kernel code addresses to function names, from /proc/kallsyms. Looked up only for addresses
//! not seen before (one pass over the file), and cached.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};

const KALLSYMS: &str = "/proc/kallsyms";
/// The name of an address that cannot be resolved (no symbols, or hidden addresses).
pub const UNKNOWN: &str = "unknown";

#[derive(Default)]
pub struct Symbols {
    cache: HashMap<u64, String>,
}

impl Symbols {
    /// The function containing `addr`, for each address.
    pub fn names(&mut self, addrs: &[u64]) -> Vec<String> {
        let missing: Vec<u64> = addrs
            .iter()
            .copied()
            .filter(|a| !self.cache.contains_key(a))
            .collect();
        if !missing.is_empty() {
            let found = std::fs::File::open(KALLSYMS)
                .map(|f| functions(BufReader::new(f), &missing))
                .unwrap_or_default();
            for a in missing {
                let name = found.get(&a).cloned().unwrap_or_else(|| UNKNOWN.into());
                self.cache.insert(a, name);
            }
        }
        addrs.iter().map(|a| self.cache[a].clone()).collect()
    }
}

/// For each address, the text symbol at or below it, read from kallsyms-format text
/// (`ffffffff81000000 T name [module]`). Zero addresses (hidden by kptr_restrict) match
/// nothing.
pub fn functions(text: impl BufRead, addrs: &[u64]) -> HashMap<u64, String> {
    let mut best: HashMap<u64, (u64, String)> = HashMap::new();
    for line in text.lines().map_while(Result::ok) {
        let mut f = line.split_ascii_whitespace();
        let (Some(a), Some(kind), Some(name)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if !matches!(kind, "t" | "T" | "w" | "W") {
            continue;
        }
        let Ok(sym) = u64::from_str_radix(a, 16) else {
            continue;
        };
        if sym == 0 {
            continue;
        }
        for &addr in addrs {
            if sym <= addr && best.get(&addr).is_none_or(|(b, _)| sym > *b) {
                best.insert(addr, (sym, name.to_string()));
            }
        }
    }
    best.into_iter().map(|(a, (_, n))| (a, n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_text_symbol_below() {
        let text = "ffffffff81000000 T _text\n\
                    ffffffff81001000 t ip6_mc_input\n\
                    ffffffff81002000 D some_data\n\
                    ffffffff81003000 T __dev_forward_skb2\n\
                    ffffffffc0001000 t veth_xmit\t[veth]\n";
        let got = functions(
            text.as_bytes(),
            &[
                0xffffffff81001010,
                0xffffffff81002010,
                0xffffffffc0001234,
                5,
            ],
        );
        assert_eq!(got[&0xffffffff81001010], "ip6_mc_input");
        // Data symbols are skipped: the function before it is the match.
        assert_eq!(got[&0xffffffff81002010], "ip6_mc_input");
        assert_eq!(got[&0xffffffffc0001234], "veth_xmit");
        assert!(!got.contains_key(&5));
    }

    #[test]
    fn hidden_addresses_resolve_to_nothing() {
        let text = "0000000000000000 T _text\n0000000000000000 t ip6_mc_input\n";
        assert!(functions(text.as_bytes(), &[0xffffffff81001010]).is_empty());
    }
}
