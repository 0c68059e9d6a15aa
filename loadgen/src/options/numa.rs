//! fio's `numa_cpu_nodes` and `numa_mem_policy` values: node lists as fio writes them
//! (`0,2`, `0-1`, `all`).

use super::MemPolicy;
use super::values::excerpt;

/// Nodes this many or more are refused as a typo (Linux's MAX_NUMNODES is at most 1024).
const MAX_NODE: u32 = 1024;

/// A node list; None for `all` (no binding).
pub fn nodes(v: &str) -> Result<Option<Vec<u32>>, String> {
    let t = v.trim();
    if t.eq_ignore_ascii_case("all") {
        return Ok(None);
    }
    let bad = || {
        format!(
            "`{}` is not a node list (`0`, `0,2`, `0-1` or `all`)",
            excerpt(v)
        )
    };
    let node = |s: &str| -> Result<u32, String> {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|&n| n < MAX_NODE)
            .ok_or_else(bad)
    };
    let mut out = Vec::new();
    for part in t.split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (node(a)?, node(b)?),
            None => (node(part)?, node(part)?),
        };
        if a > b {
            return Err(bad());
        }
        out.extend(a..=b);
    }
    out.sort_unstable();
    out.dedup();
    Ok(Some(out))
}

/// `mode[:nodelist]`: `default`, `local`, `prefer:N`, `bind:LIST`, `interleave:LIST`.
pub fn policy(v: &str) -> Result<MemPolicy, String> {
    let (mode, list) = match v.trim().split_once(':') {
        Some((m, l)) => (m.trim().to_ascii_lowercase(), Some(l)),
        None => (v.trim().to_ascii_lowercase(), None),
    };
    let all = || -> Result<Vec<u32>, String> {
        match list {
            None => Err(format!("`{}` needs a node list (`{mode}:0-1`)", excerpt(v))),
            // `all`: every node the machine has, found when the job starts.
            Some(l) => Ok(nodes(l)?.unwrap_or_default()),
        }
    };
    match (mode.as_str(), list) {
        ("default", None) => Ok(MemPolicy::Default),
        ("local", None) => Ok(MemPolicy::Local),
        ("prefer", Some(l)) => match nodes(l)? {
            Some(n) if n.len() == 1 => Ok(MemPolicy::Prefer(n[0])),
            _ => Err(format!("`{}`: prefer takes one node", excerpt(v))),
        },
        ("bind", _) => Ok(MemPolicy::Bind(all()?)),
        ("interleave", _) => Ok(MemPolicy::Interleave(all()?)),
        ("default" | "local", Some(_)) => {
            Err(format!("`{}`: {mode} takes no node list", excerpt(v)))
        }
        _ => Err(format!(
            "`{}` (use default, prefer:N, bind:LIST, interleave:LIST or local)",
            excerpt(v)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_lists_as_fio_writes_them() {
        assert_eq!(nodes("0").unwrap(), Some(vec![0]));
        assert_eq!(nodes("0-1").unwrap(), Some(vec![0, 1]));
        assert_eq!(nodes("3,0-1,1").unwrap(), Some(vec![0, 1, 3]));
        assert_eq!(nodes("all").unwrap(), None);
        for bad in ["", "x", "2-1", "0-", "5000", "-1"] {
            assert!(nodes(bad).is_err(), "{bad}");
        }
        assert_eq!(policy("bind:0").unwrap(), MemPolicy::Bind(vec![0]));
        assert_eq!(
            policy("interleave:0-1").unwrap(),
            MemPolicy::Interleave(vec![0, 1])
        );
        assert_eq!(policy("prefer:1").unwrap(), MemPolicy::Prefer(1));
        assert_eq!(policy("local").unwrap(), MemPolicy::Local);
        assert_eq!(policy("default").unwrap(), MemPolicy::Default);
        assert_eq!(policy("bind:all").unwrap(), MemPolicy::Bind(vec![]));
        for bad in ["prefer:0-1", "bind", "local:0", "firsttouch:0"] {
            assert!(policy(bad).is_err(), "{bad}");
        }
    }
}
