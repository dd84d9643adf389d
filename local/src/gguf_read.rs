//! The GGUF container (versions 2 and 3, as llama.cpp writes it): the header, the metadata key/values,
//! the tensor descriptions, and each tensor's bytes on demand.
//!
//! Everything read is checked against the file's length before anything is allocated, so a truncated
//! or malformed file is an error that names what is wrong and where, never a panic or an allocation
//! the file cannot back. The layout (all little-endian):
//! `"GGUF"`, version u32, tensor count u64, metadata count u64, the metadata (key string, type u32,
//! value), the tensor descriptions (name string, dimension count u32, dimensions u64 each, ggml type
//! u32, offset u64), padding to the alignment, then the tensors' data.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};

use incharacter_engine::Format;

/// The alignment of the data section when `general.alignment` does not say.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Arrays nest at most this deep (llama.cpp writes arrays of scalars and strings only); deeper is
/// refused rather than followed down the stack.
const MAX_DEPTH: usize = 8;

/// At most this many array elements in all of a file's metadata: each is held as a [`Value`] of 32
/// bytes, so a file of one-byte elements would otherwise take 32 times its size in memory. Gemma 3's
/// tokenizer, the largest known (262,144 tokens with their scores and types), holds under 800,000.
const MAX_METADATA_ELEMENTS: u64 = 1 << 22;

/// The longest string read (a chat template, the longest known, holds tens of kilobytes).
const MAX_STRING: u64 = 16 << 20;

/// At most this many tensors (the largest models hold tens of thousands).
const MAX_TENSORS: u64 = 1 << 20;

/// What is reserved for the header's counts before they are read: the rest grows as they are.
const RESERVED: u64 = 4096;

/// At most this many dimensions per tensor (ggml's `GGML_MAX_DIMS`).
const MAX_DIMS: usize = 4;

/// What makes a file unreadable as GGUF.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not a GGUF file (it starts with \"{}\", not \"GGUF\")", .0.escape_ascii())]
    NotGguf([u8; 4]),
    #[error("GGUF version {0} is not supported (2 and 3 are)")]
    Version(u32),
    #[error("the file ends inside {what} (byte {at} of {len})")]
    Truncated { what: String, at: u64, len: u64 },
    #[error("{0}")]
    Malformed(String),
}

/// A metadata value, of any of GGUF's types.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(Vec<Value>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl Value {
    /// The text of a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// A whole number of any integer type that fits in a u32 (writers differ on the type of counts
    /// and token types: u32 for some, i32 for others).
    pub fn as_u32(&self) -> Option<u32> {
        match *self {
            Value::U8(x) => Some(u32::from(x)),
            Value::I8(x) => u32::try_from(x).ok(),
            Value::U16(x) => Some(u32::from(x)),
            Value::I16(x) => u32::try_from(x).ok(),
            Value::U32(x) => Some(x),
            Value::I32(x) => u32::try_from(x).ok(),
            Value::U64(x) => u32::try_from(x).ok(),
            Value::I64(x) => u32::try_from(x).ok(),
            _ => None,
        }
    }

    /// A float value (an f64 narrowed).
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(x) => Some(x),
            Value::F64(x) => Some(x as f32),
            _ => None,
        }
    }

    /// The truth of a boolean value.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The elements of an array value (the token list, the merges, the scores).
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// One tensor's description: where its bytes are and how to read them.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    /// Outermost dimension first (rows, then the values of a row), the reverse of the file's order.
    pub shape: Vec<usize>,
    pub format: Format,
    /// From the start of the data section.
    pub offset: u64,
    /// Bytes of data.
    pub size: u64,
}

/// A GGUF file's header, metadata and tensor descriptions (the tensors' data stays in the file).
#[derive(Debug, Clone, Default)]
pub struct Gguf {
    pub metadata: HashMap<String, Value>,
    pub tensors: Vec<TensorInfo>,
    /// Where the tensors' data starts, from the start of the file.
    pub data_offset: u64,
}

