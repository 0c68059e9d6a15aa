//! Which cgroups IO is attributed to (`[cgroups]`): the cgroup v2 hierarchy, the path
//! patterns that name the cgroups to follow, and a bounded set of `cgroup` label values.
//!
//! The probes record the issuing task's cgroup v2 id (the kernel's `cgroup_id`, which is the
//! inode number of the cgroup's directory). Here an id becomes a label: the path, relative to
//! the hierarchy's root, of the deepest-or-equal cgroup a pattern names (IO of
//! `system.slice/ceph-osd@0.service/sub` counts for `system.slice/ceph-osd@0.service` under
//! `system.slice/*.service`), or `other`: not followed, no room left under the cap, or an
//! issuer the probes did not see. A cgroup keeps the label it got while it exists, and its
//! label leaves the export when its directory does.
//!
//! Counters the kernel keeps per cgroup id become counters per label in `counts`; the block
//! and network paths read their own per-cgroup maps through it (`block::cgroups`,
//! `net::probed::cgroups`), beside the rest of their maps.

pub mod counts;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The label of everything not counted under a cgroup of its own.
pub const OTHER: &str = "other";

/// Most directories one walk of the hierarchy visits (a host with more gets the rest as
/// `other`, rather than a scrape that walks forever).
const MAX_WALK: usize = 100_000;

/// One pattern of `[cgroups] paths`: glob components, each matching one path component.
#[derive(Clone, Debug)]
pub struct PathPattern {
    text: String,
    parts: Vec<glob::Pattern>,
}

impl PathPattern {
    /// Checks and compiles a pattern; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<PathPattern, String> {
        if text.is_empty() {
            return Err("an empty cgroup path pattern".into());
        }
        if text.starts_with('/') {
            return Err(format!(
                "cgroup path pattern {text:?} starts with '/': patterns are relative to the cgroup v2 root (e.g. \"system.slice/*.service\")"
            ));
        }
        let mut parts = Vec::new();
        for part in text.split('/') {
            if part.is_empty() || part == "." || part == ".." {
                return Err(format!(
                    "cgroup path pattern {text:?} has an empty, '.' or '..' component"
                ));
            }
            if part.contains("**") {
                return Err(format!(
                    "cgroup path pattern {text:?}: '**' is not supported; each component matches one directory"
                ));
            }
            parts.push(
                glob::Pattern::new(part)
                    .map_err(|e| format!("bad cgroup path pattern {text:?}: {}", e.msg))?,
            );
        }
        Ok(PathPattern {
            text: text.into(),
            parts,
        })
    }

    /// The labelled prefix of `path` (components relative to the root), if the pattern
    /// names it or one of its ancestors.
    fn prefix<'a>(&self, path: &'a [String]) -> Option<&'a [String]> {
        let n = self.parts.len();
        if path.len() < n {
            return None;
        }
        let head = &path[..n];
        head.iter()
            .zip(&self.parts)
            .all(|(c, p)| p.matches(c))
            .then_some(head)
    }

    pub fn text(&self) -> &str {
        &self.text
    }
}

/// The cgroup v2 hierarchy's mount point, from a `/proc/self/mountinfo` text: the first
/// `cgroup2` mount (`/sys/fs/cgroup` on most hosts, `/sys/fs/cgroup/unified` on hybrid ones).
pub fn v2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        // `id parent major:minor root mount-point options [optional...] - fstype source ...`
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace()
            .nth(4)
            .map(unescape)
            .map(PathBuf::from)
    })
}

/// mountinfo escapes spaces, tabs, newlines and backslashes as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// This host's cgroup v2 root, or why there is none.
pub fn v2_root() -> Result<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").context("reading mountinfo")?;
    match v2_mount(&text) {
        Some(p) => Ok(p),
        None => bail!("no cgroup v2 hierarchy is mounted"),
    }
}

/// A cgroup the labeller has seen: where it is, and the label its IO counts under.
#[derive(Clone, Debug)]
struct Known {
    dir: PathBuf,
    label: String,
}

/// Turns cgroup ids into bounded `cgroup` label values (see the module's comment).
pub struct Labeller {
    root: PathBuf,
    patterns: Vec<PathPattern>,
    max: usize,
    known: HashMap<u64, Known>,
    /// Labels in use, and the directory of the cgroup each names.
    held: BTreeMap<String, PathBuf>,
}

/// What became of the ids of one scrape.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    /// Live ids and their label.
    pub labels: HashMap<u64, String>,
    /// Ids of cgroups that are gone, with the label they counted under.
    pub gone: Vec<(u64, String)>,
    /// Labels released since the last scrape (their cgroup is gone).
    pub released: Vec<String>,
}

