//! The replication wire format, version 1: constants, message types, encoders and the typed
//! errors a peer's bytes can produce. Pure functions, no IO; `docs/replication-protocol.md`
//! is the byte-level reference and must change together with this file.
//!
//! All integers are little-endian. Checksums are CRC-32C (Castagnoli).

use std::fmt;

/// First four bytes of a hello and a hello ack.
pub const MAGIC: [u8; 4] = *b"STNR";
/// The only protocol version this build speaks.
pub const VERSION: u16 = 1;

/// Fixed part of a hello (client → server); the token and the volume name follow it.
pub const HELLO_LEN: usize = 16;
/// A hello ack (server → client).
pub const HELLO_ACK_LEN: usize = 16;
/// The header in front of every frame.
pub const FRAME_HEADER_LEN: usize = 32;

pub const MAX_TOKEN_LEN: usize = 256;
pub const MAX_VOLUME_LEN: usize = 64;
/// The largest hello on the wire.
pub const MAX_HELLO_LEN: usize = HELLO_LEN + MAX_TOKEN_LEN + MAX_VOLUME_LEN;
/// The largest frame payload (one write's data) a version 1 peer must accept.
pub const MAX_PAYLOAD: u32 = 1 << 20;
/// Write offsets and lengths must be multiples of this (the replica writes with O_DIRECT).
pub const BLOCK_ALIGN: u64 = 512;

pub const KIND_WRITE: u8 = 1;
pub const KIND_ACK: u8 = 2;

/// The client's opening message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub version: u16,
    /// Shared secret; empty when the client has none.
    pub token: Vec<u8>,
    /// The replica file this connection writes to (a plain file name inside the server's
    /// directory, see [`valid_volume`]).
    pub volume: String,
}

/// The server's answer to a hello. Any status but `Ok` is followed by the server closing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelloAck {
    /// `VERSION` when accepted; the server's own version when it refuses the client's.
    pub version: u16,
    pub status: HelloStatus,
    /// The largest payload the server accepts on this connection.
    pub max_payload: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelloStatus {
    Ok,
    UnsupportedVersion,
    WrongToken,
    BadVolume,
    /// The server has no room for another connection.
    Busy,
    /// The server cannot open the volume's file.
    VolumeUnavailable,
}

impl HelloStatus {
    pub fn code(self) -> u16 {
        match self {
            HelloStatus::Ok => 0,
            HelloStatus::UnsupportedVersion => 1,
            HelloStatus::WrongToken => 2,
            HelloStatus::BadVolume => 3,
            HelloStatus::Busy => 4,
            HelloStatus::VolumeUnavailable => 5,
        }
    }
    pub fn from_code(code: u16) -> Option<HelloStatus> {
        Some(match code {
            0 => HelloStatus::Ok,
            1 => HelloStatus::UnsupportedVersion,
            2 => HelloStatus::WrongToken,
            3 => HelloStatus::BadVolume,
            4 => HelloStatus::Busy,
            5 => HelloStatus::VolumeUnavailable,
            _ => return None,
        })
    }
}

impl fmt::Display for HelloStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HelloStatus::Ok => "accepted",
            HelloStatus::UnsupportedVersion => "unsupported protocol version",
            HelloStatus::WrongToken => "wrong token",
            HelloStatus::BadVolume => "invalid volume name",
            HelloStatus::Busy => "too many connections",
            HelloStatus::VolumeUnavailable => "the replica cannot open the volume file",
        })
    }
}

/// How the replica finished one write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckStatus {
    /// Written (or, on a server run with `--ack-on-receive`, received intact).
    Ok,
    /// The replica's write failed with this errno (or 0 for a short write).
    IoError(u32),
    /// The request cannot be written: offset or length not a multiple of `BLOCK_ALIGN`.
    Invalid,
}

