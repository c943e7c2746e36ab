//! Framing: NRI's multiplexer frames and ttrpc's message header, as pure functions.
//!
//! The trunk socket carries mux frames `[conn id u32 BE][length u32 BE][payload]`.
//! Each logical connection's payloads concatenate into a byte stream of ttrpc
//! messages `[length u32 BE][stream id u32 BE][type u8][flags u8][data]`.
//!
//! Go's mux hands one whole frame to each read and fails when the reader's
//! buffer (ttrpc's 4096-byte `bufio`) is smaller, so every frame sent toward
//! the runtime carries at most [`MAX_FRAME_PAYLOAD`] bytes.

/// The mux connection on which the runtime calls the plugin.
pub const PLUGIN_SERVICE_CONN: u32 = 1;

/// The mux connection on which the plugin calls the runtime.
pub const RUNTIME_SERVICE_CONN: u32 = 2;

/// The largest payload of a frame the plugin sends.
pub const MAX_FRAME_PAYLOAD: usize = 4096;

/// The largest frame payload the plugin accepts (Go splits above 4 MiB + 10).
pub const MAX_INBOUND_FRAME: usize = 16 << 20;

/// The largest ttrpc message data (ttrpc's own limit).
pub const MAX_MESSAGE_DATA: usize = 4 << 20;

/// Size of a mux frame header.
pub const FRAME_HEADER_LEN: usize = 8;

/// Size of a ttrpc message header.
pub const MESSAGE_HEADER_LEN: usize = 10;

/// ttrpc message type of a request.
pub const MESSAGE_REQUEST: u8 = 1;

/// ttrpc message type of a response.
pub const MESSAGE_RESPONSE: u8 = 2;

/// A protocol violation by the peer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A mux frame announced a payload larger than [`MAX_INBOUND_FRAME`].
    #[error("mux frame of {length} bytes on connection {conn} exceeds the {MAX_INBOUND_FRAME}-byte limit")]
    FrameTooLarge {
        /// The logical connection.
        conn: u32,
        /// The announced length.
        length: usize,
    },
    /// A ttrpc message announced data larger than [`MAX_MESSAGE_DATA`].
    #[error("ttrpc message of {length} bytes exceeds the {MAX_MESSAGE_DATA}-byte limit")]
    MessageTooLarge {
        /// The announced length.
        length: usize,
    },
}

/// A decoded mux frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// The logical connection.
    pub conn: u32,
    /// The payload length.
    pub length: usize,
}

/// Decodes a mux frame header, rejecting oversized frames.
pub fn decode_frame_header(bytes: [u8; FRAME_HEADER_LEN]) -> Result<FrameHeader, Error> {
    let conn = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let length = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    if length > MAX_INBOUND_FRAME {
        return Err(Error::FrameTooLarge { conn, length });
    }
    Ok(FrameHeader { conn, length })
}

/// Encodes `stream` for `conn` as mux frames of at most [`MAX_FRAME_PAYLOAD`] bytes each.
pub fn encode_frames(conn: u32, stream: &[u8]) -> Vec<u8> {
    let n_frames = stream.len().div_ceil(MAX_FRAME_PAYLOAD);
    let mut out = Vec::with_capacity(stream.len() + n_frames * FRAME_HEADER_LEN);
    for chunk in stream.chunks(MAX_FRAME_PAYLOAD) {
        out.extend_from_slice(&conn.to_be_bytes());
        // A chunk is at most 4096 bytes, so the cast is lossless.
        out.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

/// One ttrpc message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The stream id (odd, client-chosen).
    pub stream_id: u32,
    /// [`MESSAGE_REQUEST`] or [`MESSAGE_RESPONSE`] (data messages are not used by NRI).
    pub kind: u8,
    /// The header flags.
    pub flags: u8,
    /// The serialized envelope.
    pub data: Vec<u8>,
}

/// Encodes a ttrpc message (header and data).
///
/// The caller keeps `data` within [`MAX_MESSAGE_DATA`]; the plugin's replies are far smaller.
pub fn encode_message(stream_id: u32, kind: u8, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MESSAGE_HEADER_LEN + data.len());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(&stream_id.to_be_bytes());
    out.push(kind);
    out.push(0);
    out.extend_from_slice(data);
    out
}

/// Reassembles ttrpc messages from one logical connection's frame payloads.
#[derive(Debug, Default)]
pub struct MessageDecoder {
    buffer: Vec<u8>,
}