impl Labeller {
    pub fn new(root: PathBuf, patterns: Vec<PathPattern>, max: usize) -> Labeller {
        Labeller {
            root,
            patterns,
            max,
            known: HashMap::new(),
            held: BTreeMap::new(),
        }
    }

    /// Labels in use now (each names one live cgroup), besides `other`.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Resolves the ids of one scrape, walking the hierarchy once if any id is new.
    pub fn resolve(&mut self, ids: &BTreeSet<u64>) -> Resolved {
        let mut out = Resolved::default();
        // Labels whose cgroup is gone leave first, making room under the cap.
        let released: Vec<String> = self
            .held
            .iter()
            .filter(|(_, dir)| !dir.is_dir())
            .map(|(l, _)| l.clone())
            .collect();
        for l in &released {
            self.held.remove(l);
        }
        out.released = released;
        // Known ids whose directory is gone (or now holds another cgroup).
        let dead: Vec<u64> = self
            .known
            .iter()
            .filter(|(id, k)| !same_cgroup(&k.dir, **id))
            .map(|(id, _)| *id)
            .collect();
        for &id in &dead {
            if let Some(k) = self.known.remove(&id) {
                out.gone.push((id, k.label));
            }
        }
        // (An id found dead just now is not new: its label is the one it had.)
        let new: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|id| *id != 0 && !self.known.contains_key(id) && !dead.contains(id))
            .collect();
        let found = if new.is_empty() {
            HashMap::new()
        } else {
            walk(&self.root, &new)
        };
        for id in new {
            match found.get(&id) {
                Some(rel) => {
                    let label = self.label_for(rel);
                    self.known.insert(
                        id,
                        Known {
                            dir: self.root.join(rel.join("/")),
                            label,
                        },
                    );
                }
                // Gone before this scrape saw it: its IO stays in `other`, once.
                None => out.gone.push((id, OTHER.into())),
            }
        }
        for &id in ids {
            let label = match self.known.get(&id) {
                Some(k) => k.label.clone(),
                None if id == 0 => OTHER.into(),
                None => continue,
            };
            out.labels.insert(id, label);
        }
        out
    }

    /// The label of a newly seen cgroup at `rel` (components below the root).
    fn label_for(&mut self, rel: &[String]) -> String {
        let Some(prefix) = self.patterns.iter().find_map(|p| p.prefix(rel)) else {
            return OTHER.into();
        };
        let label = prefix.join("/");
        if self.held.contains_key(&label) {
            return label;
        }
        if self.held.len() >= self.max {
            return OTHER.into();
        }
        self.held.insert(label.clone(), self.root.join(&label));
        label
    }
}

/// Whether `dir` is still the cgroup `id` (a removed cgroup's name may be taken again by a
/// new one, with a new id).
fn same_cgroup(dir: &Path, id: u64) -> bool {
    std::fs::metadata(dir).is_ok_and(|m| m.is_dir() && m.ino() == id)
}

/// The paths (components below `root`) of the cgroups `wanted`, by id, in one walk.
fn walk(root: &Path, wanted: &[u64]) -> HashMap<u64, Vec<String>> {
    let wanted: BTreeSet<u64> = wanted.iter().copied().collect();
    let mut found = HashMap::new();
    let mut stack: Vec<(PathBuf, Vec<String>)> = vec![(root.to_path_buf(), Vec::new())];
    let mut visited = 0;
    while let Some((dir, rel)) = stack.pop() {
        visited += 1;
        if visited > MAX_WALK || found.len() == wanted.len() {
            break;
        }
        if let Ok(m) = std::fs::metadata(&dir)
            && wanted.contains(&m.ino())
        {
            found.insert(m.ino(), rel.clone());
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                let mut r = rel.clone();
                r.push(e.file_name().to_string_lossy().into_owned());
                stack.push((e.path(), r));
            }
        }
    }
    found
}

/// A directory tree stands in for the hierarchy in tests: ids are its directories' inodes.
#[cfg(test)]
pub(crate) struct Tree(pub PathBuf);

