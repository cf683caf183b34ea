//! An HDT file read in place from a memory mapping: control information, the
//! four-section dictionary (plain front coding) and the bitmap triples, as
//! hdt-cpp and the `hdt` crate write them (https://www.rdfhdt.org/hdt-binary-format/).
//! Nothing is copied or rebuilt: opening parses the section headers only.

use crate::bits::{Bits, Packed};
use crate::dict::Section;
use memmap2::Mmap;
use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

/// A read-only file mapping whose bytes live as long as this value. Views
/// into it are handed out as `&'static` slices: they must not outlive it,
/// which the owners guarantee by keeping the `Mapped` next to the views.
pub struct Mapped {
    _map: Option<Mmap>,
    bytes: &'static [u8],
}

impl Mapped {
    pub fn open(path: &Path) -> Result<Self, String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let len = file
            .metadata()
            .map_err(|e| format!("{}: {e}", path.display()))?
            .len();
        if len == 0 {
            return Ok(Mapped {
                _map: None,
                bytes: &[],
            });
        }
        // SAFETY: the files are written once (under a temporary name, then
        // renamed into place) and never modified while mapped.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| format!("{}: {e}", path.display()))?;
        #[cfg(unix)]
        let _ = map.advise(memmap2::Advice::Random);
        let bytes: &'static [u8] = unsafe { std::slice::from_raw_parts(map.as_ptr(), map.len()) };
        Ok(Mapped {
            _map: Some(map),
            bytes,
        })
    }

    #[inline]
    pub fn bytes(&self) -> &'static [u8] {
        self.bytes
    }
}

/// A cursor over the file's bytes while the headers are parsed.
pub struct Reader {
    data: &'static [u8],
    pub pos: usize,
}

impl Reader {
    pub fn new(data: &'static [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    fn byte(&mut self) -> Result<u8, String> {
        let b = *self
            .data
            .get(self.pos)
            .ok_or("unexpected end of the HDT file")?;
        self.pos += 1;
        Ok(b)
    }

    pub fn take(&mut self, n: usize) -> Result<&'static [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.data.len())
            .ok_or("unexpected end of the HDT file")?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// HDT's variable-length integer: 7 bits a byte, least significant first,
    /// the last byte marked by its high bit.
    pub fn vbyte(&mut self) -> Result<u64, String> {
        let mut n: u64 = 0;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift > 63 {
                return Err("variable-length integer too long".into());
            }
            n |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 != 0 {
                return Ok(n);
            }
            shift += 7;
        }
    }

    fn until_nul(&mut self) -> Result<&'static [u8], String> {
        let rest = &self.data[self.pos..];
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or("unterminated string in control information")?;
        self.pos += end + 1;
        Ok(&rest[..end])
    }

    /// `$HDT`, type, format, `key=value;` properties, CRC16.
    pub fn control(&mut self, expected: u8) -> Result<(String, HashMap<String, String>), String> {
        if self.take(4)? != b"$HDT" {
            return Err("not an HDT file (no $HDT cookie)".into());
        }
        let kind = self.byte()?;
        if kind != expected {
            return Err(format!(
                "HDT control information of type {kind}, expected {expected}"
            ));
        }
        let format = String::from_utf8_lossy(self.until_nul()?).into_owned();
        let props = String::from_utf8_lossy(self.until_nul()?).into_owned();
        self.take(2)?;
        let properties = props
            .split(';')
            .filter_map(|kv| {
                kv.split_once('=')
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
            })
            .collect();
        Ok((format, properties))
    }

    /// A Log64 sequence: type 1, bits per entry, count, CRC8, body, CRC32.
    /// Returns the array and where its body's CRC32 sits (a cheap fingerprint).
    pub fn sequence(&mut self) -> Result<(Packed, u32), String> {
        let kind = self.byte()?;
        if kind != 1 {
            return Err(format!("unsupported HDT sequence type {kind}"));
        }
        let width = self.byte()? as u32;
        let len = self.vbyte()? as usize;
        self.byte()?; // CRC8
        let body = self.take((width as usize * len).div_ceil(8))?;
        let crc = u32::from_le_bytes(self.take(4)?.try_into().unwrap());
        // the view extends to the end of the file so that reads near the end of
        // the body stay on the fast path (the extra bytes are masked off)
        let start = self.pos - 4 - body.len();
        Ok((Packed::new(&self.data[start..], width, len)?, crc))
    }

    /// A Bitmap375: type 1, bit count, CRC8, body, CRC32.
    pub fn bitmap(&mut self) -> Result<Bits, String> {
        let kind = self.byte()?;
        if kind != 1 {
            return Err(format!("unsupported HDT bitmap type {kind}"));
        }
        let len = self.vbyte()? as usize;
        self.byte()?; // CRC8
        let body = self.take(len.div_ceil(8))?;
        self.take(4)?;
        Bits::new(body, len)
    }
}

/// The parsed file: its dictionary sections and bitmap triples (SPO order).
pub struct Hdt {
    pub map: Mapped,
    pub shared: Section,
    pub subjects: Section,
    pub predicates: Section,
    pub objects: Section,
    pub bitmap_y: Bits,
    pub bitmap_z: Bits,
    pub seq_y: Packed,
    pub seq_z: Packed,
    /// CRC32s of the two sequences' bodies: identifies the build for the side index
    pub fingerprint: u64,
}

impl Hdt {
    pub fn open(path: &Path) -> Result<Self, String> {
        let map = Mapped::open(path)?;
        let mut r = Reader::new(map.bytes());
        r.control(1)?;
        let (_, header) = r.control(2)?;
        let length: usize = header
            .get("length")
            .and_then(|v| v.parse().ok())
            .ok_or("HDT header without a length")?;
        r.take(length)?;
        let (format, _) = r.control(3)?;
        if format != "<http://purl.org/HDT/hdt#dictionaryFour>" {
            return Err(format!("unsupported HDT dictionary {format}"));
        }
        let shared = Section::read(&mut r)?;
        let subjects = Section::read(&mut r)?;
        let predicates = Section::read(&mut r)?;
        let objects = Section::read(&mut r)?;
        let (format, props) = r.control(4)?;
        if format != "<http://purl.org/HDT/hdt#triplesBitmap>" {
            return Err(format!("unsupported HDT triples {format}"));
        }
        if props.get("order").map(String::as_str) != Some("1") {
            return Err("only SPO-ordered HDT triples are supported".into());
        }
        let bitmap_y = r.bitmap()?;
        let bitmap_z = r.bitmap()?;
        let (seq_y, crc_y) = r.sequence()?;
        let (seq_z, crc_z) = r.sequence()?;
        // the `hdt` crate writes bitmaps rounded up to whole 64-bit words: the
        // sequences give the real lengths
        if seq_y.len() > bitmap_y.len() || seq_z.len() > bitmap_z.len() {
            return Err("HDT triples: bitmaps shorter than their sequences".into());
        }
        let bitmap_y = bitmap_y.truncated(seq_y.len());
        let bitmap_z = bitmap_z.truncated(seq_z.len());
        let fingerprint = ((crc_y as u64) << 32) | crc_z as u64;
        Ok(Hdt {
            map,
            shared,
            subjects,
            predicates,
            objects,
            bitmap_y,
            bitmap_z,
            seq_y,
            seq_z,
            fingerprint,
        })
    }

    pub fn triples(&self) -> u64 {
        self.seq_z.len() as u64
    }

    pub fn file_len(&self) -> u64 {
        self.map.bytes().len() as u64
    }
}