impl MessageDecoder {
    /// Appends a frame payload and returns every message it completed, in order.
    pub fn push(&mut self, payload: &[u8]) -> Result<Vec<Message>, Error> {
        self.buffer.extend_from_slice(payload);
        let mut messages = Vec::new();
        let mut offset = 0;
        while self.buffer.len() - offset >= MESSAGE_HEADER_LEN {
            let header = &self.buffer[offset..offset + MESSAGE_HEADER_LEN];
            let length = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
            if length > MAX_MESSAGE_DATA {
                return Err(Error::MessageTooLarge { length });
            }
            let stream_id = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
            let (kind, flags) = (header[8], header[9]);
            let end = offset + MESSAGE_HEADER_LEN + length;
            if self.buffer.len() < end {
                break;
            }
            let data = self.buffer[offset + MESSAGE_HEADER_LEN..end].to_vec();
            messages.push(Message {
                stream_id,
                kind,
                flags,
                data,
            });
            offset = end;
        }
        self.buffer.drain(..offset);
        Ok(messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splits an encoded frame sequence back into (conn, payload) pairs.
    fn split_frames(mut bytes: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut frames = Vec::new();
        while !bytes.is_empty() {
            let mut header = [0; FRAME_HEADER_LEN];
            header.copy_from_slice(&bytes[..FRAME_HEADER_LEN]);
            let header = decode_frame_header(header).expect("valid header");
            let end = FRAME_HEADER_LEN + header.length;
            frames.push((header.conn, bytes[FRAME_HEADER_LEN..end].to_vec()));
            bytes = &bytes[end..];
        }
        frames
    }

    #[test]
    fn frames_never_exceed_4096_bytes_and_reassemble() {
        for size in [0usize, 1, 4095, 4096, 4097, 8192, 100_000] {
            let stream: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let frames = split_frames(&encode_frames(RUNTIME_SERVICE_CONN, &stream));
            assert_eq!(
                frames.len(),
                size.div_ceil(MAX_FRAME_PAYLOAD),
                "size {size}"
            );
            assert!(frames
                .iter()
                .all(|(conn, payload)| *conn == RUNTIME_SERVICE_CONN
                    && payload.len() <= MAX_FRAME_PAYLOAD
                    && !payload.is_empty()));
            let joined: Vec<u8> = frames
                .into_iter()
                .flat_map(|(_, payload)| payload)
                .collect();
            assert_eq!(joined, stream);
        }
    }

    #[test]
    fn oversized_inbound_frames_are_rejected() {
        let mut header = [0; FRAME_HEADER_LEN];
        header[3] = 1;
        header[4..].copy_from_slice(&((MAX_INBOUND_FRAME as u32) + 1).to_be_bytes());
        assert_eq!(
            decode_frame_header(header),
            Err(Error::FrameTooLarge {
                conn: 1,
                length: MAX_INBOUND_FRAME + 1
            })
        );
    }

    #[test]
    fn messages_reassemble_across_arbitrary_splits() {
        let first = encode_message(1, MESSAGE_REQUEST, b"hello");
        let second = encode_message(3, MESSAGE_RESPONSE, &[7; 5000]);
        let stream: Vec<u8> = first.iter().chain(second.iter()).copied().collect();
        for split in [1, 3, 10, 11, 15, 16, 4000] {
            let mut decoder = MessageDecoder::default();
            let mut messages = Vec::new();
            for chunk in stream.chunks(split) {
                messages.extend(decoder.push(chunk).expect("valid stream"));
            }
            assert_eq!(messages.len(), 2, "split {split}");
            assert_eq!(
                (messages[0].stream_id, messages[0].kind),
                (1, MESSAGE_REQUEST)
            );
            assert_eq!(messages[0].data, b"hello");
            assert_eq!(
                (messages[1].stream_id, messages[1].kind),
                (3, MESSAGE_RESPONSE)
            );
            assert_eq!(messages[1].data.len(), 5000);
        }
    }

    #[test]
    fn oversized_messages_are_rejected() {
        let mut decoder = MessageDecoder::default();
        let mut header = Vec::new();
        header.extend_from_slice(&((MAX_MESSAGE_DATA as u32) + 1).to_be_bytes());
        header.extend_from_slice(&[0, 0, 0, 1, 1, 0]);
        assert_eq!(
            decoder.push(&header),
            Err(Error::MessageTooLarge {
                length: MAX_MESSAGE_DATA + 1
            })
        );
    }
}
