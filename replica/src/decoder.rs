//! Incremental decoder for one connection's byte stream: bytes go in as they arrive (copied
//! with [`Decoder::push`], or received straight into [`Decoder::recv_buf`]), typed messages
//! come out. Its one buffer is allocated once, sized for the largest message, and never
//! grows: a peer cannot make a connection hold more than that.
//!
//! Every check that can fail early does: a wrong first byte is reported before the rest of a
//! header arrives, and an oversized length before any of the payload does.

use super::protocol::{
    AckStatus, FRAME_HEADER_LEN, Frame, HELLO_ACK_LEN, HELLO_LEN, Hello, HelloAck, HelloStatus,
    KIND_ACK, KIND_WRITE, MAGIC, MAX_TOKEN_LEN, MAX_VOLUME_LEN, ProtocolError, VERSION, ack_status,
    le16, le32, le64,
};

pub struct Decoder {
    buf: Box<[u8]>,
    /// Unparsed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// Length of the message last returned, dropped on the next call (it borrowed `buf`).
    pending: usize,
    max_payload: u32,
}

impl Decoder {
    /// A decoder for frames with payloads of at most `max_payload` bytes (and for hellos).
    pub fn new(max_payload: u32) -> Decoder {
        let cap = (FRAME_HEADER_LEN + max_payload as usize).max(super::protocol::MAX_HELLO_LEN);
        Decoder {
            buf: vec![0u8; cap].into_boxed_slice(),
            start: 0,
            end: 0,
            pending: 0,
            max_payload,
        }
    }

    /// The bytes this decoder holds, whatever the peer sends.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Bytes received but not yet returned as a message.
    pub fn buffered(&self) -> usize {
        self.end - self.start - self.pending
    }

