//! A dictionary section with plain front coding, read in place: strings in
//! byte order, in blocks whose first string is whole and whose others are a
//! shared-prefix length (vbyte) and a NUL-terminated suffix.

use crate::bits::Packed;
use crate::hdt::Reader;
use std::cmp::Ordering;

#[derive(Clone, Copy)]
pub struct Section {
    pub len: u64,
    block_size: u64,
    /// start of each block in `data`, then the data's length
    blocks: Packed,
    data: &'static [u8],
}

impl Section {
    pub fn read(r: &mut Reader) -> Result<Self, String> {
        let kind = r.take(1)?[0];
        if kind != 2 {
            return Err(format!(
                "unsupported dictionary section type {kind} (plain front coding is 2)"
            ));
        }
        let len = r.vbyte()?;
        let bytes = r.vbyte()? as usize;
        let block_size = r.vbyte()?;
        r.take(1)?; // CRC8
        let (blocks, _) = r.sequence()?;
        let data = r.take(bytes)?;
        r.take(4)?; // CRC32
        if len > 0 && (block_size == 0 || (blocks.len() as u64) < len.div_ceil(block_size)) {
            return Err("dictionary section: block directory too short".into());
        }
        Ok(Section {
            len,
            block_size,
            blocks,
            data,
        })
    }

    fn block_count(&self) -> usize {
        if self.len == 0 {
            0
        } else {
            self.len.div_ceil(self.block_size) as usize
        }
    }

    #[inline]
    fn cstr(&self, pos: usize) -> Result<&'static [u8], String> {
        let rest = self
            .data
            .get(pos..)
            .ok_or("dictionary offset out of range")?;
        let end = memchr0(rest).ok_or("unterminated dictionary string")?;
        Ok(&rest[..end])
    }

    /// The string of `id` (from 1) appended to `out`.
    pub fn extract_into(&self, id: u64, out: &mut Vec<u8>) -> Result<(), String> {
        if id == 0 || id > self.len {
            return Err(format!(
                "id {id} outside a dictionary section of {}",
                self.len
            ));
        }
        let block = (id - 1) / self.block_size;
        let index = (id - 1) % self.block_size;
        let base = out.len();
        let mut pos = self.blocks.get(block as usize) as usize;
        let first = self.cstr(pos)?;
        out.extend_from_slice(first);
        pos += first.len() + 1;
        for _ in 0..index {
            let (shared, used) = vbyte(self.data, pos)?;
            pos += used;
            let suffix = self.cstr(pos)?;
            out.truncate(base + shared as usize);
            out.extend_from_slice(suffix);
            pos += suffix.len() + 1;
        }
        Ok(())
    }

    /// The id of `term` (from 1), 0 if absent.
    pub fn locate(&self, term: &[u8]) -> u64 {
        let blocks = self.block_count();
        if blocks == 0 {
            return 0;
        }
        // the last block whose first string is <= term
        let (mut lo, mut hi) = (0usize, blocks);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let first = match self.cstr(self.blocks.get(mid) as usize) {
                Ok(s) => s,
                Err(_) => return 0,
            };
            match first.cmp(term) {
                Ordering::Equal => return mid as u64 * self.block_size + 1,
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
            }
        }
        if lo == 0 {
            return 0;
        }
        let block = lo - 1;
        let first_id = block as u64 * self.block_size + 1;
        let count = self.block_size.min(self.len - first_id + 1);
        let mut pos = self.blocks.get(block) as usize;
        let mut current: Vec<u8> = match self.cstr(pos) {
            Ok(s) => s.to_vec(),
            Err(_) => return 0,
        };
        pos += current.len() + 1;
        for k in 1..count {
            let Ok((shared, used)) = vbyte(self.data, pos) else {
                return 0;
            };
            pos += used;
            let Ok(suffix) = self.cstr(pos) else { return 0 };
            pos += suffix.len() + 1;
            current.truncate(shared as usize);
            current.extend_from_slice(suffix);
            match current.as_slice().cmp(term) {
                Ordering::Equal => return first_id + k,
                Ordering::Greater => return 0,
                Ordering::Less => {}
            }
        }
        0
    }
}

#[inline]
fn memchr0(s: &[u8]) -> Option<usize> {
    s.iter().position(|&b| b == 0)
}

fn vbyte(data: &[u8], mut pos: usize) -> Result<(u64, usize), String> {
    let start = pos;
    let mut n = 0u64;
    let mut shift = 0;
    loop {
        let b = *data.get(pos).ok_or("truncated dictionary")?;
        pos += 1;
        n |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 != 0 {
            return Ok((n, pos - start));
        }
        shift += 7;
        if shift > 63 {
            return Err("corrupt dictionary".into());
        }
    }
}
