//! PNG files as character cards use them: the card's JSON, base64-encoded, in a `tEXt` or `zTXt` chunk
//! named `chara` (V2) or `ccv3` (V3). Reading checks the signature and every chunk's CRC and caps the
//! text a chunk may hold (after decompression). Writing puts a card into the PNG it came in (every other
//! chunk copied byte for byte, only the card's text chunks replaced), or into a small solid-colour image
//! when there is none.

use std::io::Read;

use crate::png::SIGNATURE;

/// The most text a card chunk may hold (zTXt: after decompression): the base64 of a card of
/// [`super::MAX_JSON`] bytes, with room for line breaks.
pub const MAX_TEXT: usize = 3 << 20;

/// The card keywords, the one preferred first: a V3 writer keeps a V2 `chara` beside its `ccv3`.
const KEYWORDS: [&str; 2] = ["ccv3", "chara"];

struct Chunk<'a> {
    kind: [u8; 4],
    data: &'a [u8],
    /// The whole chunk as stored: length, type, data, CRC.
    raw: &'a [u8],
}

/// Whether `bytes` start with the PNG signature.
pub fn is_png(bytes: &[u8]) -> bool {
    bytes.starts_with(&SIGNATURE)
}

/// The chunks of a PNG up to its IEND, each with its CRC checked.
fn chunks(bytes: &[u8]) -> Result<Vec<Chunk<'_>>, String> {
    let mut rest = bytes
        .strip_prefix(&SIGNATURE)
        .ok_or("not a PNG file: its first 8 bytes are not the PNG signature")?;
    let mut offset = SIGNATURE.len();
    let mut out = Vec::new();
    loop {
        let Some((head, after)) = rest.split_first_chunk::<8>() else {
            return Err(format!("truncated at byte {offset}: no IEND chunk"));
        };
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let kind = [head[4], head[5], head[6], head[7]];
        if !kind.iter().all(u8::is_ascii_alphabetic) {
            return Err(format!("byte {offset}: not a chunk type: {:?}", String::from_utf8_lossy(&kind)));
        }
        let name = String::from_utf8_lossy(&kind).into_owned();
        if after.len() < len.saturating_add(4) {
            return Err(format!("chunk {name} at byte {offset} is truncated ({len} bytes announced)"));
        }
        let (data, after) = after.split_at(len);
        let stored = u32::from_be_bytes([after[0], after[1], after[2], after[3]]);
        let mut crc = crc32fast::Hasher::new();
        crc.update(&kind);
        crc.update(data);
        let computed = crc.finalize();
        if stored != computed {
            return Err(format!(
                "chunk {name} at byte {offset}: CRC mismatch (stored {stored:08x}, computed {computed:08x}): the file is damaged"
            ));
        }
        out.push(Chunk {
            kind,
            data,
            raw: &bytes[offset..offset + 12 + len],
        });
        if &kind == b"IEND" {
            return Ok(out);
        }
        rest = &after[4..];
        offset += 12 + len;
    }
}

/// The text of a tEXt or zTXt chunk named `keyword`, if this is one; at most [`MAX_TEXT`] bytes.
fn text_of(chunk: &Chunk, keyword: &str) -> Option<Result<String, String>> {
    let zipped = match &chunk.kind {
        b"tEXt" => false,
        b"zTXt" => true,
        _ => return None,
    };
    let nul = chunk.data.iter().position(|b| *b == 0)?;
    if !chunk.data[..nul].eq_ignore_ascii_case(keyword.as_bytes()) {
        return None;
    }
    let body = &chunk.data[nul + 1..];
    let kind = String::from_utf8_lossy(&chunk.kind);
    let too_long = |what: &str| format!("{kind} chunk {keyword}: {what} more than the {MAX_TEXT} bytes allowed");
    let bytes = if zipped {
        let Some((&method, compressed)) = body.split_first() else {
            return Some(Err(format!("{kind} chunk {keyword} is empty")));
        };
        if method != 0 {
            return Some(Err(format!("{kind} chunk {keyword}: unknown compression method {method}")));
        }
        let mut out = Vec::new();
        let limit = MAX_TEXT as u64 + 1;
        if let Err(e) = flate2::read::ZlibDecoder::new(compressed).take(limit).read_to_end(&mut out) {
            return Some(Err(format!("{kind} chunk {keyword} does not decompress: {e}")));
        }
        if out.len() > MAX_TEXT {
            return Some(Err(too_long("decompresses to")));
        }
        out
    } else {
        if body.len() > MAX_TEXT {
            return Some(Err(too_long(&format!("{} bytes of text is", body.len()))));
        }
        body.to_vec()
    };
    // PNG text is Latin-1 (a card's base64 is ASCII).
    Some(Ok(bytes.into_iter().map(char::from).collect()))
}