    fn settle(&mut self) {
        self.start += self.pending;
        self.pending = 0;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Where to receive the next bytes (then call [`Decoder::filled`]). Empty only while
    /// complete messages are still waiting to be taken out.
    pub fn recv_buf(&mut self) -> &mut [u8] {
        self.settle();
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    /// Records that `n` bytes were received into [`Decoder::recv_buf`].
    pub fn filled(&mut self, n: usize) {
        assert!(self.end + n <= self.buf.len(), "filled past recv_buf");
        self.end += n;
    }

    /// Copies in as much of `bytes` as fits; returns how much that was.
    #[cfg(test)]
    pub fn push(&mut self, bytes: &[u8]) -> usize {
        let room = self.recv_buf();
        let n = room.len().min(bytes.len());
        room[..n].copy_from_slice(&bytes[..n]);
        self.filled(n);
        n
    }

    /// At end of stream: an error if it ended inside a message.
    pub fn finish(&self) -> Result<(), ProtocolError> {
        let have = self.buffered();
        if have == 0 {
            return Ok(());
        }
        let data = &self.buf[self.start + self.pending..self.end];
        let need = if data.len() >= FRAME_HEADER_LEN {
            FRAME_HEADER_LEN + le32(&data[4..8]) as usize
        } else {
            FRAME_HEADER_LEN
        };
        Err(ProtocolError::Truncated { have, need })
    }

    /// At end of stream during the handshake (hellos are sized differently from frames).
    pub fn finish_hello(&self) -> Result<(), ProtocolError> {
        let have = self.buffered();
        if have == 0 {
            return Ok(());
        }
        let data = &self.buf[self.start + self.pending..self.end];
        let need = if data.len() >= HELLO_LEN {
            HELLO_LEN + le16(&data[8..10]) as usize + le16(&data[10..12]) as usize
        } else {
            HELLO_LEN
        };
        Err(ProtocolError::Truncated { have, need })
    }

    fn data(&mut self) -> &[u8] {
        self.settle();
        &self.buf[self.start..self.end]
    }

    /// The client's hello, once all of it has arrived.
    pub fn next_hello(&mut self) -> Result<Option<Hello>, ProtocolError> {
        let d = self.data();
        check_magic(d)?;
        if d.len() >= 6 {
            let version = le16(&d[4..6]);
            if version != VERSION {
                return Err(ProtocolError::UnsupportedVersion { got: version });
            }
        }
        if d.len() < HELLO_LEN {
            return Ok(None);
        }
        if le16(&d[6..8]) != 0 {
            return Err(ProtocolError::BadHello {
                what: "reserved flags set",
            });
        }
        let token_len = le16(&d[8..10]) as usize;
        let volume_len = le16(&d[10..12]) as usize;
        if token_len > MAX_TOKEN_LEN {
            return Err(ProtocolError::BadHello {
                what: "token longer than 256 bytes",
            });
        }
        if volume_len == 0 || volume_len > MAX_VOLUME_LEN {
            return Err(ProtocolError::BadHello {
                what: "volume name length not in 1..=64",
            });
        }
        let total = HELLO_LEN + token_len + volume_len;
        if d.len() < total {
            return Ok(None);
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&d[0..12]), &d[HELLO_LEN..total]);
        if crc != le32(&d[12..16]) {
            return Err(ProtocolError::HelloChecksum);
        }
        let token = d[HELLO_LEN..HELLO_LEN + token_len].to_vec();
        let volume = String::from_utf8_lossy(&d[HELLO_LEN + token_len..total]).into_owned();
        self.pending = total;
        Ok(Some(Hello {
            version: VERSION,
            token,
            volume,
        }))
    }

    /// The server's hello ack, once all of it has arrived. A refusal is returned as
    /// `Ok(Some(ack))` with its status; the caller decides.
    pub fn next_hello_ack(&mut self) -> Result<Option<HelloAck>, ProtocolError> {
        let d = self.data();
        check_magic(d)?;
        if d.len() < HELLO_ACK_LEN {
            return Ok(None);
        }
        if crc32c::crc32c(&d[0..12]) != le32(&d[12..16]) {
            return Err(ProtocolError::HelloChecksum);
        }
        let status = HelloStatus::from_code(le16(&d[6..8])).ok_or(ProtocolError::BadHello {
            what: "unknown hello ack status",
        })?;
        let ack = HelloAck {
            version: le16(&d[4..6]),
            status,
            max_payload: le32(&d[8..12]),
        };
        self.pending = HELLO_ACK_LEN;
        Ok(Some(ack))
    }

    /// The next frame, once all of it has arrived.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, ProtocolError> {
        let max = self.max_payload;
        let d = self.data();
        if d.is_empty() {
            return Ok(None);
        }
        if !matches!(d[0], KIND_WRITE | KIND_ACK) || d[1..d.len().min(4)].iter().any(|&b| b != 0) {
            return Err(ProtocolError::Garbage { first: d[0] });
        }
        if d.len() < FRAME_HEADER_LEN {
            return Ok(None);
        }
        let h = &d[..FRAME_HEADER_LEN];
        let expected = le32(&h[28..32]);
        let got = crc32c::crc32c(&h[0..28]);
        if expected != got {
            return Err(ProtocolError::HeaderChecksum { expected, got });
        }
        let len = le32(&h[4..8]);
        if len > max {
            return Err(ProtocolError::Oversized { len, max });
        }
        let id = le64(&h[8..16]);
        let kind = h[0];
        if kind == KIND_ACK {
            if len != 0 {
                return Err(ProtocolError::Malformed {
                    what: "ack with a payload",
                });
            }
            let status: AckStatus = ack_status(&h[16..24]).ok_or(ProtocolError::Malformed {
                what: "unknown ack status",
            })?;
            self.pending = FRAME_HEADER_LEN;
            return Ok(Some(Frame::Ack { id, status }));
        }
        if len == 0 {
            return Err(ProtocolError::Malformed {
                what: "write without data",
            });
        }
        let total = FRAME_HEADER_LEN + len as usize;
        if d.len() < total {
            return Ok(None);
        }
        let offset = le64(&h[16..24]);
        let expected = le32(&h[24..28]);
        let data = &d[FRAME_HEADER_LEN..total];
        let got = crc32c::crc32c(data);
        if expected != got {
            return Err(ProtocolError::PayloadChecksum { id, expected, got });
        }
        self.pending = total;
        let start = self.start;
        Ok(Some(Frame::Write {
            id,
            offset,
            data: &self.buf[start + FRAME_HEADER_LEN..start + total],
        }))
    }
}

