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

    /// The id of `term` (from 1), 0 if absent. Compares in place: the
    /// binary search stops at the first differing byte of each block's
    /// first string, and the block's scan follows the front coding (a string
    /// sharing more with its predecessor than the term does sorts before it)
    /// rather than spelling every string out.
    pub fn locate(&self, term: &[u8]) -> u64 {
        let blocks = self.block_count();
        if blocks == 0 || memchr0(term).is_some() {
            return 0; // no string of a section holds a NUL
        }
        // the last block whose first string is <= term
        let (mut lo, mut hi) = (0usize, blocks);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let Some((order, _)) = compare_at(self.data, self.blocks.get(mid) as usize, term)
            else {
                return 0;
            };
            match order {
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
        // the bytes the current string shares with the term (it sorts before it)
        let Some((_, mut matched)) = compare_at(self.data, pos, term) else {
            return 0;
        };
        let Ok(first) = self.cstr(pos) else { return 0 };
        pos += first.len() + 1;
        for k in 1..count {
            let Ok((shared, used)) = vbyte(self.data, pos) else {
                return 0;
            };
            pos += used;
            let Ok(suffix) = self.cstr(pos) else { return 0 };
            let shared = shared as usize;
            // more than the term shares: the string is the current one up to
            // where that one sorts before the term, so it does too
            if shared <= matched {
                let Some((order, common)) = compare_at(self.data, pos, &term[shared..]) else {
                    return 0;
                };
                match order {
                    Ordering::Equal => return first_id + k,
                    Ordering::Greater => return 0,
                    Ordering::Less => matched = shared + common,
                }
            }
            pos += suffix.len() + 1;
        }
        0
    }

    /// The first id (from 1) whose string is at least `term` in byte order;
    /// `len + 1` when every string sorts before it.
    pub fn lower_bound(&self, term: &[u8]) -> Result<u64, String> {
        // the blocks whose first string sorts before `term`
        let (mut lo, mut hi) = (0usize, self.block_count());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (order, _) = compare_at(self.data, self.blocks.get(mid) as usize, term)
                .ok_or("dictionary offset out of range")?;
            if order == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == 0 {
            return Ok(1);
        }
        // within the last of them: its strings in order, spelled out
        let first_id = (lo as u64 - 1) * self.block_size + 1;
        let mut current = Vec::new();
        for id in first_id..(first_id + self.block_size).min(self.len + 1) {
            current.clear();
            self.extract_into(id, &mut current)?;
            if current.as_slice() >= term {
                return Ok(id);
            }
        }
        Ok((first_id + self.block_size).min(self.len + 1))
    }
}

/// The NUL-terminated string at `pos` against `term` (which holds no NUL):
/// their order, and the bytes they share; None past the data.
#[inline]
fn compare_at(data: &[u8], pos: usize, term: &[u8]) -> Option<(Ordering, usize)> {
    let rest = data.get(pos..)?;
    let n = term.len().min(rest.len());
    let common = rest[..n]
        .iter()
        .zip(term)
        .position(|(a, b)| a != b)
        .unwrap_or(n);
    let byte = *rest.get(common)?;
    Some(match term.get(common) {
        // a NUL (the string's end) sorts before any byte of the term
        Some(t) => (byte.cmp(t), common),
        None if byte == 0 => (Ordering::Equal, common),
        None => (Ordering::Greater, common),
    })
}

/// The first NUL of `s`, eight bytes at a time (a word holds a zero byte
/// when subtracting one from each byte borrows into a high bit that was clear).
#[inline]
fn memchr0(s: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut words = s.chunks_exact(8);
    let mut base = 0;
    for word in &mut words {
        let w = u64::from_le_bytes(word.try_into().unwrap_or_default());
        if w.wrapping_sub(ONES) & !w & HIGHS != 0 {
            return word.iter().position(|&b| b == 0).map(|i| base + i);
        }
        base += 8;
    }
    let rest = words.remainder();
    rest.iter().position(|&b| b == 0).map(|i| base + i)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memchr0_finds_the_first_nul_anywhere() {
        for len in 0..40 {
            for at in 0..=len {
                // high bytes around it, as UTF-8 has: no word trick may take them for a NUL
                let mut s: Vec<u8> = (0..len).map(|i| [0x80, 0xff, 0x01, b'a'][i % 4]).collect();
                if at < len {
                    s[at] = 0;
                    if at + 3 < len {
                        s[at + 3] = 0;
                    }
                }
                let want = s.iter().position(|&b| b == 0);
                assert_eq!(memchr0(&s), want, "{s:?}");
            }
        }
    }
}