/// The card a PNG carries: `(keyword, base64 text)` of its `ccv3` chunk if it has one, else of its
/// `chara` chunk.
pub fn card_text(bytes: &[u8]) -> Result<(&'static str, String), String> {
    let chunks = chunks(bytes)?;
    for keyword in KEYWORDS {
        if let Some(text) = chunks.iter().find_map(|c| text_of(c, keyword)) {
            return text.map(|t| (keyword, t));
        }
    }
    Err("no character card in it (no tEXt or zTXt chunk named chara or ccv3)".into())
}

/// Whether a chunk is one of a card's text chunks (tEXt, zTXt or iTXt named `chara` or `ccv3`).
fn is_card_text(chunk: &Chunk) -> bool {
    matches!(&chunk.kind, b"tEXt" | b"zTXt" | b"iTXt")
        && chunk.data.iter().position(|b| *b == 0).is_some_and(|nul| {
            KEYWORDS
                .iter()
                .any(|k| chunk.data[..nul].eq_ignore_ascii_case(k.as_bytes()))
        })
}

/// The chunks of `bytes` that are not a card's text chunks, each as stored (length, type, data, CRC).
pub fn image_chunks(bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    Ok(chunks(bytes)?
        .into_iter()
        .filter(|c| !is_card_text(c))
        .map(|c| c.raw)
        .collect())
}

/// `original` (a PNG) carrying `texts` (keyword, ASCII text) as its card: every chunk copied byte for
/// byte except the card's text chunks, which are left out, and the new ones put just before IEND
/// (where SillyTavern puts them).
pub fn with_card(original: &[u8], texts: &[(&str, String)]) -> Result<Vec<u8>, String> {
    let kept = image_chunks(original)?;
    let mut out = SIGNATURE.to_vec();
    let (iend, rest) = kept.split_last().ok_or("a PNG without chunks")?;
    for raw in rest {
        out.extend_from_slice(raw);
    }
    for (keyword, text) in texts {
        crate::png::write_chunk(&mut out, b"tEXt", &[keyword.as_bytes(), &[0], text.as_bytes()].concat());
    }
    out.extend_from_slice(iend);
    Ok(out)
}

/// A 64×64 PNG of one colour carrying `texts` (keyword, ASCII text such as base64) in tEXt chunks.
pub fn with_texts(texts: &[(&str, String)]) -> std::io::Result<Vec<u8>> {
    const SIDE: u32 = 64;
    const COLOUR: [u8; 3] = [0x4a, 0x5d, 0x7e];
    let pixels = COLOUR.repeat((SIDE * SIDE) as usize);
    let chunks: Vec<Vec<u8>> = texts
        .iter()
        .map(|(keyword, text)| [keyword.as_bytes(), &[0], text.as_bytes()].concat())
        .collect();
    let chunks: Vec<(&[u8; 4], &[u8])> = chunks.iter().map(|c| (b"tEXt", c.as_slice())).collect();
    crate::png::rgb(SIDE, SIDE, &pixels, &chunks)
}


