//! Data verification. With `--verify` every written block starts with a header (magic,
//! offset, generation, length, crc32c of the whole block) and the rest is a pattern derived
//! from offset and generation. A read checks the header: a block from somewhere else, an old
//! generation (a lost write), or any flipped byte is reported with its offset.

pub use record::stats::Corruption;

pub const HEADER_LEN: usize = 32;
const MAGIC: u64 = u64::from_le_bytes(*b"stornetV");
/// Byte offset of the crc32c field in the header.
const CRC_AT: usize = 28;

/// Generations carry a per-run id in their top 32 bits, so blocks from an earlier run never
/// pass for this run's.
pub fn generation(run_id: u32, counter: u32) -> u64 {
    ((run_id as u64) << 32) | counter as u64
}

fn crc_of(block: &[u8]) -> u32 {
    let c = crc32c::crc32c(&block[..CRC_AT]);
    let c = crc32c::crc32c_append(c, &[0; 4]);
    crc32c::crc32c_append(c, &block[HEADER_LEN..])
}

/// Fills `block` (its length is the block size) for `offset` and `generation`: after the
/// header, fio's `verify_pattern` when given (laid from the start of the block, as fio's),
/// else data derived from both.
pub fn fill(block: &mut [u8], offset: u64, generation: u64, pattern: Option<&[u8]>) {
    if let Some(p) = pattern {
        for (i, b) in block.iter_mut().enumerate().skip(HEADER_LEN) {
            *b = p[i % p.len()];
        }
    } else {
        let mut s = offset ^ generation.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15;
        for chunk in block[HEADER_LEN..].chunks_exact_mut(8) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            chunk.copy_from_slice(&s.to_le_bytes());
        }
    }
    block[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    block[8..16].copy_from_slice(&offset.to_le_bytes());
    block[16..24].copy_from_slice(&generation.to_le_bytes());
    let len = block.len() as u32;
    block[24..28].copy_from_slice(&len.to_le_bytes());
    let crc = crc_of(block);
    block[CRC_AT..HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// The generation in a block's header, when it has one of loadgen's headers.
pub fn stored_generation(block: &[u8]) -> Option<u64> {
    (block.len() >= HEADER_LEN && u64_at(block, 0) == MAGIC).then(|| u64_at(block, 16))
}

/// Checks a block read at `offset`. `expected` is the generation this run last wrote
/// there, when it wrote it; None checks only that the block is whole and in its place.
/// With a pattern, its bytes are checked first, so a damaged one is named as fio names it.
pub fn check(
    block: &[u8],
    offset: u64,
    expected: Option<u64>,
    pattern: Option<&[u8]>,
) -> Result<(), String> {
    if block.len() < HEADER_LEN || u64_at(block, 0) != MAGIC {
        return Err(
            "no loadgen verify header (never written with --verify, or overwritten)".into(),
        );
    }
    let len = u32_at(block, 24);
    if len as usize != block.len() {
        return Err(format!(
            "header says the block is {len} bytes, read {} (verify with the --bs it was written with)",
            block.len()
        ));
    }
    if let Some(p) = pattern
        && let Some(i) = (HEADER_LEN..block.len()).find(|&i| block[i] != p[i % p.len()])
    {
        let (got, want) = (block[i], p[i % p.len()]);
        return Err(format!(
            "pattern: got {got:#04x}, wanted {want:#04x} at byte {i} of the block (file offset {}), {} bad bits",
            offset + i as u64,
            (got ^ want).count_ones()
        ));
    }
    let stored = u32_at(block, CRC_AT);
    let computed = crc_of(block);
    if stored != computed {
        return Err(format!(
            "crc32c mismatch: stored {stored:#010x}, computed {computed:#010x}"
        ));
    }
    let at = u64_at(block, 8);
    if at != offset {
        return Err(format!(
            "block belongs at offset {at} ({at:#x}): misplaced write"
        ));
    }
    if let Some(want) = expected {
        let got = u64_at(block, 16);
        if got != want {
            return Err(format!(
                "stale block: generation {got:#x}, last written {want:#x} (lost write)"
            ));
        }
    }
    Ok(())
}

/// As [`fill`], a header every `interval` bytes of the block (fio's `verify_interval`;
/// 0: one for the whole block), each piece for its own offset.
pub fn fill_pieces(
    block: &mut [u8],
    offset: u64,
    generation: u64,
    pattern: Option<&[u8]>,
    interval: u64,
) {
    let n = piece_len(block.len(), interval);
    for (i, piece) in block.chunks_mut(n).enumerate() {
        fill(piece, offset + (i * n) as u64, generation, pattern);
    }
}

/// As [`check`], each `interval` bytes of the block on its own; the first bad piece is
/// reported with its offset.
pub fn check_pieces(
    block: &[u8],
    offset: u64,
    expected: Option<u64>,
    pattern: Option<&[u8]>,
    interval: u64,
) -> Result<(), String> {
    let n = piece_len(block.len(), interval);
    if n == block.len() {
        return check(block, offset, expected, pattern);
    }
    for (i, piece) in block.chunks(n).enumerate() {
        let at = offset + (i * n) as u64;
        check(piece, at, expected, pattern)
            .map_err(|e| format!("at {at} (verify_interval={n}): {e}"))?;
    }
    Ok(())
}

fn piece_len(block: usize, interval: u64) -> usize {
    match interval as usize {
        0 => block,
        n if n >= block || !block.is_multiple_of(n) => block,
        n => n,
    }
}

/// Per block of a job's region: the generation counter of the last completed write (0 =
/// not written in this run), and whether an IO on it is in flight. With --verify a block
/// never has two IOs in flight, so what a read returns is always defined.
pub struct BlockMap {
    gens: Vec<u32>,
    busy: Vec<bool>,
}

impl BlockMap {
    pub fn new(blocks: u64) -> BlockMap {
        BlockMap {
            gens: vec![0; blocks as usize],
            busy: vec![false; blocks as usize],
        }
    }
    pub fn busy(&self, block: u64) -> bool {
        self.busy[block as usize]
    }
    pub fn begin(&mut self, block: u64) {
        self.busy[block as usize] = true;
    }
    /// The IO on `block` completed; `written` is the counter of a write that succeeded.
    pub fn end(&mut self, block: u64, written: Option<u32>) {
        self.busy[block as usize] = false;
        if let Some(c) = written {
            self.gens[block as usize] = c;
        }
    }
    pub fn written(&self, block: u64) -> Option<u32> {
        let g = self.gens[block as usize];
        (g != 0).then_some(g)
    }
    pub fn written_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.gens
            .iter()
            .enumerate()
            .filter(|&(_, &g)| g != 0)
            .map(|(i, _)| i as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fio's `verify_interval`: a header per piece, each piece checked for its own offset;
    /// a damaged byte is named with its piece.
    #[test]
    fn pieces_of_a_block_carry_headers_of_their_own() {
        let mut b = vec![0u8; 4096];
        fill_pieces(&mut b, 8192, generation(7, 1), Some(&[0xaa, 0x55]), 512);
        for i in 0..8 {
            let piece = &b[i * 512..(i + 1) * 512];
            assert_eq!(check(piece, 8192 + i as u64 * 512, None, None), Ok(()));
        }
        assert_eq!(
            check_pieces(&b, 8192, Some(generation(7, 1)), None, 512),
            Ok(())
        );
        assert!(
            check(&b, 8192, None, None).is_err(),
            "not one header for the block"
        );
        b[3 * 512 + 100] ^= 1;
        let e = check_pieces(&b, 8192, None, None, 512).unwrap_err();
        assert!(e.starts_with("at 9728 (verify_interval=512): "), "{e}");
        // Without an interval (0), or one that does not divide the block, one header.
        let mut w = vec![0u8; 4096];
        fill_pieces(&mut w, 0, 1, None, 0);
        assert_eq!(check(&w, 0, Some(1), None), Ok(()));
        assert_eq!(check_pieces(&w, 0, Some(1), None, 0), Ok(()));
    }

    #[test]
    fn good_blocks_pass_and_every_kind_of_damage_is_named() {
        let mut b = vec![0u8; 4096];
        let g = generation(7, 3);
        fill(&mut b, 8192, g, None);
        assert_eq!(check(&b, 8192, Some(g), None), Ok(()));
        assert_eq!(check(&b, 8192, None, None), Ok(()));

        let mut flipped = b.clone();
        flipped[2000] ^= 1;
        assert!(
            check(&flipped, 8192, None, None)
                .unwrap_err()
                .contains("crc32c mismatch")
        );

        assert!(
            check(&b, 4096, None, None)
                .unwrap_err()
                .contains("misplaced")
        );
        assert!(
            check(&b, 8192, Some(generation(7, 4)), None)
                .unwrap_err()
                .contains("stale")
        );
        assert!(
            check(&[0u8; 4096], 0, None, None)
                .unwrap_err()
                .contains("no loadgen verify header")
        );
        assert!(
            check(&b[..2048], 8192, None, None)
                .unwrap_err()
                .contains("2048")
        );
    }

    #[test]
    fn a_pattern_fills_the_block_and_a_damaged_byte_is_named() {
        let p = [0xaa, 0x55, 0x5a, 0xa5];
        let mut b = vec![0u8; 4096];
        fill(&mut b, 4096, 9, Some(&p));
        assert_eq!(
            &b[32..40],
            &[0xaa, 0x55, 0x5a, 0xa5, 0xaa, 0x55, 0x5a, 0xa5]
        );
        assert_eq!(b[4095], 0xa5);
        assert_eq!(check(&b, 4096, Some(9), Some(&p)), Ok(()));
        b[100] ^= 0x10;
        assert_eq!(
            check(&b, 4096, Some(9), Some(&p)).unwrap_err(),
            "pattern: got 0xba, wanted 0xaa at byte 100 of the block (file offset 4196), 1 bad bits"
        );
        // Without the pattern the same damage is a crc32c mismatch.
        assert!(
            check(&b, 4096, Some(9), None)
                .unwrap_err()
                .contains("crc32c")
        );
    }

    #[test]
    fn block_map_tracks_generations() {
        let mut m = BlockMap::new(4);
        assert_eq!(m.written(1), None);
        m.begin(1);
        assert!(m.busy(1));
        m.end(1, Some(5));
        assert!(!m.busy(1));
        assert_eq!(m.written(1), Some(5));
        assert_eq!(m.written_blocks().collect::<Vec<_>>(), vec![1]);
    }
}
