//! Reading a record: checked before it is believed (a foreign file, a newer version or a
//! huge name is refused with one line), every earlier version read into this one's layout,
//! and every point's analysis input checked for series that line up.

use std::path::Path;

use serde::Deserialize;

use crate::{FORMAT, MAX_RECORD, MAX_TEXT, Record, VERSION};

/// Reads and checks the record in `path`; every problem is one line naming the file.
pub fn file(path: &Path) -> Result<Record, String> {
    let p = path.display();
    let content =
        crate::files::read_text(path, MAX_RECORD).map_err(|e| format!("cannot read {p}: {e}"))?;
    text(&content).map_err(|e| format!("{p}: {e}"))
}

/// Checks and reads a record's text; the error is one line.
pub fn text(text: &str) -> Result<Record, String> {
    // A name is copied into every series of its host: a huge one would cost the analysis
    // many times its size.
    let longest = longest_string(text);
    if longest > MAX_TEXT {
        return Err(format!(
            "the record holds a text of {longest} bytes; names and texts in a record are at most {MAX_TEXT}"
        ));
    }
    /// The two fields that say what the rest is; everything else is skipped unread.
    #[derive(Deserialize)]
    struct Head {
        format: Option<serde_json::Value>,
        version: Option<serde_json::Value>,
    }
    let head: Head = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    if head.format.as_ref().and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(format!(
            "not a stornet run record (no \"format\": \"{FORMAT}\"; `loadgen run --record FILE` writes one)"
        ));
    }
    match head.version {
        None => return Err("the record has no version".into()),
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 && n <= VERSION as u64 => {}
            Some(n) => {
                return Err(format!(
                    "record version {n}, but this version of stornet reads versions 1 to {VERSION}"
                ));
            }
            None => {
                let shown: String = v.to_string().chars().take(40).collect();
                return Err(format!(
                    "the record's version {shown} is not a whole number (this version of stornet reads versions 1 to {VERSION})"
                ));
            }
        },
    }
    let mut r: Record =
        serde_json::from_str(text).map_err(|e| format!("not a valid run record ({e})"))?;
    // Read into this version's layout (`v1`), it is a record of this version.
    r.version = VERSION;
    for p in &r.points {
        p.run
            .validate()
            .map_err(|e| format!("point {}: {e}", p.index))?;
    }
    Ok(r)
}

/// The length in bytes (as written, escapes included) of the longest JSON string in `text`.
pub(crate) fn longest_string(text: &str) -> usize {
    let (mut longest, mut start, mut escaped) = (0, None, false);
    for (i, b) in text.bytes().enumerate() {
        match (start, b) {
            (None, b'"') => start = Some(i),
            (None, _) => {}
            (Some(_), _) if escaped => escaped = false,
            (Some(_), b'\\') => escaped = true,
            (Some(s), b'"') => {
                longest = longest.max(i - s - 1);
                start = None;
            }
            _ => {}
        }
    }
    match start {
        Some(s) => longest.max(text.len() - s - 1),
        None => longest,
    }
}