/// ggml's type numbers, for the types this reader knows the layout of.
fn format_of(ggml_type: u32) -> Option<Format> {
    Some(match ggml_type {
        0 => Format::F32,
        1 => Format::F16,
        2 => Format::Q4_0,
        3 => Format::Q4_1,
        6 => Format::Q5_0,
        7 => Format::Q5_1,
        8 => Format::Q8_0,
        9 => Format::Q8_1,
        10 => Format::Q2K,
        11 => Format::Q3K,
        12 => Format::Q4K,
        13 => Format::Q5K,
        14 => Format::Q6K,
        15 => Format::Q8K,
        30 => Format::BF16,
        _ => return None,
    })
}

/// A reader that knows how many bytes are left, so every length is checked before it is trusted.
struct Bounded<'a, R> {
    inner: &'a mut R,
    at: u64,
    len: u64,
    /// Metadata array elements read so far.
    elements: u64,
}

impl<R: Read> Bounded<'_, R> {
    fn left(&self) -> u64 {
        self.len.saturating_sub(self.at)
    }

    /// `n` bytes of `what`, after checking the file holds them.
    fn bytes(&mut self, n: u64, what: &dyn Fn() -> String) -> Result<Vec<u8>, GgufError> {
        // A key, a string value or a tensor name: no real one is near this long, and a length a
        // (sparse) file could hold would otherwise be allocated whole before it is read.
        if n > MAX_STRING {
            return Err(GgufError::Malformed(format!(
                "{} claims {n} bytes; a string of a model holds at most {MAX_STRING}",
                what()
            )));
        }
        if n > self.left() {
            return Err(GgufError::Truncated {
                what: what(),
                at: self.at,
                len: self.len,
            });
        }
        let mut buffer = vec![0; n as usize];
        self.inner.read_exact(&mut buffer)?;
        self.at += n;
        Ok(buffer)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N], GgufError> {
        let bytes = self.bytes(N as u64, what)?;
        Ok(bytes.try_into().unwrap_or([0; N]))
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A length-prefixed string (trailing NULs, which some writers add, dropped; invalid UTF-8
    /// replaced rather than refused, as llama.cpp's tools print it).
    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String, GgufError> {
        let n = self.u64(what)?;
        let mut bytes = self.bytes(n, what)?;
        while bytes.last() == Some(&0) {
            bytes.pop();
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A value of GGUF type `kind`, `depth` arrays deep.
    fn value(&mut self, kind: u32, depth: usize, what: &dyn Fn() -> String) -> Result<Value, GgufError> {
        Ok(match kind {
            0 => Value::U8(u8::from_le_bytes(self.array(what)?)),
            1 => Value::I8(i8::from_le_bytes(self.array(what)?)),
            2 => Value::U16(u16::from_le_bytes(self.array(what)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(what)?)),
            4 => Value::U32(u32::from_le_bytes(self.array(what)?)),
            5 => Value::I32(i32::from_le_bytes(self.array(what)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(what)?)),
            7 => match self.array::<1>(what)? {
                [0] => Value::Bool(false),
                [1] => Value::Bool(true),
                [b] => return Err(GgufError::Malformed(format!("{}: {b} is not a boolean", what()))),
            },
            8 => Value::String(self.string(what)?),
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(GgufError::Malformed(format!(
                        "{}: arrays nested more than {MAX_DEPTH} deep",
                        what()
                    )));
                }
                let element = self.u32(what)?;
                let count = self.u64(what)?;
                // Every element takes at least one byte: a count the file cannot hold is refused
                // before anything is reserved for it.
                if count > self.left() {
                    return Err(GgufError::Truncated {
                        what: format!("{} (an array of {count} elements)", what()),
                        at: self.at,
                        len: self.len,
                    });
                }
                self.elements = self.elements.saturating_add(count);
                if self.elements > MAX_METADATA_ELEMENTS {
                    return Err(GgufError::Malformed(format!(
                        "{}: an array of {count} elements brings the metadata past {MAX_METADATA_ELEMENTS} \
                         array elements, more than any model's tokenizer holds",
                        what()
                    )));
                }
                let mut items = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    items.push(self.value(element, depth + 1, what)?);
                }
                Value::Array(items)
            }
            10 => Value::U64(u64::from_le_bytes(self.array(what)?)),
            11 => Value::I64(i64::from_le_bytes(self.array(what)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(what)?)),
            other => return Err(GgufError::Malformed(format!("{}: unknown value type {other}", what()))),
        })
    }

    /// The `index`th tensor description (its data's bounds are checked by the caller).
    fn tensor(&mut self, index: u64) -> Result<TensorInfo, GgufError> {
        let name = self.string(&|| format!("the name of tensor {index}"))?;
        let what = || format!("the description of tensor {name}");
        let dims = self.u32(&what)? as usize;
        if dims == 0 || dims > MAX_DIMS {
            return Err(GgufError::Malformed(format!(
                "tensor {name} has {dims} dimensions (1 to {MAX_DIMS} allowed)"
            )));
        }
        let mut shape = Vec::with_capacity(dims);
        for _ in 0..dims {
            let d = self.u64(&what)?;
            let d = usize::try_from(d).map_err(|_| GgufError::Malformed(format!("tensor {name}: dimension {d}")))?;
            shape.push(d);
        }
        shape.reverse();
        let ggml_type = self.u32(&what)?;
        let format = format_of(ggml_type).ok_or_else(|| {
            GgufError::Malformed(format!(
                "tensor {name} has ggml type {ggml_type}, which is not supported"
            ))
        })?;
        let offset = self.u64(&what)?;
        let block = format.block();
        if !shape.last().is_some_and(|row| row.is_multiple_of(block)) {
            return Err(GgufError::Malformed(format!(
                "tensor {name} of shape {shape:?} is not whole {format:?} blocks"
            )));
        }
        let size = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .and_then(|values| (values / block).checked_mul(format.bytes(block)))
            .ok_or_else(|| {
                GgufError::Malformed(format!(
                    "tensor {name} of shape {shape:?} has more bytes than a file can"
                ))
            })? as u64;
        Ok(TensorInfo {
            name,
            shape,
            format,
            offset,
            size,
        })
    }
}

