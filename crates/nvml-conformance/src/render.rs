//! Output buffers: how each output token is laid out before a call and rendered after it, so that
//! two libraries' answers compare as text. Handles are rendered as the device they name, never as
//! addresses; bytes the library did not write are told apart by a sentinel.

use crate::script::{Scalar, Stability, Token};

/// Bytes a scalar output or string buffer holds before the call, to tell "unwritten" apart.
pub const SENTINEL: u8 = 0xAB;

/// `sizeof(nvmlFieldValue_t)`.
const FIELD_VALUE_BYTES: usize = 40;

/// What an output buffer holds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Scalar(Scalar, Stability),
    Bytes,
    Text,
    Count,
    Devices,
    Opaque,
    /// Field values; the ids whose value varies with time.
    Fields(Vec<u32>),
}

/// One output buffer (8-byte aligned) and how to read it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    kind: Kind,
    words: Vec<u64>,
    bytes: usize,
    /// What is passed after the pointer: a string's length.
    length: Option<usize>,
    /// What is passed before the pointer: a field-value count.
    count: Option<usize>,
}

impl Output {
    fn new(kind: Kind, bytes: usize, fill: u8) -> Output {
        let mut output = Output {
            kind,
            words: vec![0; bytes.div_ceil(8).max(1)],
            bytes,
            length: None,
            count: None,
        };
        for index in 0..bytes {
            output.set_byte(index, fill);
        }
        output
    }

    /// A `char *` buffer of `size` bytes; `length` is what the call is told (the size if `None`).
    pub fn string(size: usize, length: Option<usize>) -> Output {
        let mut output = Output::new(Kind::Text, size, SENTINEL);
        output.length = Some(length.unwrap_or(size));
        output
    }

    /// The buffer an output token stands for.
    pub fn for_token(token: &Token) -> Output {
        match token {
            Token::Out(scalar, stability) => {
                Output::new(Kind::Scalar(*scalar, *stability), 8, SENTINEL)
            }
            Token::Obj { size, version } => {
                let mut output = Output::new(Kind::Bytes, *size, 0);
                if let Some(version) = version {
                    output.set_u32(0, *version);
                }
                output
            }
            Token::Str(size) => Output::string(*size, None),
            Token::Buf(size) => Output::new(Kind::Text, *size, SENTINEL),
            Token::Count(value) => {
                let mut output = Output::new(Kind::Count, 4, 0);
                output.set_u32(0, *value);
                output
            }
            Token::Arr(size) => Output::new(Kind::Bytes, *size, 0),
            Token::Devs(count) => Output::new(Kind::Devices, count * 8, 0),
            Token::DevOut => Output::new(Kind::Devices, 8, 0),
            Token::OpaqueOut => Output::new(Kind::Opaque, 8, 0),
            Token::Fields(ids) => {
                let varying = ids
                    .iter()
                    .filter(|(_, stability)| *stability == Stability::Varies)
                    .map(|(id, _)| *id)
                    .collect();
                let kind = Kind::Fields(varying);
                let mut output = Output::new(kind, ids.len() * FIELD_VALUE_BYTES, 0);
                for (entry, (id, _)) in ids.iter().enumerate() {
                    output.set_u32(entry * FIELD_VALUE_BYTES, *id);
                }
                output.count = Some(ids.len());
                output
            }
            // Input tokens have no buffer; an empty byte output renders as nothing written.
            _ => Output::new(Kind::Bytes, 0, 0),
        }
    }

    /// The C arguments this output stands for.
    pub fn push_words(&self, words: &mut Vec<usize>) {
        if let Some(count) = self.count {
            words.push(count);
        }
        words.push(self.words.as_ptr() as usize);
        if let Some(length) = self.length {
            words.push(length);
        }
    }

    fn byte(&self, index: usize) -> u8 {
        (self.words[index / 8] >> (8 * (index % 8))) as u8
    }

    fn set_byte(&mut self, index: usize, value: u8) {
        let shift = 8 * (index % 8);
        let word = &mut self.words[index / 8];
        *word = (*word & !(0xff << shift)) | (u64::from(value) << shift);
    }

    fn set_u32(&mut self, offset: usize, value: u32) {
        for (index, byte) in value.to_le_bytes().into_iter().enumerate() {
            self.set_byte(offset + index, byte);
        }
    }

    fn u32_at(&self, offset: usize) -> u32 {
        u32::from_le_bytes([0, 1, 2, 3].map(|i| self.byte(offset + i)))
    }

    fn u64_at(&self, offset: usize) -> u64 {
        u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7].map(|i| self.byte(offset + i)))
    }

    fn unwritten(&self, offset: usize, len: usize) -> bool {
        (offset..offset + len).all(|index| self.byte(index) == SENTINEL)
    }
}

