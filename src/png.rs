//! Writing PNG files: chunks with their CRCs, and 8-bit RGB images (a character card's placeholder, a
//! figure). Reading is where a format needs it (`rpa::card::png` reads a card's text chunks).

use std::io::Write;

pub const SIGNATURE: [u8; 8] = [137, 80, 78, 71, 13, 10, 26, 10];

/// Appends a chunk (length, type, data, CRC of type and data) to a PNG being written.
pub fn write_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(&crc.finalize().to_be_bytes());
}

/// A PNG of `width` × `height` 8-bit RGB `pixels` (row by row), with `chunks` (kind, data) between its
/// header and its pixels. Deterministic: the same pixels give the same bytes.
pub fn rgb(width: u32, height: u32, pixels: &[u8], chunks: &[(&[u8; 4], &[u8])]) -> std::io::Result<Vec<u8>> {
    let stride = width as usize * 3;
    if pixels.len() != stride * height as usize {
        return Err(std::io::Error::other(format!(
            "{} bytes of pixels for a {width}×{height} RGB image",
            pixels.len()
        )));
    }
    let mut header = Vec::with_capacity(13);
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&height.to_be_bytes());
    // 8-bit RGB, deflate, adaptive filtering, no interlace.
    header.extend_from_slice(&[8, 2, 0, 0, 0]);
    // Every scanline filtered with Sub (each byte minus the one a pixel before): flat areas become
    // zeros, which deflate packs to almost nothing.
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let mut line = Vec::with_capacity(stride + 1);
    for row in pixels.chunks_exact(stride.max(1)).take(height as usize) {
        line.clear();
        line.push(1);
        line.extend(row.iter().enumerate().map(|(i, &b)| if i < 3 { b } else { b.wrapping_sub(row[i - 3]) }));
        z.write_all(&line)?;
    }
    let data = z.finish()?;
    let mut out = SIGNATURE.to_vec();
    write_chunk(&mut out, b"IHDR", &header);
    for (kind, chunk) in chunks {
        write_chunk(&mut out, kind, chunk);
    }
    write_chunk(&mut out, b"IDAT", &data);
    write_chunk(&mut out, b"IEND", &[]);
    Ok(out)
}

/// The width and height a PNG's header gives, if `bytes` start like a PNG.
#[cfg(test)]
pub fn size(bytes: &[u8]) -> Option<(u32, u32)> {
    let rest = bytes.strip_prefix(&SIGNATURE)?;
    let ihdr = rest.get(4..16).filter(|h| &h[..4] == b"IHDR")?;
    let word = |i: usize| u32::from_be_bytes([ihdr[i], ihdr[i + 1], ihdr[i + 2], ihdr[i + 3]]);
    Some((word(4), word(8)))
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn an_image_round_trips_through_its_filtered_scanlines() {
        let (w, h) = (3u32, 2u32);
        let pixels: Vec<u8> = (0..w * h * 3).map(|i| (i * 37 % 256) as u8).collect();
        let file = rgb(w, h, &pixels, &[(b"tEXt", b"k\0v")]).unwrap();
        assert_eq!(size(&file), Some((3, 2)));
        assert_eq!(file, rgb(w, h, &pixels, &[(b"tEXt", b"k\0v")]).unwrap());
        // The IDAT chunk comes after the signature and IHDR (33 bytes) and the tEXt chunk (15).
        let len = u32::from_be_bytes(file[48..52].try_into().unwrap()) as usize;
        assert_eq!(&file[52..56], b"IDAT");
        let mut raw = Vec::new();
        flate2::read::ZlibDecoder::new(&file[56..56 + len]).read_to_end(&mut raw).unwrap();
        let mut decoded = Vec::new();
        for line in raw.chunks(1 + 9) {
            assert_eq!(line[0], 1);
            for (i, &b) in line[1..].iter().enumerate() {
                let left = if i < 3 { 0 } else { decoded[decoded.len() - 3] };
                decoded.push(b.wrapping_add(left));
            }
        }
        assert_eq!(decoded, pixels);
        assert!(rgb(2, 2, &pixels, &[]).is_err());
        assert_eq!(size(b"not a png"), None);
    }
}
