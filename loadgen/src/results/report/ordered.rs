//! JSON whose object keys stay in the order they were added, so reports list their keys in
//! fio's order (and percentiles in ascending order) rather than sorted as strings.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

pub enum J {
    Null,
    Bool(bool),
    U(u64),
    I(i64),
    F(f64),
    S(String),
    A(Vec<J>),
    O(Obj),
    /// Anything serde can write (loadgen's own structures).
    V(serde_json::Value),
}

#[derive(Default)]
pub struct Obj(Vec<(String, J)>);

impl Obj {
    pub fn new() -> Obj {
        Obj(Vec::new())
    }
    /// Adds a key (builder style).
    pub fn with(mut self, k: impl Into<String>, v: impl Into<J>) -> Obj {
        self.0.push((k.into(), v.into()));
        self
    }
    pub fn put(&mut self, k: impl Into<String>, v: impl Into<J>) {
        self.0.push((k.into(), v.into()));
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<u64> for J {
    fn from(v: u64) -> J {
        J::U(v)
    }
}
impl From<u32> for J {
    fn from(v: u32) -> J {
        J::U(v as u64)
    }
}
impl From<usize> for J {
    fn from(v: usize) -> J {
        J::U(v as u64)
    }
}
impl From<i64> for J {
    fn from(v: i64) -> J {
        J::I(v)
    }
}
impl From<f64> for J {
    fn from(v: f64) -> J {
        J::F(v)
    }
}
impl From<bool> for J {
    fn from(v: bool) -> J {
        J::Bool(v)
    }
}
impl From<&str> for J {
    fn from(v: &str) -> J {
        J::S(v.to_string())
    }
}
impl From<String> for J {
    fn from(v: String) -> J {
        J::S(v)
    }
}
impl From<Obj> for J {
    fn from(v: Obj) -> J {
        J::O(v)
    }
}
impl From<Vec<J>> for J {
    fn from(v: Vec<J>) -> J {
        J::A(v)
    }
}
impl From<serde_json::Value> for J {
    fn from(v: serde_json::Value) -> J {
        J::V(v)
    }
}

impl Serialize for J {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            J::Null => s.serialize_unit(),
            J::Bool(b) => s.serialize_bool(*b),
            J::U(v) => s.serialize_u64(*v),
            J::I(v) => s.serialize_i64(*v),
            // JSON has no NaN or infinity; fio never writes them either.
            J::F(v) if !v.is_finite() => s.serialize_f64(0.0),
            J::F(v) => s.serialize_f64(*v),
            J::S(v) => s.serialize_str(v),
            J::A(v) => {
                let mut seq = s.serialize_seq(Some(v.len()))?;
                for x in v {
                    seq.serialize_element(x)?;
                }
                seq.end()
            }
            J::O(o) => o.serialize(s),
            J::V(v) => v.serialize(s),
        }
    }
}

impl Serialize for Obj {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_their_order_and_floats_stay_floats() {
        let o = Obj::new()
            .with("z", 1u64)
            .with("a", 0.0)
            .with("m", vec![J::from("x"), J::Null])
            .with("n", f64::NAN);
        assert_eq!(
            serde_json::to_string(&o).unwrap(),
            r#"{"z":1,"a":0.0,"m":["x",null],"n":0.0}"#
        );
    }
}