/// Renders an output after the call; `handles` are the devices' handles, in index order.
pub fn output(output: &Output, handles: &[usize]) -> String {
    match &output.kind {
        Kind::Scalar(scalar, stability) => {
            let width = if *scalar == Scalar::U64 { 8 } else { 4 };
            if output.unwritten(0, width) {
                return "unwritten".into();
            }
            match (stability, scalar) {
                (Stability::Varies, _) => "written".into(),
                (_, Scalar::U32) => output.u32_at(0).to_string(),
                (_, Scalar::I32) => (output.u32_at(0) as i32).to_string(),
                (_, Scalar::U64) => output.u64_at(0).to_string(),
            }
        }
        Kind::Bytes => hex(output),
        Kind::Text => text(output),
        Kind::Count => output.u32_at(0).to_string(),
        Kind::Devices => {
            let names: Vec<String> = (0..output.bytes / 8)
                .map(|entry| device(output.u64_at(entry * 8) as usize, handles))
                .collect();
            names.join(",")
        }
        Kind::Opaque => match output.u64_at(0) {
            0 => "null".into(),
            _ => "set".into(),
        },
        Kind::Fields(varying) => {
            let entries: Vec<String> = (0..output.bytes / FIELD_VALUE_BYTES)
                .map(|entry| field(output, entry * FIELD_VALUE_BYTES, varying))
                .collect();
            entries.join(" ")
        }
    }
}

/// One `nvmlFieldValue_t`: id, return, and type and value when it succeeded (the timestamp and
/// latency vary, and are not compared).
fn field(output: &Output, offset: usize, varying: &[u32]) -> String {
    let id = output.u32_at(offset);
    let ret = output.u32_at(offset + 28);
    if ret != 0 {
        return format!("{id}:ret={ret}");
    }
    let kind = output.u32_at(offset + 24);
    if varying.contains(&id) {
        return format!("{id}:type={kind}:written");
    }
    format!("{id}:type={kind}:value={:#x}", output.u64_at(offset + 32))
}

fn device(pointer: usize, handles: &[usize]) -> String {
    if pointer == 0 {
        return "-".into();
    }
    match handles.iter().position(|handle| *handle == pointer) {
        Some(index) => format!("dev{index}"),
        None => "unknown-handle".into(),
    }
}

fn text(output: &Output) -> String {
    if output.bytes == 0 || output.unwritten(0, 1) {
        return "unwritten".into();
    }
    let bytes: Vec<u8> = (0..output.bytes).map(|index| output.byte(index)).collect();
    match bytes.iter().position(|byte| *byte == 0) {
        Some(end) => format!("{:?}", String::from_utf8_lossy(&bytes[..end])),
        None => format!("unterminated {:?}", String::from_utf8_lossy(&bytes)),
    }
}

/// Lower-case hex, trailing zero bytes summarised.
fn hex(output: &Output) -> String {
    let bytes: Vec<u8> = (0..output.bytes).map(|index| output.byte(index)).collect();
    let end = bytes
        .iter()
        .rposition(|byte| *byte != 0)
        .map_or(0, |last| last + 1);
    let mut text: String = bytes[..end]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    if end < bytes.len() {
        text.push_str(&format!("+{}z", bytes.len() - end));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_render_their_value_or_unwritten() {
        let mut out = Output::for_token(&Token::Out(Scalar::U32, Stability::Stable));
        assert_eq!(output(&out, &[]), "unwritten");
        out.set_u32(0, 42);
        assert_eq!(output(&out, &[]), "42");
        let mut varies = Output::for_token(&Token::Out(Scalar::U64, Stability::Varies));
        varies.set_u32(0, 7);
        varies.set_u32(4, 0);
        assert_eq!(output(&varies, &[]), "written");
    }

    #[test]
    fn structs_keep_their_version_and_render_as_trimmed_hex() {
        let out = Output::for_token(&Token::Obj {
            size: 8,
            version: Some(0x0100_0008),
        });
        assert_eq!(output(&out, &[]), "08000001+4z");
    }

    #[test]
    fn strings_render_up_to_the_nul_and_pass_their_length() {
        let mut out = Output::string(8, Some(1));
        assert_eq!(output(&out, &[]), "unwritten");
        for (index, byte) in b"GB200\0".iter().enumerate() {
            out.set_byte(index, *byte);
        }
        assert_eq!(output(&out, &[]), "\"GB200\"");
        let mut words = Vec::new();
        out.push_words(&mut words);
        assert_eq!(words[1], 1);
    }

    #[test]
    fn device_handles_render_as_indices_and_field_values_by_id() {
        let mut out = Output::for_token(&Token::Devs(2));
        out.set_u32(0, 0x2000);
        assert_eq!(output(&out, &[0x1000, 0x2000]), "dev1,-");
        let mut fields = Output::for_token(&Token::Fields(vec![
            (1, Stability::Stable),
            (7777, Stability::Stable),
        ]));
        fields.set_u32(24, 0);
        fields.set_u32(32, 1);
        fields.set_u32(FIELD_VALUE_BYTES + 28, 3);
        assert_eq!(output(&fields, &[]), "1:type=0:value=0x1 7777:ret=3");
        let mut words = Vec::new();
        fields.push_words(&mut words);
        assert_eq!(words[0], 2);
    }
}