impl AckStatus {
    fn to_wire(self) -> (u32, u32) {
        match self {
            AckStatus::Ok => (0, 0),
            AckStatus::IoError(errno) => (1, errno),
            AckStatus::Invalid => (2, 0),
        }
    }
    fn from_wire(status: u32, detail: u32) -> Option<AckStatus> {
        match (status, detail) {
            (0, 0) => Some(AckStatus::Ok),
            (1, errno) => Some(AckStatus::IoError(errno)),
            (2, 0) => Some(AckStatus::Invalid),
            _ => None,
        }
    }
}

impl fmt::Display for AckStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AckStatus::Ok => f.write_str("ok"),
            AckStatus::IoError(0) => f.write_str("short write on the replica"),
            AckStatus::IoError(e) => write!(
                f,
                "write failed on the replica: {}",
                std::io::Error::from_raw_os_error(*e as i32)
            ),
            AckStatus::Invalid => {
                write!(f, "offset or length not a multiple of {BLOCK_ALIGN} bytes")
            }
        }
    }
}

/// One decoded frame; a write's data borrows the decoder's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    Write {
        id: u64,
        offset: u64,
        data: &'a [u8],
    },
    Ack {
        id: u64,
        status: AckStatus,
    },
}

/// Everything a peer's bytes can do wrong. After any of these the stream cannot be trusted:
/// close the connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// The stream does not start with `MAGIC`.
    BadMagic {
        got: Vec<u8>,
    },
    UnsupportedVersion {
        got: u16,
    },
    WrongToken,
    /// A volume name that is empty, too long, or not a plain file name.
    BadVolume {
        name: String,
    },
    /// A hello whose fixed fields are out of range (lengths, reserved bits).
    BadHello {
        what: &'static str,
    },
    HelloChecksum,
    /// The server refused the hello.
    Rejected {
        status: HelloStatus,
    },
    /// Bytes where a frame header should start that cannot be one (unknown kind, reserved
    /// bits set).
    Garbage {
        first: u8,
    },
    HeaderChecksum {
        expected: u32,
        got: u32,
    },
    Oversized {
        len: u32,
        max: u32,
    },
    /// A header that checks out but contradicts itself (an ack with a payload, an empty write,
    /// an unknown ack status).
    Malformed {
        what: &'static str,
    },
    PayloadChecksum {
        id: u64,
        expected: u32,
        got: u32,
    },
    /// The stream ended inside a hello or frame.
    Truncated {
        have: usize,
        need: usize,
    },
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ProtocolError::*;
        match self {
            BadMagic { got } => write!(
                f,
                "wrong magic: stream starts with {got:02x?}, not \"STNR\""
            ),
            UnsupportedVersion { got } => {
                write!(
                    f,
                    "unsupported protocol version {got} (this side speaks {VERSION})"
                )
            }
            WrongToken => f.write_str("wrong token"),
            BadVolume { name } => write!(
                f,
                "invalid volume name {name:?} (1 to {MAX_VOLUME_LEN} of [A-Za-z0-9._-], not starting with '.')"
            ),
            BadHello { what } => write!(f, "malformed hello: {what}"),
            HelloChecksum => f.write_str("hello checksum mismatch"),
            Rejected { status } => write!(f, "handshake refused: {status}"),
            Garbage { first } => write!(
                f,
                "garbage bytes: 0x{first:02x} cannot start a frame header"
            ),
            HeaderChecksum { expected, got } => write!(
                f,
                "frame header checksum mismatch (header says {expected:#010x}, computed {got:#010x})"
            ),
            Oversized { len, max } => {
                write!(
                    f,
                    "oversized frame: payload length {len} exceeds the maximum {max}"
                )
            }
            Malformed { what } => write!(f, "malformed frame: {what}"),
            PayloadChecksum { id, expected, got } => write!(
                f,
                "payload checksum mismatch in request {id} (header says {expected:#010x}, computed {got:#010x})"
            ),
            Truncated { have, need } => write!(
                f,
                "truncated: stream ended after {have} of {need} bytes of a message"
            ),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// A volume name is a plain file name: 1 to `MAX_VOLUME_LEN` bytes of `[A-Za-z0-9._-]`, not
/// starting with a dot (so no hidden files, `.` or `..`).
pub fn valid_volume(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_VOLUME_LEN
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// Constant-time comparison, so the time of a refusal does not tell how much of a token was
/// right.
pub fn token_matches(expected: &[u8], got: &[u8]) -> bool {
    if expected.len() != got.len() {
        return false;
    }
    expected
        .iter()
        .zip(got)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

impl Hello {
    pub fn new(token: &[u8], volume: &str) -> Hello {
        Hello {
            version: VERSION,
            token: token.to_vec(),
            volume: volume.to_owned(),
        }
    }

    /// The server's checks after decoding: the token (when the server has one) and the
    /// volume name.
    pub fn verify(&self, expected_token: Option<&[u8]>) -> Result<(), ProtocolError> {
        if let Some(t) = expected_token
            && !token_matches(t, &self.token)
        {
            return Err(ProtocolError::WrongToken);
        }
        if !valid_volume(&self.volume) {
            return Err(ProtocolError::BadVolume {
                name: self.volume.clone(),
            });
        }
        Ok(())
    }

    /// The hello on the wire. Panics if the token or volume exceed their limits (a caller
    /// bug: check with `MAX_TOKEN_LEN` / [`valid_volume`] first).
    pub fn encode(&self) -> Vec<u8> {
        assert!(self.token.len() <= MAX_TOKEN_LEN, "token too long");
        assert!(self.volume.len() <= MAX_VOLUME_LEN, "volume name too long");
        let mut b = Vec::with_capacity(HELLO_LEN + self.token.len() + self.volume.len());
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&self.version.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&(self.token.len() as u16).to_le_bytes());
        b.extend_from_slice(&(self.volume.len() as u16).to_le_bytes());
        let crc = crc32c::crc32c_append(
            crc32c::crc32c_append(crc32c::crc32c(&b), &self.token),
            self.volume.as_bytes(),
        );
        b.extend_from_slice(&crc.to_le_bytes());
        b.extend_from_slice(&self.token);
        b.extend_from_slice(self.volume.as_bytes());
        b
    }
}

impl HelloAck {
    pub fn encode(&self) -> [u8; HELLO_ACK_LEN] {
        let mut b = [0u8; HELLO_ACK_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4..6].copy_from_slice(&self.version.to_le_bytes());
        b[6..8].copy_from_slice(&self.status.code().to_le_bytes());
        b[8..12].copy_from_slice(&self.max_payload.to_le_bytes());
        let crc = crc32c::crc32c(&b[0..12]);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
        b
    }
}

fn header(kind: u8, len: u32, id: u64, arg: [u8; 8], payload_crc: u32) -> [u8; FRAME_HEADER_LEN] {
    let mut h = [0u8; FRAME_HEADER_LEN];
    h[0] = kind;
    h[4..8].copy_from_slice(&len.to_le_bytes());
    h[8..16].copy_from_slice(&id.to_le_bytes());
    h[16..24].copy_from_slice(&arg);
    h[24..28].copy_from_slice(&payload_crc.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..28]);
    h[28..32].copy_from_slice(&crc.to_le_bytes());
    h
}

/// The header of a write frame; send `data` right after it. Panics if `data` is longer
/// than `MAX_PAYLOAD` (a caller bug).
pub fn write_header(id: u64, offset: u64, data: &[u8]) -> [u8; FRAME_HEADER_LEN] {
    assert!(
        data.len() <= MAX_PAYLOAD as usize,
        "write larger than MAX_PAYLOAD"
    );
    header(
        KIND_WRITE,
        data.len() as u32,
        id,
        offset.to_le_bytes(),
        crc32c::crc32c(data),
    )
}

/// A complete ack frame (acks carry no payload).
pub fn ack_frame(id: u64, status: AckStatus) -> [u8; FRAME_HEADER_LEN] {
    let (s, d) = status.to_wire();
    let mut arg = [0u8; 8];
    arg[0..4].copy_from_slice(&s.to_le_bytes());
    arg[4..8].copy_from_slice(&d.to_le_bytes());
    header(KIND_ACK, 0, id, arg, 0)
}

pub(crate) fn le16(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}
pub(crate) fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes(b[0..4].try_into().expect("4 bytes"))
}
pub(crate) fn le64(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[0..8].try_into().expect("8 bytes"))
}