#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write;

    use super::*;
    use crate::png::write_chunk;

    /// A PNG of the given chunks (kind, data), with right CRCs.
    pub(crate) fn png(chunks: &[(&[u8; 4], Vec<u8>)]) -> Vec<u8> {
        let mut out = SIGNATURE.to_vec();
        for (kind, data) in chunks {
            write_chunk(&mut out, kind, data);
        }
        write_chunk(&mut out, b"IEND", &[]);
        out
    }

    pub(crate) fn text(keyword: &str, text: &str) -> (&'static [u8; 4], Vec<u8>) {
        (b"tEXt", [keyword.as_bytes(), &[0], text.as_bytes()].concat())
    }

    pub(crate) fn ztext(keyword: &str, text: &[u8]) -> (&'static [u8; 4], Vec<u8>) {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(text).unwrap();
        (b"zTXt", [keyword.as_bytes(), &[0, 0], &z.finish().unwrap()].concat())
    }

    #[test]
    fn reads_text_and_compressed_text_preferring_ccv3() {
        let file = png(&[text("chara", "djI="), (b"IDAT", vec![1, 2, 3])]);
        assert_eq!(card_text(&file).unwrap(), ("chara", "djI=".to_string()));
        let file = png(&[text("chara", "djI="), ztext("ccv3", b"djM="), text("Comment", "hi")]);
        assert_eq!(card_text(&file).unwrap(), ("ccv3", "djM=".to_string()));
        let written = with_texts(&[("chara", "eyJ9".into())]).unwrap();
        assert_eq!(card_text(&written).unwrap(), ("chara", "eyJ9".to_string()));
        // Every PNG ends with the same IEND chunk, CRC included.
        assert!(written.ends_with(&[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xae, 0x42, 0x60, 0x82]));
    }

    #[test]
    fn a_card_replaces_only_the_card_chunks_of_its_png() {
        let original = png(&[
            (b"IHDR", vec![0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0, 0, 0]),
            text("chara", "b2xk"),
            (b"pHYs", vec![0, 0, 11, 19, 0, 0, 11, 19, 1]),
            ztext("ccv3", b"b2xk"),
            text("Comment", "kept"),
            (b"IDAT", vec![1, 2, 3]),
        ]);
        let written = with_card(&original, &[("chara", "bmV3".into()), ("ccv3", "bmV3Mw==".into())]).unwrap();
        assert_eq!(card_text(&written).unwrap(), ("ccv3", "bmV3Mw==".to_string()));
        assert_eq!(image_chunks(&written).unwrap(), image_chunks(&original).unwrap());
        let kinds: Vec<[u8; 4]> = chunks(&written).unwrap().iter().map(|c| c.kind).collect();
        assert_eq!(
            kinds,
            [*b"IHDR", *b"pHYs", *b"tEXt", *b"IDAT", *b"tEXt", *b"tEXt", *b"IEND"],
            "the image's chunks in their order, the card's just before IEND"
        );
        assert!(with_card(b"not a png", &[]).is_err());
    }

    #[test]
    fn damaged_files_say_what_is_wrong() {
        let e = card_text(b"GIF89a....").unwrap_err();
        assert!(e.contains("PNG signature"), "{e}");
        let e = card_text(&png(&[text("Comment", "x")])).unwrap_err();
        assert!(e.contains("no character card"), "{e}");
        let mut file = png(&[text("chara", "djI=")]);
        file[8 + 8 + 6] ^= 1; // a byte of the tEXt chunk's data
        let e = card_text(&file).unwrap_err();
        assert!(e.contains("chunk tEXt at byte 8: CRC mismatch"), "{e}");
        let file = png(&[text("chara", "djI=")]);
        let e = card_text(&file[..file.len() - 12]).unwrap_err();
        assert!(e.contains("no IEND"), "{e}");
        let e = card_text(&file[..20]).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
    }

    #[test]
    fn card_chunks_are_capped_before_and_after_decompression() {
        let big = "A".repeat(MAX_TEXT + 1);
        let e = card_text(&png(&[text("chara", &big)])).unwrap_err();
        assert!(e.contains("more than the 3145728 bytes allowed"), "{e}");
        let e = card_text(&png(&[ztext("chara", big.as_bytes())])).unwrap_err();
        assert!(e.contains("decompresses to more than"), "{e}");
        let ok = "A".repeat(MAX_TEXT);
        assert_eq!(card_text(&png(&[ztext("chara", ok.as_bytes())])).unwrap().1.len(), MAX_TEXT);
    }
}