/// Why the tensors' data cannot be the weights they describe, if it cannot: a tensor that does not
/// start on the file's alignment (llama.cpp refuses it, and a writer that wrote it wrote its own
/// layout), or two whose bytes overlap (one tensor's weights read as another's make a model that runs
/// and writes garbage). Tensors of no bytes take no room.
fn layout_problem(tensors: &[TensorInfo], alignment: u64) -> Option<String> {
    if let Some(t) = tensors.iter().find(|t| !t.offset.is_multiple_of(alignment)) {
        return Some(format!(
            "tensor {}'s data starts at offset {} of the data, not a multiple of the file's alignment ({alignment} \
             bytes)",
            t.name, t.offset
        ));
    }
    let mut placed: Vec<&TensorInfo> = tensors.iter().filter(|t| t.size > 0).collect();
    placed.sort_by_key(|t| t.offset);
    placed
        .windows(2)
        .find(|w| w[0].offset + w[0].size > w[1].offset)
        .map(|w| {
            format!(
                "tensors {} and {} overlap: bytes {}..{} and {}..{} of the data",
                w[0].name,
                w[1].name,
                w[0].offset,
                w[0].offset + w[0].size,
                w[1].offset,
                w[1].offset + w[1].size
            )
        })
}

impl Gguf {
    /// The header, metadata and tensor descriptions of the GGUF in `reader` (from its start).
    pub fn read<R: Read + Seek>(reader: &mut R) -> Result<Gguf, GgufError> {
        let len = reader.seek(SeekFrom::End(0))?;
        reader.seek(SeekFrom::Start(0))?;
        let mut file = Bounded {
            inner: reader,
            at: 0,
            len,
            elements: 0,
        };
        let magic: [u8; 4] = file.array(&|| "the magic number".into())?;
        if &magic != b"GGUF" {
            return Err(GgufError::NotGguf(magic));
        }
        let version = file.u32(&|| "the version".into())?;
        if !matches!(version, 2 | 3) {
            return Err(GgufError::Version(version));
        }
        let tensors = file.u64(&|| "the tensor count".into())?;
        let entries = file.u64(&|| "the metadata count".into())?;
        // A metadata entry takes at least 13 bytes, a tensor description at least 24.
        if entries.saturating_mul(13).saturating_add(tensors.saturating_mul(24)) > file.left() {
            return Err(GgufError::Truncated {
                what: format!("the header's {entries} metadata entries and {tensors} tensor descriptions"),
                at: file.at,
                len,
            });
        }
        if tensors > MAX_TENSORS || entries > MAX_METADATA_ELEMENTS {
            return Err(GgufError::Malformed(format!(
                "the header claims {tensors} tensors and {entries} metadata entries; a model has at most \
                 {MAX_TENSORS} and {MAX_METADATA_ELEMENTS}"
            )));
        }
        let mut metadata = HashMap::with_capacity(entries.min(RESERVED) as usize);
        for index in 0..entries {
            let key = file.string(&|| format!("the key of metadata entry {index}"))?;
            let what = || format!("metadata {key}");
            let kind = file.u32(&what)?;
            let value = file.value(kind, 0, &what)?;
            if metadata.insert(key.clone(), value).is_some() {
                return Err(GgufError::Malformed(format!("metadata {key} appears twice")));
            }
        }
        let mut infos: Vec<TensorInfo> = Vec::with_capacity(tensors.min(RESERVED) as usize);
        let mut names = std::collections::HashSet::with_capacity(tensors.min(RESERVED) as usize);
        for index in 0..tensors {
            let info = file.tensor(index)?;
            if !names.insert(info.name.clone()) {
                return Err(GgufError::Malformed(format!("tensor {} appears twice", info.name)));
            }
            infos.push(info);
        }
        let alignment = match metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(v) => match v.as_u32() {
                Some(a) if a.is_power_of_two() => u64::from(a),
                _ => {
                    return Err(GgufError::Malformed(format!(
                        "general.alignment {v:?} is not a power of two"
                    )));
                }
            },
        };
        let data_offset = file.at.div_ceil(alignment) * alignment;
        for t in &infos {
            let end = data_offset.checked_add(t.offset).and_then(|s| s.checked_add(t.size));
            if end.is_none_or(|end| end > len) {
                return Err(GgufError::Truncated {
                    what: format!("tensor {} ({} bytes at data offset {})", t.name, t.size, t.offset),
                    at: len,
                    len,
                });
            }
        }
        layout_problem(&infos, alignment).map_or(Ok(()), |why| Err(GgufError::Malformed(why)))?;
        Ok(Gguf {
            metadata,
            tensors: infos,
            data_offset,
        })
    }

    /// The metadata value under `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.get(key)
    }

    /// The description of the tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The bytes of the tensor named `name`, read from `reader` (the file this was read from).
    pub fn tensor_bytes<R: Read + Seek>(&self, reader: &mut R, name: &str) -> Result<(TensorInfo, Vec<u8>), GgufError> {
        let info = self
            .tensor(name)
            .ok_or_else(|| GgufError::Malformed(format!("the file has no tensor {name}")))?;
        reader.seek(SeekFrom::Start(self.data_offset + info.offset))?;
        // Reserved as a request the system may refuse: a size no memory holds is an error, not an
        // abort.
        let size = usize::try_from(info.size).unwrap_or(usize::MAX);
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(size)
            .map_err(|_| GgufError::Malformed(format!("tensor {name} ({} bytes) does not fit in memory", info.size)))?;
        bytes.resize(size, 0);
        reader.read_exact(&mut bytes)?;
        Ok((info.clone(), bytes))
    }
}

