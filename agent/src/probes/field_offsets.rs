//! Writes the running kernel's field offsets into the block probes' marked loads before the
//! object is loaded, as a loader relocates a compiled C program's field accesses: each load
//! the probes emit with a marker in its offset (`agent_common::block::FIELD_MARK` plus the
//! field's word in `BlockLayout`) gets that field's offset.

use agent_common::block::{BlockLayout, FIELD_MARK, LAYOUT_WORDS, OFFSET_NONE};
use anyhow::{Result, anyhow, bail};
use object::read::elf::ElfFile64;
use object::{LittleEndian, Object, ObjectSection, SectionKind};

/// The loader's copy of the object, 8-aligned as the ELF reader wants it.
pub struct Patched {
    words: Vec<u64>,
    len: usize,
    /// Marked loads given an offset.
    pub loads: usize,
}

impl Patched {
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `words` holds at least `len` initialised bytes; u8 has no alignment.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `self` is borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

/// `object` (an ELF eBPF object) with `layout`'s offsets in its marked loads. A load of a field
/// that did not resolve keeps its marker: the verifier refuses it where it can run, as it
/// would refuse the offset itself.
pub fn patch(object: &[u8], layout: &BlockLayout) -> Result<Patched> {
    let mut out = Patched {
        words: vec![0; object.len().div_ceil(8)],
        len: object.len(),
        loads: 0,
    };
    out.bytes_mut().copy_from_slice(object);
    let words = layout.words();
    for (start, end) in code_sections(object)? {
        out.loads += patch_code(&mut out.bytes_mut()[start..end], &words)?;
    }
    Ok(out)
}

const LD_IMM64: u8 = 0x18;
const CLASS_MASK: u8 = 0x07;
const CLASS_LDX: u8 = 0x01;
const MODE_MASK: u8 = 0xe0;
const MODE_MEM: u8 = 0x60;

/// Patches the marked loads of one section of BPF instructions; returns how many.
fn patch_code(code: &mut [u8], words: &[u32; LAYOUT_WORDS]) -> Result<usize> {
    let mut patched = 0;
    let mut at = 0;
    while at + 8 <= code.len() {
        let insn = &mut code[at..at + 8];
        let opcode = insn[0];
        // A 64-bit immediate load takes two slots; the second is not an instruction.
        at += if opcode == LD_IMM64 { 16 } else { 8 };
        if opcode & CLASS_MASK != CLASS_LDX || opcode & MODE_MASK != MODE_MEM {
            continue;
        }
        let off = i16::from_le_bytes([insn[2], insn[3]]);
        let word = off as i32 - FIELD_MARK as i32;
        if !(0..LAYOUT_WORDS as i32).contains(&word) {
            continue;
        }
        let value = words[word as usize];
        if value == OFFSET_NONE {
            continue;
        }
        let Ok(off) = i16::try_from(value) else {
            bail!(
                "block layout word {word} (offset {value}) is beyond what a load instruction can reach"
            );
        };
        insn[2..4].copy_from_slice(&off.to_le_bytes());
        patched += 1;
    }
    Ok(patched)
}

/// Byte ranges of the object's sections of code (executable, with contents).
fn code_sections(elf: &[u8]) -> Result<Vec<(usize, usize)>> {
    let file = ElfFile64::<LittleEndian>::parse(elf)
        .map_err(|e| anyhow!("the eBPF object is not a little-endian 64-bit ELF file: {e}"))?;
    file.sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .filter_map(|s| Some((s.index(), s.file_range()?)))
        .map(|(i, (start, size))| {
            let end = start
                .checked_add(size)
                .filter(|&end| end <= elf.len() as u64);
            let Some(end) = end else {
                bail!("the eBPF object's section {} lies beyond its end", i.0);
            };
            Ok((start as usize, end as usize))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(opcode: u8, regs: u8, off: i16, imm: i32) -> [u8; 8] {
        let mut i = [0u8; 8];
        i[0] = opcode;
        i[1] = regs;
        i[2..4].copy_from_slice(&off.to_le_bytes());
        i[4..].copy_from_slice(&imm.to_le_bytes());
        i
    }

    fn off_of(code: &[u8], slot: usize) -> i16 {
        i16::from_le_bytes([code[slot * 8 + 2], code[slot * 8 + 3]])
    }

    #[test]
    fn marked_loads_get_their_fields_offsets_and_nothing_else_changes() {
        let mut words = [0u32; LAYOUT_WORDS];
        words[0] = 96; // first word: rq_q
        words[2] = 40;
        words[5] = OFFSET_NONE;
        let code: Vec<u8> = [
            insn(0x61, 0x21, FIELD_MARK + 2, 0), // r1 = *(u32 *)(r2 + mark 2)
            insn(0x79, 0x43, FIELD_MARK, 0),     // r3 = *(u64 *)(r4 + mark 0)
            // A 64-bit immediate whose second slot looks like a marked load.
            insn(LD_IMM64, 0x01, 0, 7),
            insn(0x61, 0x21, FIELD_MARK, 0),
            insn(0x61, 0x21, FIELD_MARK + 5, 0), // a field that did not resolve
            insn(0x79, 0xa1, -8, 0),             // a stack load
            insn(0x62, 0x21, FIELD_MARK, 0),     // a store of an immediate, not a load
            insn(0x61, 0x21, FIELD_MARK + LAYOUT_WORDS as i16, 0), // beyond the layout
        ]
        .concat();
        let mut patched = code.clone();
        assert_eq!(patch_code(&mut patched, &words).unwrap(), 2);
        assert_eq!(off_of(&patched, 0), 40);
        assert_eq!(off_of(&patched, 1), 96);
        for slot in 2..8 {
            assert_eq!(
                patched[slot * 8..slot * 8 + 8],
                code[slot * 8..slot * 8 + 8],
                "slot {slot}"
            );
        }
    }

    #[test]
    fn an_offset_a_load_cannot_hold_is_an_error() {
        let mut words = [0u32; LAYOUT_WORDS];
        words[1] = 40_000;
        let mut code = insn(0x61, 0x21, FIELD_MARK + 1, 0).to_vec();
        let err = patch_code(&mut code, &words).unwrap_err().to_string();
        assert!(err.contains("offset 40000"), "{err}");
    }

    #[test]
    fn a_file_that_is_not_an_object_is_an_error() {
        for bytes in [&b""[..], b"\x7fELF", &[0u8; 64]] {
            assert!(patch(bytes, &BlockLayout::default()).is_err());
        }
        let mut bad_table = vec![0u8; 64];
        // A valid identification (64-bit, little-endian, version 1), a table beyond the end.
        bad_table[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
        bad_table[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes());
        bad_table[0x3a] = 64;
        bad_table[0x3c] = 1;
        let err = patch(&bad_table, &BlockLayout::default())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("section header"), "{err}");
    }
}