#[cfg(test)]
impl Tree {
    pub fn new(name: &str) -> Tree {
        let dir = std::env::temp_dir().join(format!("stornet-cg-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Tree(dir)
    }
    pub fn make(&self, rel: &str) -> u64 {
        let d = self.0.join(rel);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::metadata(&d).unwrap().ino()
    }
    pub fn remove(&self, rel: &str) {
        std::fs::remove_dir_all(self.0.join(rel)).unwrap();
    }
}

#[cfg(test)]
impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
pub(crate) fn patterns(p: &[&str]) -> Vec<PathPattern> {
    p.iter().map(|t| PathPattern::parse(t).unwrap()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_patterns_say_why() {
        for (p, why) in [
            ("", "empty"),
            ("/system.slice", "starts with '/'"),
            ("a//b", "empty, '.' or '..'"),
            ("a/../b", "empty, '.' or '..'"),
            ("kubepods/**", "'**'"),
            ("a/[b", "bad cgroup path pattern"),
        ] {
            let e = PathPattern::parse(p).unwrap_err();
            assert!(e.contains(why), "{p:?}: {e}");
        }
    }

    #[test]
    fn a_pattern_labels_the_cgroup_it_names_and_its_descendants() {
        let p = PathPattern::parse("system.slice/*.service").unwrap();
        let path = |s: &str| -> Vec<String> { s.split('/').map(String::from).collect() };
        let sub = path("system.slice/ceph-osd@0.service/sub");
        assert_eq!(
            p.prefix(&sub).map(|h| h.join("/")).as_deref(),
            Some("system.slice/ceph-osd@0.service")
        );
        assert!(p.prefix(&path("system.slice")).is_none());
        assert!(p.prefix(&path("user.slice/a.service")).is_none());
    }

    #[test]
    fn the_v2_mount_is_found_on_hybrid_and_unified_hosts() {
        let hybrid = "35 25 0:30 / /sys/fs/cgroup ro - tmpfs tmpfs ro\n\
                      36 35 0:31 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n\
                      37 35 0:32 / /sys/fs/cgroup/blkio rw - cgroup cgroup rw,blkio\n";
        assert_eq!(
            v2_mount(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let v1_only = "37 35 0:32 / /sys/fs/cgroup/blkio rw - cgroup cgroup rw,blkio\n";
        assert_eq!(v2_mount(v1_only), None);
        let spaced = "36 35 0:31 / /mnt/cg\\0402 rw shared:9 - cgroup2 none rw\n";
        assert_eq!(v2_mount(spaced), Some(PathBuf::from("/mnt/cg 2")));
    }

    #[test]
    fn ids_get_bounded_labels_that_leave_with_their_cgroup() {
        let t = Tree::new("labels");
        let a = t.make("system.slice/a.service");
        let a_sub = t.make("system.slice/a.service/worker");
        let b = t.make("system.slice/b.service");
        let c = t.make("system.slice/c.service");
        let user = t.make("user.slice/u");
        let mut l = Labeller::new(t.0.clone(), patterns(&["system.slice/*.service"]), 2);
        // a is seen first (new ids of one scrape take places in the order of their ids,
        // which the file system chooses).
        let r = l.resolve(&[a].into());
        assert_eq!(r.labels[&a], "system.slice/a.service");
        let ids: BTreeSet<u64> = [0, a, a_sub, b, c, user].into();
        let r = l.resolve(&ids);
        assert_eq!(r.labels[&a], "system.slice/a.service");
        assert_eq!(r.labels[&a_sub], "system.slice/a.service");
        assert_eq!(r.labels[&0], OTHER);
        assert_eq!(r.labels[&user], OTHER);
        // One place left: the one of b and c with the smaller id takes it.
        let (won, lost) = if b < c {
            ((b, "system.slice/b.service"), c)
        } else {
            ((c, "system.slice/c.service"), b)
        };
        assert_eq!(r.labels[&won.0], won.1);
        assert_eq!(r.labels[&lost], OTHER);
        assert_eq!(l.held(), 2);
        assert!(r.gone.is_empty() && r.released.is_empty());

        // a goes: its label and both its ids leave, each once, with the label it counted
        // under (the kernel's map still holds their counters at this scrape); the group that
        // found no room keeps counting as other.
        t.remove("system.slice/a.service");
        let r = l.resolve(&[0, a, a_sub, b, c, user].into());
        assert_eq!(r.released, vec!["system.slice/a.service".to_string()]);
        let mut gone = r.gone.clone();
        gone.sort();
        let mut want = vec![
            (a, "system.slice/a.service".to_string()),
            (a_sub, "system.slice/a.service".to_string()),
        ];
        want.sort();
        assert_eq!(gone, want);
        assert!(!r.labels.contains_key(&a));
        assert_eq!(r.labels[&lost], OTHER);
        assert_eq!(l.held(), 1);
        // A new cgroup takes the free place.
        let d = t.make("system.slice/d.service");
        let r = l.resolve(&[b, c, d].into());
        assert_eq!(r.labels[&d], "system.slice/d.service");
        assert_eq!(l.held(), 2);
    }

    #[test]
    fn an_id_gone_before_it_was_seen_counts_as_other_once() {
        let t = Tree::new("early");
        let a = t.make("system.slice/a.service");
        t.remove("system.slice/a.service");
        let mut l = Labeller::new(t.0.clone(), patterns(&["system.slice/*.service"]), 4);
        let r = l.resolve(&[a].into());
        assert!(!r.labels.contains_key(&a));
        assert_eq!(r.gone, vec![(a, OTHER.to_string())]);
        assert_eq!(l.held(), 0);
    }
}