/// GGUF files written in memory, for the tests of the modules that read them.
#[cfg(test)]
pub(crate) mod write {
    use super::*;

    /// GGUF bytes written by hand, as llama.cpp's `gguf.py` writes them.
    #[derive(Default)]
    pub(crate) struct Writer(pub(crate) Vec<u8>);

    impl Writer {
        pub(crate) fn u32(&mut self, x: u32) -> &mut Self {
            self.0.extend(x.to_le_bytes());
            self
        }
        pub(crate) fn u64(&mut self, x: u64) -> &mut Self {
            self.0.extend(x.to_le_bytes());
            self
        }
        pub(crate) fn string(&mut self, s: &str) -> &mut Self {
            self.u64(s.len() as u64);
            self.0.extend(s.as_bytes());
            self
        }
        pub(crate) fn value(&mut self, v: &Value) -> &mut Self {
            match v {
                Value::U8(x) => self.0.extend(x.to_le_bytes()),
                Value::I8(x) => self.0.extend(x.to_le_bytes()),
                Value::U16(x) => self.0.extend(x.to_le_bytes()),
                Value::I16(x) => self.0.extend(x.to_le_bytes()),
                Value::U32(x) => self.0.extend(x.to_le_bytes()),
                Value::I32(x) => self.0.extend(x.to_le_bytes()),
                Value::F32(x) => self.0.extend(x.to_le_bytes()),
                Value::Bool(x) => self.0.push(u8::from(*x)),
                Value::String(s) => {
                    self.string(s);
                }
                Value::Array(items) => {
                    self.u32(items.first().map_or(0, kind)).u64(items.len() as u64);
                    for item in items {
                        self.value(item);
                    }
                }
                Value::U64(x) => self.0.extend(x.to_le_bytes()),
                Value::I64(x) => self.0.extend(x.to_le_bytes()),
                Value::F64(x) => self.0.extend(x.to_le_bytes()),
            }
            self
        }
    }