/// Fails as soon as the bytes received so far differ from `MAGIC`.
fn check_magic(d: &[u8]) -> Result<(), ProtocolError> {
    let n = d.len().min(MAGIC.len());
    if d[..n] != MAGIC[..n] {
        return Err(ProtocolError::BadMagic {
            got: d[..n].to_vec(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{MAX_PAYLOAD, ack_frame, write_header};
    use proptest::prelude::*;

    fn write_frame(id: u64, offset: u64, data: &[u8]) -> Vec<u8> {
        let mut f = write_header(id, offset, data).to_vec();
        f.extend_from_slice(data);
        f
    }

    #[derive(Debug, PartialEq)]
    enum Owned {
        Write(u64, u64, Vec<u8>),
        Ack(u64, AckStatus),
    }

    /// Feeds `stream` in pieces cut at `cuts`, collecting frames until the first error.
    fn decode_all(
        d: &mut Decoder,
        stream: &[u8],
        cuts: &[usize],
    ) -> (Vec<Owned>, Option<ProtocolError>) {
        let mut out = Vec::new();
        let mut pos = 0;
        let mut points: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
        points.push(stream.len());
        points.sort();
        for p in points {
            while pos < p {
                let n = d.push(&stream[pos..p]);
                pos += n;
                assert!(d.buffered() <= d.capacity());
                loop {
                    match d.next_frame() {
                        Ok(Some(Frame::Write { id, offset, data })) => {
                            out.push(Owned::Write(id, offset, data.to_vec()))
                        }
                        Ok(Some(Frame::Ack { id, status })) => out.push(Owned::Ack(id, status)),
                        Ok(None) => break,
                        Err(e) => return (out, Some(e)),
                    }
                }
                if n == 0 {
                    panic!("decoder full with no complete frame");
                }
            }
        }
        (out, d.finish().err())
    }

    #[test]
    fn frames_round_trip_byte_by_byte() {
        let mut stream = write_frame(1, 4096, &[7u8; 4096]);
        stream.extend_from_slice(&ack_frame(1, AckStatus::Ok));
        stream.extend_from_slice(&ack_frame(2, AckStatus::IoError(28)));
        stream.extend_from_slice(&ack_frame(3, AckStatus::Invalid));
        let cuts: Vec<usize> = (0..stream.len()).collect();
        let mut d = Decoder::new(8192);
        let (frames, err) = decode_all(&mut d, &stream, &cuts);
        assert_eq!(err, None);
        assert_eq!(
            frames,
            vec![
                Owned::Write(1, 4096, vec![7u8; 4096]),
                Owned::Ack(1, AckStatus::Ok),
                Owned::Ack(2, AckStatus::IoError(28)),
                Owned::Ack(3, AckStatus::Invalid),
            ]
        );
    }

    #[test]
    fn garbage_is_reported_on_the_first_byte() {
        let mut d = Decoder::new(4096);
        d.push(b"G");
        assert_eq!(d.next_frame(), Err(ProtocolError::Garbage { first: b'G' }));
        let mut d = Decoder::new(4096);
        d.push(&[KIND_WRITE, 0, 9]);
        assert_eq!(
            d.next_frame(),
            Err(ProtocolError::Garbage { first: KIND_WRITE })
        );
    }

    #[test]
    fn header_checksum() {
        let mut f = write_frame(5, 0, &[1; 512]);
        f[9] ^= 0x40; // request id
        let mut d = Decoder::new(4096);
        d.push(&f);
        assert!(matches!(
            d.next_frame(),
            Err(ProtocolError::HeaderChecksum { .. })
        ));
    }

    #[test]
    fn oversized_is_reported_before_the_payload() {
        let big = vec![0u8; 8192];
        let f = write_frame(5, 0, &big);
        let mut d = Decoder::new(4096);
        d.push(&f[..FRAME_HEADER_LEN]);
        assert_eq!(
            d.next_frame(),
            Err(ProtocolError::Oversized {
                len: 8192,
                max: 4096
            })
        );
    }

    #[test]
    fn payload_checksum() {
        let mut f = write_frame(9, 0, &[3; 1024]);
        let last = f.len() - 1;
        f[last] ^= 1;
        let mut d = Decoder::new(4096);
        d.push(&f);
        assert!(matches!(
            d.next_frame(),
            Err(ProtocolError::PayloadChecksum { id: 9, .. })
        ));
    }

    #[test]
    fn truncated_at_end_of_stream() {
        let f = write_frame(9, 0, &[3; 1024]);
        let mut d = Decoder::new(4096);
        d.push(&f[..100]);
        assert_eq!(d.next_frame(), Ok(None));
        assert_eq!(
            d.finish(),
            Err(ProtocolError::Truncated {
                have: 100,
                need: FRAME_HEADER_LEN + 1024
            })
        );
        let mut d = Decoder::new(4096);
        d.push(&f[..10]);
        assert_eq!(d.next_frame(), Ok(None));
        assert_eq!(
            d.finish(),
            Err(ProtocolError::Truncated {
                have: 10,
                need: FRAME_HEADER_LEN
            })
        );
    }

    #[test]
    fn malformed_frames() {
        let mut a = ack_frame(1, AckStatus::Ok);
        a[4] = 1; // an ack that claims a payload
        let crc = crc32c::crc32c(&a[0..28]);
        a[28..32].copy_from_slice(&crc.to_le_bytes());
        let mut d = Decoder::new(4096);
        d.push(&a);
        assert!(matches!(
            d.next_frame(),
            Err(ProtocolError::Malformed { .. })
        ));

        let empty = write_frame(1, 0, &[]);
        let mut d = Decoder::new(4096);
        d.push(&empty);
        assert!(matches!(
            d.next_frame(),
            Err(ProtocolError::Malformed { .. })
        ));
    }

    #[test]
    fn hello_round_trip_and_errors() {
        let h = Hello::new(b"secret", "job0");
        let bytes = h.encode();
        let mut d = Decoder::new(0);
        for (i, b) in bytes.iter().enumerate() {
            assert_eq!(d.next_hello(), Ok(None), "after {i} bytes");
            d.push(&[*b]);
        }
        assert_eq!(d.next_hello(), Ok(Some(h.clone())));
        assert_eq!(d.buffered(), 0);

        let mut d = Decoder::new(0);
        d.push(b"GET / HTTP/1.1\r\n");
        assert!(matches!(
            d.next_hello(),
            Err(ProtocolError::BadMagic { .. })
        ));
        let mut d = Decoder::new(0);
        d.push(b"SX");
        assert!(matches!(
            d.next_hello(),
            Err(ProtocolError::BadMagic { .. })
        ));

        let mut v2 = bytes.clone();
        v2[4] = 2;
        let mut d = Decoder::new(0);
        d.push(&v2[..6]);
        assert_eq!(
            d.next_hello(),
            Err(ProtocolError::UnsupportedVersion { got: 2 })
        );

        let mut bad = bytes.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        let mut d = Decoder::new(0);
        d.push(&bad);
        assert_eq!(d.next_hello(), Err(ProtocolError::HelloChecksum));

        let mut long = bytes.clone();
        long[8..10].copy_from_slice(&300u16.to_le_bytes());
        let mut d = Decoder::new(0);
        d.push(&long);
        assert!(matches!(
            d.next_hello(),
            Err(ProtocolError::BadHello { .. })
        ));

        let mut d = Decoder::new(0);
        d.push(&bytes[..20]);
        assert_eq!(d.next_hello(), Ok(None));
        assert_eq!(
            d.finish_hello(),
            Err(ProtocolError::Truncated {
                have: 20,
                need: bytes.len()
            })
        );
    }

    #[test]
    fn hello_then_frames_in_one_buffer() {
        let mut s = Hello::new(b"", "v").encode();
        s.extend_from_slice(&write_frame(1, 512, &[9; 512]));
        let mut d = Decoder::new(4096);
        d.push(&s);
        assert!(d.next_hello().unwrap().is_some());
        assert!(matches!(
            d.next_frame(),
            Ok(Some(Frame::Write {
                id: 1,
                offset: 512,
                ..
            }))
        ));
        assert_eq!(d.next_frame(), Ok(None));
    }

    #[test]
    fn hello_ack_round_trip() {
        let a = HelloAck {
            version: 1,
            status: HelloStatus::Busy,
            max_payload: MAX_PAYLOAD,
        };
        let mut d = Decoder::new(0);
        d.push(&a.encode()[..15]);
        assert_eq!(d.next_hello_ack(), Ok(None));
        d.push(&a.encode()[15..]);
        assert_eq!(d.next_hello_ack(), Ok(Some(a)));
    }

    fn frame_strategy() -> impl Strategy<Value = Owned> {
        prop_oneof![
            (
                any::<u64>(),
                any::<u64>(),
                proptest::collection::vec(any::<u8>(), 1..3000)
            )
                .prop_map(|(i, o, d)| Owned::Write(i, o, d)),
            (any::<u64>(), 0u32..3, any::<u32>()).prop_map(|(i, s, e)| Owned::Ack(
                i,
                match s {
                    0 => AckStatus::Ok,
                    1 => AckStatus::IoError(e),
                    _ => AckStatus::Invalid,
                }
            )),
        ]
    }

    fn encode(f: &Owned) -> Vec<u8> {
        match f {
            Owned::Write(i, o, d) => write_frame(*i, *o, d),
            Owned::Ack(i, s) => ack_frame(*i, *s).to_vec(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Any sequence of frames, cut anywhere, decodes to itself.
        #[test]
        fn encode_decode_round_trip(
            frames in proptest::collection::vec(frame_strategy(), 0..20),
            cuts in proptest::collection::vec(any::<usize>(), 0..40),
        ) {
            let stream: Vec<u8> = frames.iter().flat_map(encode).collect();
            let mut d = Decoder::new(4096);
            let (out, err) = decode_all(&mut d, &stream, &cuts);
            prop_assert_eq!(err, None);
            prop_assert_eq!(out, frames);
        }

        /// Arbitrary bytes, cut anywhere, never panic, never make the decoder hold more than
        /// its fixed buffer, and end in frames followed by at most one typed error.
        #[test]
        fn arbitrary_bytes_never_panic(
            valid_prefix in proptest::collection::vec(frame_strategy(), 0..3),
            noise in proptest::collection::vec(any::<u8>(), 0..6000),
            cuts in proptest::collection::vec(any::<usize>(), 0..40),
            max in 0u32..5000,
        ) {
            let mut stream: Vec<u8> = valid_prefix.iter().flat_map(encode).collect();
            stream.extend_from_slice(&noise);
            let mut d = Decoder::new(max);
            let cap = d.capacity();
            prop_assert!(cap <= FRAME_HEADER_LEN + (max as usize).max(crate::protocol::MAX_HELLO_LEN));
            let (_out, _err) = decode_all(&mut d, &stream, &cuts);
            prop_assert_eq!(d.capacity(), cap);
        }

        /// The same for the hello parser.
        #[test]
        fn arbitrary_hello_bytes_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..400),
            magic_prefix in any::<bool>(),
        ) {
            let mut d = Decoder::new(0);
            if magic_prefix {
                d.push(&MAGIC);
            }
            d.push(&bytes);
            let _ = d.next_hello();
            let _ = d.finish_hello();
            let mut d = Decoder::new(0);
            d.push(&bytes);
            let _ = d.next_hello_ack();
        }
    }
}
