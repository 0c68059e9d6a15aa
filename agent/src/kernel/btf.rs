//! A small reader of the kernel's BTF (`/sys/kernel/btf/vmlinux`): struct member offsets and
//! enum values, so that probes never depend on a layout seen on one kernel.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use anyhow::{Context, Result, bail};

pub const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

const MAGIC: u16 = 0xeb9f;

// BTF kinds (include/uapi/linux/btf.h).
const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FWD: u32 = 7;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_FLOAT: u32 = 16;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// A member of a struct or union.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub type_id: u32,
    /// Offset from the start of the outermost struct, in bits.
    pub bit_offset: u32,
    /// Bitfield width, 0 for a whole field.
    pub bitfield_size: u32,
}

#[derive(Clone, Debug)]
enum Type {
    Composite {
        size: u32,
        members: Vec<Member>,
    },
    Enum {
        size: u32,
        values: Vec<(String, i64)>,
    },
    /// Int, float and others with a size and no structure stornet reads.
    Sized {
        size: u32,
    },
    Ptr {
        target: u32,
    },
    FuncProto {
        params: Vec<u32>,
    },
    /// Typedef, const, volatile, restrict, type tag: refers to another type.
    Alias {
        target: u32,
    },
    Array {
        elem: u32,
        len: u32,
    },
    Other,
}

/// The type of a tracepoint argument, as far as stornet tells arguments apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgType {
    /// A pointer to the named struct, union or enum (`void` for `void *`).
    Ptr(String),
    Enum(String),
    /// An integer (or another scalar) of this many bytes.
    Int {
        size: u32,
    },
    Other,
}

/// Parsed BTF: types by id and the names of structs, unions, enums and typedefs.
#[derive(Debug)]
pub struct Btf {
    types: Vec<Type>,
    by_name: HashMap<String, Vec<u32>>,
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn u32(&mut self) -> Result<u32> {
        let b = self
            .data
            .get(self.pos..self.pos + 4)
            .context("BTF type section is truncated")?;
        self.pos += 4;
        Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }
    fn skip(&mut self, n: usize) -> Result<()> {
        if self.pos + n > self.data.len() {
            bail!("BTF type section is truncated");
        }
        self.pos += n;
        Ok(())
    }
}

fn le_u32(data: &[u8], at: usize) -> Result<u32> {
    let b = data.get(at..at + 4).context("BTF header is truncated")?;
    Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
}

/// The type and string sections of a BTF blob, as its header places them.
fn sections(data: &[u8]) -> Result<(&[u8], &[u8])> {
    if data.len() < 24 {
        bail!(
            "BTF blob of {} bytes is shorter than its header",
            data.len()
        );
    }
    let magic = u16::from_le_bytes([data[0], data[1]]);
    if magic != MAGIC {
        bail!("not little-endian BTF (magic {magic:#06x})");
    }
    let hdr_len = le_u32(data, 4)? as usize;
    let type_off = le_u32(data, 8)? as usize;
    let type_len = le_u32(data, 12)? as usize;
    let str_off = le_u32(data, 16)? as usize;
    let str_len = le_u32(data, 20)? as usize;
    let section = |off: usize, len: usize| {
        data.get(hdr_len + off..hdr_len + off + len)
            .context("BTF section lies outside the blob")
    };
    Ok((section(type_off, type_len)?, section(str_off, str_len)?))
}