    pub(crate) fn kind(v: &Value) -> u32 {
        match v {
            Value::U8(_) => 0,
            Value::I8(_) => 1,
            Value::U16(_) => 2,
            Value::I16(_) => 3,
            Value::U32(_) => 4,
            Value::I32(_) => 5,
            Value::F32(_) => 6,
            Value::Bool(_) => 7,
            Value::String(_) => 8,
            Value::Array(_) => 9,
            Value::U64(_) => 10,
            Value::I64(_) => 11,
            Value::F64(_) => 12,
        }
    }

    /// A GGUF of `metadata` and `tensors` (name, shape outermost first, ggml type, data), aligned to 32.
    pub(crate) fn gguf(metadata: &[(&str, Value)], tensors: &[(&str, &[u64], u32, &[u8])]) -> Vec<u8> {
        let mut w = Writer::default();
        w.0.extend(b"GGUF");
        w.u32(3).u64(tensors.len() as u64).u64(metadata.len() as u64);
        for (k, v) in metadata {
            w.string(k).u32(kind(v)).value(v);
        }
        let mut offset = 0;
        for (name, shape, ggml_type, data) in tensors {
            w.string(name).u32(shape.len() as u32);
            for d in shape.iter().rev() {
                w.u64(*d);
            }
            w.u32(*ggml_type).u64(offset);
            offset = (offset + data.len() as u64).div_ceil(DEFAULT_ALIGNMENT) * DEFAULT_ALIGNMENT;
        }
        for (_, _, _, data) in tensors {
            while !(w.0.len() as u64).is_multiple_of(DEFAULT_ALIGNMENT) {
                w.0.push(0);
            }
            w.0.extend(*data);
        }
        w.0
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::write::{Writer, kind};
    use super::*;

    /// A GGUF with `metadata` and two tensors: an F32 vector of 4 and a Q8_0 2×32 matrix.
    fn file(version: u32, metadata: &[(&str, Value)], alignment: u64) -> Vec<u8> {
        let mut w = Writer::default();
        w.0.extend(b"GGUF");
        w.u32(version).u64(2).u64(metadata.len() as u64);
        for (k, v) in metadata {
            w.string(k).u32(kind(v)).value(v);
        }
        w.string("norm.weight").u32(1).u64(4).u32(0).u64(0);
        w.string("token_embd.weight")
            .u32(2)
            .u64(32)
            .u64(2)
            .u32(8)
            .u64(alignment);
        while !(w.0.len() as u64).is_multiple_of(alignment) {
            w.0.push(0);
        }
        for x in [1f32, -2., 0.5, 4.] {
            w.0.extend(x.to_le_bytes());
        }
        w.0.resize(w.0.len() + alignment as usize - 16, 0);
        for row in 0..2u8 {
            w.0.extend([0x00, 0x38]); // 0.5 as an f16
            w.0.extend((0..32).map(|i: u8| i.wrapping_sub(row * 40)));
        }
        w.0
    }

    fn every_type() -> Vec<(&'static str, Value)> {
        vec![
            ("a.u8", Value::U8(200)),
            ("a.i8", Value::I8(-100)),
            ("a.u16", Value::U16(60_000)),
            ("a.i16", Value::I16(-30_000)),
            ("a.u32", Value::U32(4_000_000_000)),
            ("a.i32", Value::I32(-2_000_000_000)),
            ("a.f32", Value::F32(1.5)),
            ("a.bool", Value::Bool(true)),
            ("a.string", Value::String("héllo".into())),
            ("a.u64", Value::U64(1 << 40)),
            ("a.i64", Value::I64(-(1 << 40))),
            ("a.f64", Value::F64(-0.25)),
            (
                "a.strings",
                Value::Array(vec![Value::String("x".into()), Value::String("".into())]),
            ),
            ("a.floats", Value::Array(vec![Value::F32(1.), Value::F32(-1.)])),
            ("a.empty", Value::Array(vec![])),
            (
                "a.nested",
                Value::Array(vec![
                    Value::Array(vec![Value::I32(1), Value::I32(2)]),
                    Value::Array(vec![Value::I32(3)]),
                ]),
            ),
        ]
    }

    #[test]
    fn every_metadata_type_and_the_tensors_are_read() {
        for version in [2, 3] {
            let bytes = file(version, &every_type(), DEFAULT_ALIGNMENT);
            let gguf = Gguf::read(&mut Cursor::new(&bytes)).unwrap();
            for (key, value) in every_type() {
                assert_eq!(gguf.get(key), Some(&value), "{key}");
            }
            assert_eq!(gguf.metadata.len(), every_type().len());
            assert_eq!(gguf.get("a.u8").and_then(Value::as_u32), Some(200));
            assert_eq!(gguf.get("a.i8").and_then(Value::as_u32), None);
            assert_eq!(gguf.get("a.f64").and_then(Value::as_f32), Some(-0.25));
            let norm = gguf.tensor("norm.weight").unwrap();
            assert_eq!(
                (norm.shape.as_slice(), norm.format, norm.size),
                (&[4][..], Format::F32, 16)
            );
            let (embd, data) = gguf
                .tensor_bytes(&mut Cursor::new(&bytes), "token_embd.weight")
                .unwrap();
            assert_eq!(
                (embd.shape.as_slice(), embd.format, data.len()),
                (&[2, 32][..], Format::Q8_0, 68)
            );
            let (_, data) = gguf.tensor_bytes(&mut Cursor::new(&bytes), "norm.weight").unwrap();
            assert_eq!(Format::F32.widen(&data).unwrap(), vec![1., -2., 0.5, 4.]);
            assert_eq!(gguf.data_offset % DEFAULT_ALIGNMENT, 0);
        }
    }

    #[test]
    fn the_alignment_is_the_files_own() {
        let bytes = file(3, &[("general.alignment", Value::U32(64))], 64);
        let gguf = Gguf::read(&mut Cursor::new(&bytes)).unwrap();
        assert_eq!(gguf.data_offset % 64, 0);
        let (_, data) = gguf.tensor_bytes(&mut Cursor::new(&bytes), "norm.weight").unwrap();
        assert_eq!(Format::F32.widen(&data).unwrap(), vec![1., -2., 0.5, 4.]);
        let bytes = file(3, &[("general.alignment", Value::U32(48))], 48);
        let e = Gguf::read(&mut Cursor::new(&bytes)).unwrap_err().to_string();
        assert!(e.contains("general.alignment") && e.contains("power of two"), "{e}");
    }

    fn error(bytes: &[u8]) -> String {
        Gguf::read(&mut Cursor::new(bytes)).unwrap_err().to_string()
    }

    #[test]
    fn a_truncated_file_is_refused_wherever_it_ends() {
        let bytes = file(3, &every_type(), DEFAULT_ALIGNMENT);
        for end in 0..bytes.len() {
            let e = error(&bytes[..end]);
            assert!(e.contains("ends inside") || e.contains("not a GGUF file"), "{end}: {e}");
        }
        assert!(error(&bytes[..bytes.len() - 1]).contains("tensor token_embd.weight"));
        assert!(error(&bytes[..30]).contains("the header's 16 metadata entries and 2 tensor descriptions"));
    }

    /// A file of `len` bytes, all zero after `head`: a sparse file, read without holding it.
    struct Sparse {
        head: Vec<u8>,
        len: u64,
        at: u64,
    }

    impl std::io::Read for Sparse {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = (buf.len() as u64).min(self.len - self.at) as usize;
            for (i, b) in buf[..n].iter_mut().enumerate() {
                *b = self.head.get(self.at as usize + i).copied().unwrap_or(0);
            }
            self.at += n as u64;
            Ok(n)
        }
    }