pub(crate) fn ack_status(arg: &[u8]) -> Option<AckStatus> {
    AckStatus::from_wire(le32(&arg[0..4]), le32(&arg[4..8]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_names() {
        for ok in ["job0", "a", "vol-1.dat", "A_b"] {
            assert!(valid_volume(ok), "{ok}");
        }
        let long = "x".repeat(MAX_VOLUME_LEN + 1);
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "../x",
            "a b",
            "é",
            long.as_str(),
        ] {
            assert!(!valid_volume(bad), "{bad:?}");
        }
    }

    #[test]
    fn tokens() {
        assert!(token_matches(b"secret", b"secret"));
        assert!(!token_matches(b"secret", b"secreT"));
        assert!(!token_matches(b"secret", b"secret2"));
        assert!(token_matches(b"", b""));
    }

    #[test]
    fn hello_verify() {
        let h = Hello::new(b"tok", "job0");
        assert_eq!(h.verify(Some(b"tok")), Ok(()));
        assert_eq!(h.verify(None), Ok(()));
        assert_eq!(h.verify(Some(b"other")), Err(ProtocolError::WrongToken));
        let bad = Hello::new(b"", "../etc");
        assert!(matches!(
            bad.verify(None),
            Err(ProtocolError::BadVolume { .. })
        ));
    }

    /// The layout documented in docs/replication-protocol.md, byte by byte.
    #[test]
    fn documented_layouts() {
        let h = write_header(0x0102030405060708, 4096, &[0xaa; 512]);
        assert_eq!(h[0], 1);
        assert_eq!(&h[1..4], &[0, 0, 0]);
        assert_eq!(le32(&h[4..8]), 512);
        assert_eq!(le64(&h[8..16]), 0x0102030405060708);
        assert_eq!(le64(&h[16..24]), 4096);
        assert_eq!(le32(&h[24..28]), crc32c::crc32c(&[0xaa; 512]));
        assert_eq!(le32(&h[28..32]), crc32c::crc32c(&h[0..28]));

        let a = ack_frame(7, AckStatus::IoError(5));
        assert_eq!(a[0], 2);
        assert_eq!(le32(&a[4..8]), 0);
        assert_eq!(le64(&a[8..16]), 7);
        assert_eq!(le32(&a[16..20]), 1);
        assert_eq!(le32(&a[20..24]), 5);

        let hello = Hello::new(b"tk", "v1").encode();
        assert_eq!(&hello[0..4], b"STNR");
        assert_eq!(le16(&hello[4..6]), 1);
        assert_eq!(le16(&hello[8..10]), 2);
        assert_eq!(le16(&hello[10..12]), 2);
        assert_eq!(&hello[16..], b"tkv1");
        let mut crc_input = hello[0..12].to_vec();
        crc_input.extend_from_slice(b"tkv1");
        assert_eq!(le32(&hello[12..16]), crc32c::crc32c(&crc_input));

        let ack = HelloAck {
            version: 1,
            status: HelloStatus::WrongToken,
            max_payload: MAX_PAYLOAD,
        }
        .encode();
        assert_eq!(&ack[0..4], b"STNR");
        assert_eq!(le16(&ack[6..8]), 2);
        assert_eq!(le32(&ack[8..12]), 1 << 20);
        assert_eq!(le32(&ack[12..16]), crc32c::crc32c(&ack[0..12]));
    }

    #[test]
    fn crc32c_known_value() {
        // RFC 3720 B.4: 32 bytes of zeros.
        assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8a91_36aa);
    }
}