/// The name at `off` of the string section.
fn name_at(strings: &[u8], off: u32) -> Result<String> {
    let rest = strings
        .get(off as usize..)
        .context("BTF name offset outside the string section")?;
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// One type record: its name offset, its kind and what this reader keeps of it.
fn read_type(r: &mut Reader, strings: &[u8]) -> Result<(u32, u32, Type)> {
    let name_off = r.u32()?;
    let info = r.u32()?;
    let size_or_type = r.u32()?;
    let vlen = (info & 0xffff) as usize;
    let kind = (info >> 24) & 0x1f;
    let kind_flag = info >> 31 == 1;
    let ty = match kind {
        KIND_INT => {
            r.skip(4)?;
            Type::Sized { size: size_or_type }
        }
        KIND_FLOAT => Type::Sized { size: size_or_type },
        KIND_PTR => Type::Ptr {
            target: size_or_type,
        },
        KIND_ARRAY => {
            let elem = r.u32()?;
            let _index = r.u32()?;
            let len = r.u32()?;
            Type::Array { elem, len }
        }
        KIND_STRUCT | KIND_UNION => Type::Composite {
            size: size_or_type,
            members: read_members(r, strings, vlen, kind_flag)?,
        },
        KIND_ENUM | KIND_ENUM64 => Type::Enum {
            size: size_or_type,
            values: read_enum(r, strings, vlen, kind == KIND_ENUM64, kind_flag)?,
        },
        KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => Type::Alias {
            target: size_or_type,
        },
        KIND_FUNC_PROTO => {
            let mut params = Vec::with_capacity(vlen);
            for _ in 0..vlen {
                let _name = r.u32()?;
                params.push(r.u32()?);
            }
            Type::FuncProto { params }
        }
        KIND_VAR | KIND_DECL_TAG => {
            r.skip(4)?;
            Type::Other
        }
        KIND_DATASEC => {
            r.skip(12 * vlen)?;
            Type::Other
        }
        KIND_FWD | KIND_FUNC => Type::Other,
        other => bail!("unknown BTF kind {other}"),
    };
    Ok((name_off, kind, ty))
}

/// The `vlen` members of a struct or union; with `kind_flag`, each offset holds a bitfield's
/// size in its top byte.
fn read_members(
    r: &mut Reader,
    strings: &[u8],
    vlen: usize,
    kind_flag: bool,
) -> Result<Vec<Member>> {
    let mut members = Vec::with_capacity(vlen);
    for _ in 0..vlen {
        let m_name = r.u32()?;
        let type_id = r.u32()?;
        let offset = r.u32()?;
        let (bit_offset, bitfield_size) = if kind_flag {
            (offset & 0xff_ffff, offset >> 24)
        } else {
            (offset, 0)
        };
        members.push(Member {
            name: name_at(strings, m_name)?,
            type_id,
            bit_offset,
            bitfield_size,
        });
    }
    Ok(members)
}

/// The `vlen` values of an enum (32-bit, signed with `kind_flag`) or an enum64.
fn read_enum(
    r: &mut Reader,
    strings: &[u8],
    vlen: usize,
    wide: bool,
    kind_flag: bool,
) -> Result<Vec<(String, i64)>> {
    let mut values = Vec::with_capacity(vlen);
    for _ in 0..vlen {
        let v_name = r.u32()?;
        let v = if wide {
            let lo = r.u32()? as u64;
            let hi = r.u32()? as u64;
            ((hi << 32) | lo) as i64
        } else {
            let raw = r.u32()?;
            // kind_flag set means signed values.
            if kind_flag {
                raw as i32 as i64
            } else {
                raw as i64
            }
        };
        values.push((name_at(strings, v_name)?, v));
    }
    Ok(values)
}

/// The running kernel's BTF, read once at start: parsed by this module (layouts, drop
/// reasons) and by aya (to load `tp_btf` programs) from one read of the file. aya's parse
/// waits until a program needs it, after the eBPF object is loaded: the loader parses the
/// kernel's BTF once more of its own, and three parses at once (9 MiB each) were most of
/// the agent's peak memory.
pub struct KernelBtf {
    pub btf: Result<Btf>,
    /// The file, until aya parses it.
    data: Mutex<Option<Vec<u8>>>,
    aya: OnceLock<Option<aya::Btf>>,
}

impl KernelBtf {
    pub fn read() -> KernelBtf {
        match std::fs::read(KERNEL_BTF) {
            Ok(data) => KernelBtf {
                btf: Btf::parse(&data).with_context(|| format!("cannot parse {KERNEL_BTF}")),
                data: Mutex::new(Some(data)),
                aya: OnceLock::new(),
            },
            Err(e) => KernelBtf {
                btf: Err(anyhow::Error::new(e))
                    .with_context(|| format!("cannot read kernel BTF at {KERNEL_BTF}")),
                data: Mutex::new(None),
                aya: OnceLock::new(),
            },
        }
    }

    /// The BTF as aya parses it (None if it could not be read or parsed); the file's bytes
    /// are freed once parsed.
    pub fn aya(&self) -> Option<&aya::Btf> {
        self.aya
            .get_or_init(|| {
                let data = self.data.lock().unwrap_or_else(|e| e.into_inner()).take()?;
                aya::Btf::parse(&data, aya::Endianness::default()).ok()
            })
            .as_ref()
    }
}

impl Btf {
    /// Parses a little-endian BTF blob (as in `/sys/kernel/btf/vmlinux`).
    pub fn parse(data: &[u8]) -> Result<Btf> {
        let (type_data, strings) = sections(data)?;
        // Type id 0 is void.
        let mut types = vec![Type::Other];
        let mut by_name: HashMap<String, Vec<u32>> = HashMap::new();
        let mut r = Reader {
            data: type_data,
            pos: 0,
        };
        while r.pos < type_data.len() {
            let (name_off, kind, ty) = read_type(&mut r, strings)?;
            let named =
                matches!(ty, Type::Composite { .. } | Type::Enum { .. }) || kind == KIND_TYPEDEF;
            if named && name_off != 0 {
                by_name
                    .entry(name_at(strings, name_off)?)
                    .or_default()
                    .push(types.len() as u32);
            }
            types.push(ty);
        }
        Ok(Btf { types, by_name })
    }

    fn get(&self, id: u32) -> Result<&Type> {
        self.types
            .get(id as usize)
            .with_context(|| format!("BTF type id {id} does not exist"))
    }

    /// Follows typedefs and qualifiers to the underlying type.
    fn resolve(&self, mut id: u32) -> Result<u32> {
        for _ in 0..32 {
            match self.get(id)? {
                Type::Alias { target } => id = *target,
                _ => return Ok(id),
            }
        }
        bail!("BTF type {id}: alias chain too long")
    }

    /// Size in bytes of a type.
    pub fn type_size(&self, id: u32) -> Result<u32> {
        Ok(match self.get(self.resolve(id)?)? {
            Type::Composite { size, .. } | Type::Enum { size, .. } | Type::Sized { size } => *size,
            Type::Ptr { .. } => 8,
            Type::Array { elem, len } => self.type_size(*elem)? * len,
            Type::Alias { .. } | Type::FuncProto { .. } | Type::Other => {
                bail!("BTF type {id} has no size")
            }
        })
    }

    fn composite(&self, name: &str) -> Result<&[Member]> {
        self.by_name
            .get(name)
            .into_iter()
            .flatten()
            .find_map(|&id| match &self.types[id as usize] {
                Type::Composite { members, .. } if !members.is_empty() => Some(members.as_slice()),
                _ => None,
            })
            .with_context(|| format!("kernel BTF has no struct {name}"))
    }

    /// Finds `member` in struct `name`, looking into anonymous structs and unions.
    pub fn member(&self, name: &str, member: &str) -> Result<Member> {
        let members = self.composite(name)?;
        self.find_member(members, member, 0)?
            .with_context(|| format!("kernel BTF: struct {name} has no member {member}"))
    }

    fn find_member(&self, members: &[Member], wanted: &str, base: u32) -> Result<Option<Member>> {
        for m in members {
            if m.name == wanted {
                return Ok(Some(Member {
                    bit_offset: base + m.bit_offset,
                    ..m.clone()
                }));
            }
            if m.name.is_empty()
                && let Type::Composite { members: inner, .. } =
                    self.get(self.resolve(m.type_id)?)?
                && let Some(found) = self.find_member(inner, wanted, base + m.bit_offset)?
            {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// Byte offset of `member` inside the type of `outer.field` (an anonymous struct such as
    /// `possible_net_t`), from the start of `outer`.
    pub fn offset_of_nested(&self, outer: &str, field: &str, member: &str) -> Result<u32> {
        let f = self.member(outer, field)?;
        let Type::Composite { members, .. } = self.get(self.resolve(f.type_id)?)? else {
            bail!("kernel BTF: {outer}.{field} is not a struct");
        };
        let m = self
            .find_member(members, member, f.bit_offset)?
            .with_context(|| format!("kernel BTF: {outer}.{field} has no member {member}"))?;
        if m.bitfield_size != 0 || m.bit_offset % 8 != 0 {
            bail!("kernel BTF: {outer}.{field}.{member} is a bitfield");
        }
        Ok(m.bit_offset / 8)
    }

    /// Byte offset of a whole (non-bitfield, byte-aligned) member of struct `name`.
    pub fn offset_of(&self, name: &str, member: &str) -> Result<u32> {
        let m = self.member(name, member)?;
        if m.bitfield_size != 0 || m.bit_offset % 8 != 0 {
            bail!("kernel BTF: {name}.{member} is a bitfield");
        }
        Ok(m.bit_offset / 8)
    }

    /// Byte offset of a member, checking that it has the size the probe reads.
    pub fn offset_of_sized(&self, name: &str, member: &str, size: u32) -> Result<u32> {
        let off = self.offset_of(name, member)?;
        let actual = self.type_size(self.member(name, member)?.type_id)?;
        if actual != size {
            bail!("kernel BTF: {name}.{member} is {actual} bytes, expected {size}");
        }
        Ok(off)
    }

    /// All values of enum `name`, in declaration order.
    pub fn enum_values(&self, name: &str) -> Result<&[(String, i64)]> {
        self.by_name
            .get(name)
            .into_iter()
            .flatten()
            .find_map(|&id| match &self.types[id as usize] {
                Type::Enum { values, .. } if !values.is_empty() => Some(values.as_slice()),
                _ => None,
            })
            .with_context(|| format!("kernel BTF has no enum {name}"))
    }

    /// The arguments a `tp_btf` program of tracepoint `event` receives, from the kernel's
    /// `btf_trace_<event>` typedef (whose first parameter, the tracepoint's data, is left
    /// out). BTF keeps no names for these parameters: callers find arguments by type.
    pub fn tracepoint_args(&self, event: &str) -> Result<Vec<ArgType>> {
        let typedef = format!("btf_trace_{event}");
        let id = self
            .by_name
            .get(&typedef)
            .and_then(|ids| ids.first())
            .with_context(|| format!("kernel BTF has no tracepoint {event} ({typedef})"))?;
        let params = match self.get(self.resolve(*id)?)? {
            Type::Ptr { target } => match self.get(self.resolve(*target)?)? {
                Type::FuncProto { params } => params,
                _ => bail!("kernel BTF: {typedef} is not a function pointer"),
            },
            _ => bail!("kernel BTF: {typedef} is not a function pointer"),
        };
        params.iter().skip(1).map(|&p| self.arg_type(p)).collect()
    }

    fn arg_type(&self, id: u32) -> Result<ArgType> {
        let id = self.resolve(id)?;
        Ok(match self.get(id)? {
            Type::Ptr { target } => {
                let target = self.resolve(*target)?;
                ArgType::Ptr(if target == 0 {
                    "void".into()
                } else {
                    self.name_of(target).unwrap_or_default().into()
                })
            }
            Type::Enum { .. } => ArgType::Enum(self.name_of(id).unwrap_or_default().into()),
            Type::Sized { size } => ArgType::Int { size: *size },
            _ => ArgType::Other,
        })
    }

    /// The name of a struct, union or enum (a slow reverse lookup, for a few calls).
    fn name_of(&self, id: u32) -> Option<&str> {
        self.by_name
            .iter()
            .find(|(_, ids)| ids.contains(&id))
            .map(|(n, _)| n.as_str())
    }

    /// The value of an enumerator in any enum, named or anonymous (many kernel flag bits
    /// are enumerators of anonymous enums, e.g. `QUEUE_FLAG_STATS`).
    pub fn enumerator(&self, variant: &str) -> Result<i64> {
        self.types
            .iter()
            .find_map(|t| match t {
                Type::Enum { values, .. } => {
                    values.iter().find(|(n, _)| n == variant).map(|(_, v)| *v)
                }
                _ => None,
            })
            .with_context(|| format!("kernel BTF has no enumerator {variant}"))
    }

    /// The value of one enumerator.
    pub fn enum_value(&self, name: &str, variant: &str) -> Result<i64> {
        self.enum_values(name)?
            .iter()
            .find(|(n, _)| n == variant)
            .map(|(_, v)| *v)
            .with_context(|| format!("kernel BTF: enum {name} has no value {variant}"))
    }
}

/// Builds BTF blobs for tests of code that reads BTF.
#[cfg(test)]
pub mod testing {
    use super::*;

    #[derive(Default)]
    pub struct Builder {
        types: Vec<u8>,
        strings: Vec<u8>,
        next_id: u32,
    }

    impl Builder {
        pub fn new() -> Builder {
            Builder {
                types: Vec::new(),
                strings: vec![0],
                next_id: 1,
            }
        }
        fn str(&mut self, s: &str) -> u32 {
            if s.is_empty() {
                return 0;
            }
            let off = self.strings.len() as u32;
            self.strings.extend_from_slice(s.as_bytes());
            self.strings.push(0);
            off
        }
        fn head(&mut self, name: &str, kind: u32, flag: bool, vlen: usize, size_or_type: u32) {
            let n = self.str(name);
            let info = (kind << 24) | (vlen as u32) | if flag { 1 << 31 } else { 0 };
            for w in [n, info, size_or_type] {
                self.types.extend_from_slice(&w.to_le_bytes());
            }
        }
        fn word(&mut self, w: u32) {
            self.types.extend_from_slice(&w.to_le_bytes());
        }
        fn id(&mut self) -> u32 {
            self.next_id += 1;
            self.next_id - 1
        }
        pub fn int(&mut self, name: &str, size: u32) -> u32 {
            self.head(name, KIND_INT, false, 0, size);
            self.word(size * 8);
            self.id()
        }
        pub fn ptr(&mut self, target: u32) -> u32 {
            self.head("", KIND_PTR, false, 0, target);
            self.id()
        }
        pub fn typedef(&mut self, name: &str, target: u32) -> u32 {
            self.head(name, KIND_TYPEDEF, false, 0, target);
            self.id()
        }
        /// `elem[len]` (the index type is not read).
        pub fn array(&mut self, elem: u32, len: u32) -> u32 {
            self.head("", KIND_ARRAY, false, 0, 0);
            for w in [elem, elem, len] {
                self.word(w);
            }
            self.id()
        }
        /// Members as (name, type id, bit offset).
        pub fn composite(
            &mut self,
            union: bool,
            name: &str,
            size: u32,
            m: &[(&str, u32, u32)],
        ) -> u32 {
            let kind = if union { KIND_UNION } else { KIND_STRUCT };
            self.head(name, kind, false, m.len(), size);
            for (n, t, off) in m {
                let n = self.str(n);
                self.word(n);
                self.word(*t);
                self.word(*off);
            }
            self.id()
        }
        pub fn enumeration(&mut self, name: &str, values: &[(&str, i32)]) -> u32 {
            self.head(name, KIND_ENUM, true, values.len(), 4);
            for (n, v) in values {
                let n = self.str(n);
                self.word(n);
                self.word(*v as u32);
            }
            self.id()
        }
        pub fn enum64(&mut self, name: &str, values: &[(&str, u64)]) -> u32 {
            self.head(name, KIND_ENUM64, false, values.len(), 8);
            for (n, v) in values {
                let n = self.str(n);
                self.word(n);
                self.word(*v as u32);
                self.word((*v >> 32) as u32);
            }
            self.id()
        }
        pub fn func_proto(&mut self, params: &[u32]) -> u32 {
            self.head("", KIND_FUNC_PROTO, false, params.len(), 0);
            for p in params {
                self.word(0);
                self.word(*p);
            }
            self.id()
        }
        pub fn build(&self) -> Vec<u8> {
            let mut out = Vec::new();
            out.extend_from_slice(&MAGIC.to_le_bytes());
            out.extend_from_slice(&[1, 0]);
            for w in [
                24u32,
                0,
                self.types.len() as u32,
                self.types.len() as u32,
                self.strings.len() as u32,
            ] {
                out.extend_from_slice(&w.to_le_bytes());
            }
            out.extend_from_slice(&self.types);
            out.extend_from_slice(&self.strings);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Builder;
    use super::*;

    fn sample() -> Vec<u8> {
        let mut b = Builder::new();
        let u32_t = b.int("unsigned int", 4);
        let u64_t = b.int("long long unsigned int", 8);
        let opf = b.typedef("blk_opf_t", u32_t);
        b.func_proto(&[u32_t, u64_t]);
        let inner = b.composite(
            false,
            "",
            16,
            &[("start_time_ns", u64_t, 0), ("io_start_time_ns", u64_t, 64)],
        );
        let anon_union = b.composite(true, "", 16, &[("", inner, 0), ("other", u64_t, 0)]);
        let rq = b.composite(
            false,
            "request",
            40,
            &[
                ("q", u64_t, 0),
                ("cmd_flags", opf, 64),
                ("", anon_union, 128),
            ],
        );
        b.ptr(rq);
        b.enumeration(
            "skb_drop_reason",
            &[
                ("SKB_NOT_DROPPED_YET", 0),
                ("SKB_DROP_REASON_NOT_SPECIFIED", 2),
            ],
        );
        b.enum64("big", &[("HUGE", 1 << 40)]);
        b.enumeration("", &[("QUEUE_FLAG_DYING", 0), ("QUEUE_FLAG_STATS", 7)]);
        b.build()
    }

    #[test]
    fn member_offsets_through_typedefs_and_anonymous_members() {
        let btf = Btf::parse(&sample()).unwrap();
        assert_eq!(btf.offset_of("request", "q").unwrap(), 0);
        assert_eq!(btf.offset_of_sized("request", "cmd_flags", 4).unwrap(), 8);
        assert_eq!(btf.offset_of("request", "start_time_ns").unwrap(), 16);
        assert_eq!(btf.offset_of("request", "io_start_time_ns").unwrap(), 24);
        let err = btf.offset_of_sized("request", "cmd_flags", 8).unwrap_err();
        assert!(err.to_string().contains("is 4 bytes"), "{err}");
        assert!(btf.offset_of("request", "nope").is_err());
        assert!(btf.offset_of("gendisk", "part0").is_err());
    }

    #[test]
    fn enums_and_enum64() {
        let btf = Btf::parse(&sample()).unwrap();
        assert_eq!(
            btf.enum_value("skb_drop_reason", "SKB_DROP_REASON_NOT_SPECIFIED")
                .unwrap(),
            2
        );
        assert_eq!(btf.enum_values("skb_drop_reason").unwrap().len(), 2);
        assert_eq!(btf.enum_value("big", "HUGE").unwrap(), 1 << 40);
        assert!(btf.enum_value("skb_drop_reason", "X").is_err());
        assert_eq!(btf.enumerator("QUEUE_FLAG_STATS").unwrap(), 7);
        assert_eq!(btf.enumerator("HUGE").unwrap(), 1 << 40);
        assert!(btf.enumerator("QUEUE_FLAG_NOPE").is_err());
    }

    #[test]
    fn rejects_bad_blobs() {
        assert!(Btf::parse(&[0; 8]).is_err());
        let mut blob = sample();
        blob[0] = 0;
        assert!(Btf::parse(&blob).unwrap_err().to_string().contains("magic"));
        let blob = sample();
        assert!(Btf::parse(&blob[..blob.len() - 40]).is_err());
    }
}