    impl Seek for Sparse {
        fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
            self.at = match to {
                SeekFrom::Start(n) => n,
                SeekFrom::End(d) => self.len.saturating_add_signed(d),
                SeekFrom::Current(d) => self.at.saturating_add_signed(d),
            };
            Ok(self.at)
        }
    }

    #[test]
    fn counts_a_huge_file_could_hold_reserve_nothing_for_themselves() {
        let sparse = |tensors: u64, entries: u64| {
            let mut w = Writer::default();
            w.0.extend(b"GGUF");
            w.u32(3).u64(tensors).u64(entries);
            let mut file = Sparse {
                head: w.0,
                len: 1 << 40,
                at: 0,
            };
            Gguf::read(&mut file).unwrap_err().to_string()
        };
        // A terabyte holds the bytes of ten billion of either: refused before any is reserved (it
        // asked for 720 GB and aborted).
        for (tensors, entries) in [(10_000_000_000, 0), (0, 10_000_000_000)] {
            let e = sparse(tensors, entries);
            assert!(e.contains("a model has at most 1048576 and 4194304"), "{e}");
        }
        // A key claiming half a terabyte: refused, not allocated (it aborted).
        let mut w = Writer::default();
        w.0.extend(b"GGUF");
        w.u32(3).u64(0).u64(1).u64(1 << 39);
        let mut file = Sparse {
            head: w.0,
            len: 1 << 40,
            at: 0,
        };
        let e = Gguf::read(&mut file).unwrap_err().to_string();
        assert!(e.contains("claims 549755813888 bytes"), "{e}");
        // As many as a model may have, of zeros: the first is refused as it is read.
        let e = sparse(MAX_TENSORS, 0);
        assert!(e.contains("tensor  has 0 dimensions"), "{e}");
    }

    #[test]
    fn malformed_files_are_refused_by_what_is_wrong() {
        assert!(error(b"GGML\x03\0\0\0").contains("not a GGUF file"));
        let mut bytes = file(3, &[], DEFAULT_ALIGNMENT);
        bytes[4] = 1;
        assert!(error(&bytes).contains("GGUF version 1 is not supported"));
        // Counts no file of this size could hold: refused before anything is reserved.
        let mut w = Writer::default();
        w.0.extend(b"GGUF");
        w.u32(3).u64(u64::MAX).u64(u64::MAX);
        assert!(error(&w.0).contains("the header's"));
        let huge = |kind: u32| {
            let mut w = Writer::default();
            w.0.extend(b"GGUF");
            w.u32(3).u64(0).u64(1).string("k").u32(kind);
            w
        };
        let mut w = huge(8);
        w.u64(u64::MAX);
        assert!(
            error(&w.0).contains("metadata k claims 18446744073709551615 bytes"),
            "{}",
            error(&w.0)
        );
        let mut w = huge(9);
        w.u32(0).u64(1 << 40);
        assert!(error(&w.0).contains("an array of 1099511627776 elements"));
        // An array the file holds, of more elements than any tokenizer: refused before it is read
        // into 32 bytes an element.
        let mut w = huge(9);
        let count = MAX_METADATA_ELEMENTS + 1;
        w.u32(0).u64(count);
        w.0.resize(w.0.len() + count as usize, 0);
        let e = error(&w.0);
        assert!(e.contains("brings the metadata past 4194304 array elements"), "{e}");
        let mut w = huge(13);
        w.0.extend([0; 16]);
        assert!(error(&w.0).contains("metadata k: unknown value type 13"));
        let mut w = huge(7);
        w.0.extend([2; 16]);
        assert!(error(&w.0).contains("2 is not a boolean"));
        // Arrays of arrays of … deeper than any writer goes.
        let mut w = huge(9);
        for _ in 0..100 {
            w.u32(9).u64(1);
        }
        w.0.extend([0; 64]);
        assert!(error(&w.0).contains("nested more than"));
        // A key twice; a tensor whose type, shape or data is wrong.
        let bytes = file(3, &[("k", Value::U8(1)), ("k", Value::U8(2))], DEFAULT_ALIGNMENT);
        assert!(error(&bytes).contains("metadata k appears twice"));
        let tensor = |dims: &[u64], ggml_type: u32, offset: u64| {
            let mut w = Writer::default();
            w.0.extend(b"GGUF");
            w.u32(3).u64(1).u64(0).string("t").u32(dims.len() as u32);
            for &d in dims {
                w.u64(d);
            }
            w.u32(ggml_type).u64(offset);
            w.0.resize(256, 0);
            error(&w.0)
        };
        assert!(tensor(&[32], 99, 0).contains("tensor t has ggml type 99, which is not supported"));
        assert!(tensor(&[30], 8, 0).contains("is not whole Q8_0 blocks"));
        assert!(tensor(&[1, 1, 1, 1, 1], 0, 0).contains("tensor t has 5 dimensions"));
        assert!(tensor(&[4, u64::MAX], 0, 0).contains("has more bytes than a file can"));
        assert!(tensor(&[32], 0, 1 << 20).contains("ends inside tensor t"));
        assert!(tensor(&[32], 0, u64::MAX).contains("ends inside tensor t"));
    }

    /// Two tensors of 32 F32 values (128 bytes each) at `offsets`, in a file that holds them.
    fn two_tensors(offsets: [u64; 2]) -> Vec<u8> {
        let mut w = Writer::default();
        w.0.extend(b"GGUF");
        w.u32(3).u64(2).u64(0);
        for (name, offset) in ["a", "b"].iter().zip(offsets) {
            w.string(name).u32(1).u64(32).u32(0).u64(offset);
        }
        w.0.resize(1024, 0);
        w.0
    }

    /// Tensor data the reader would take as weights only where the layout is a writer's: aligned, and
    /// each tensor's bytes its own.
    #[test]
    fn misaligned_or_overlapping_tensor_data_is_refused() {
        assert!(Gguf::read(&mut Cursor::new(two_tensors([0, 128]))).is_ok());
        let e = error(&two_tensors([0, 136]));
        assert!(
            e.contains("tensor b's data starts at offset 136 of the data, not a multiple of the file's alignment (32"),
            "{e}"
        );
        let e = error(&two_tensors([0, 0]));
        assert!(e.contains("tensors a and b overlap: bytes 0..128 and 0..128"), "{e}");
        let e = error(&two_tensors([256, 160]));
        assert!(
            e.contains("tensors b and a overlap: bytes 160..288 and 256..384"),
            "{e}"
        );
    }

    #[test]
    fn layout_problems_are_found_whatever_the_order() {
        let t = |name: &str, offset: u64, size: u64| TensorInfo {
            name: name.into(),
            shape: vec![1],
            format: Format::F32,
            offset,
            size,
        };
        assert_eq!(layout_problem(&[t("a", 64, 32), t("b", 0, 64)], 32), None);
        // Tensors of no bytes take no room, wherever they are said to start.
        assert_eq!(layout_problem(&[t("a", 0, 64), t("e", 32, 0)], 32), None);
        assert!(layout_problem(&[t("a", 64, 32), t("b", 0, 65)], 32).is_some_and(|e| e.contains("b and a")));
        assert!(layout_problem(&[t("a", 16, 32)], 32).is_some_and(|e| e.contains("(32 bytes)")));
        assert_eq!(layout_problem(&[t("a", 16, 32)], 16), None);
    }
}
