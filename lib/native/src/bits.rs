//! Bit-level views over memory-mapped bytes: HDT's bit-packed integer arrays
//! ("Log64" sequences), its bitmaps, and rank/select directories for them.
//!
//! Everything reads from `&'static [u8]` slices of a mapping that the owning
//! store keeps alive (see `hdt::Mapped`); nothing here copies the data.

/// Unsigned integers of `width` bits each, least significant bit first, packed
/// over bytes that need not be aligned (HDT's Log64 arrays, and ours).
#[derive(Clone, Copy, Debug)]
pub struct Packed {
    data: &'static [u8],
    width: u32,
    len: usize,
    mask: u64,
}

impl Packed {
    pub fn new(data: &'static [u8], width: u32, len: usize) -> Result<Self, String> {
        if width > 64 {
            return Err(format!("packed array of {width}-bit entries"));
        }
        let bytes = (width as usize * len).div_ceil(8);
        if data.len() < bytes {
            return Err(format!(
                "packed array needs {bytes} bytes, has {}",
                data.len()
            ));
        }
        let mask = if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        Ok(Packed {
            data,
            width,
            len,
            mask,
        })
    }

    pub fn empty() -> Self {
        Packed {
            data: &[],
            width: 0,
            len: 0,
            mask: 0,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn get(&self, i: usize) -> u64 {
        debug_assert!(i < self.len, "packed index {i} >= {}", self.len);
        let bit = i * self.width as usize;
        let byte = bit >> 3;
        let shift = (bit & 7) as u32;
        let data = self.data;
        if byte + 9 <= data.len() {
            // SAFETY: bytes byte..byte+9 are inside the slice (checked above).
            let word = u64::from_le(unsafe {
                std::ptr::read_unaligned(data.as_ptr().add(byte) as *const u64)
            });
            let mut value = word >> shift;
            if shift + self.width > 64 {
                value |= (unsafe { *data.get_unchecked(byte + 8) } as u64) << (64 - shift);
            }
            value & self.mask
        } else {
            self.get_near_end(byte, shift)
        }
    }

    /// Ask for entry `i`'s cache line ahead of reading it (`prefetch`).
    #[inline]
    pub fn prefetch(&self, i: usize) {
        prefetch(self.data, (i * self.width as usize) >> 3);
    }

    #[cold]
    fn get_near_end(&self, byte: usize, shift: u32) -> u64 {
        let mut value: u128 = 0;
        for k in 0..9 {
            if let Some(&b) = self.data.get(byte + k) {
                value |= (b as u128) << (8 * k);
            }
        }
        ((value >> shift) as u64) & self.mask
    }

    /// First index in `lo..hi` whose value is > `key`, for values ascending there.
    #[inline]
    pub fn upper_bound(&self, mut lo: usize, mut hi: usize, key: u64) -> usize {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.get(mid) <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// First index in `lo..hi` whose value is >= `key`, for values ascending there.
    #[inline]
    pub fn lower_bound(&self, mut lo: usize, mut hi: usize, key: u64) -> usize {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.get(mid) < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// Bits needed to store `max` (at least 1, as HDT writes them).
pub fn bits_for(max: u64) -> u32 {
    (64 - max.leading_zeros()).max(1)
}

/// Append `values` bit-packed at `width` bits to `out`, plus 8 bytes of
/// padding so that every read of the array takes `Packed::get`'s fast path.
pub fn pack_into(out: &mut Vec<u8>, values: impl Iterator<Item = u64>, width: u32) {
    let mut acc: u128 = 0;
    let mut filled: u32 = 0;
    for v in values {
        debug_assert!(
            width == 64 || v >> width == 0,
            "{v} does not fit {width} bits"
        );
        acc |= (v as u128) << filled;
        filled += width;
        while filled >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            filled -= 8;
        }
    }
    if filled > 0 {
        out.push(acc as u8);
    }
    out.extend_from_slice(&[0u8; 8]);
}

/// A bitmap stored as little-endian bytes (HDT's Bitmap375 body).
#[derive(Clone, Copy, Debug)]
pub struct Bits {
    data: &'static [u8],
    len: usize,
}

impl Bits {
    pub fn new(data: &'static [u8], len: usize) -> Result<Self, String> {
        if data.len() < len.div_ceil(8) {
            return Err(format!("bitmap of {len} bits has {} bytes", data.len()));
        }
        Ok(Bits { data, len })
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first `len` bits.
    pub fn truncated(&self, len: usize) -> Self {
        Bits {
            data: self.data,
            len: len.min(self.len),
        }
    }

    #[inline]
    pub fn get(&self, i: usize) -> bool {
        debug_assert!(i < self.len);
        (self.data[i >> 3] >> (i & 7)) & 1 == 1
    }

    /// The `k`-th 64-bit word (bits past the end read as 0).
    #[inline]
    pub fn word(&self, k: usize) -> u64 {
        let byte = k * 8;
        let data = self.data;
        let mut w = if byte + 8 <= data.len() {
            u64::from_le(unsafe { std::ptr::read_unaligned(data.as_ptr().add(byte) as *const u64) })
        } else {
            let mut w = 0u64;
            for j in 0..8 {
                if let Some(&b) = data.get(byte + j) {
                    w |= (b as u64) << (8 * j);
                }
            }
            w
        };
        let end = (k + 1) * 64;
        if end > self.len {
            let keep = self.len.saturating_sub(k * 64);
            w &= if keep == 0 {
                0
            } else {
                u64::MAX >> (64 - keep)
            };
        }
        w
    }

    pub fn words(&self) -> usize {
        self.len.div_ceil(64)
    }
}

/// Bits per rank superblock (8 words) and ones per select sample.
pub const SUPERBLOCK: usize = 512;
pub const SELECT_SAMPLE: u64 = 256;
/// Words `next_one_near` reads at most.
const NEAR_WORDS: usize = 4;

/// Rank and select over a bitmap, with directories built once (by the index
/// builder) and read from the side index: `supers[j]` is the number of ones
/// before bit `512 j`; `samples[t]` the superblock holding one number `256 t + 1`.
#[derive(Clone, Copy, Debug)]
pub struct RankSelect {
    pub bits: Bits,
    supers: &'static [u64],
    samples: &'static [u64],
    ones: u64,
}

impl RankSelect {
    pub fn new(
        bits: Bits,
        supers: &'static [u64],
        samples: &'static [u64],
    ) -> Result<Self, String> {
        let blocks = bits.len().div_ceil(SUPERBLOCK);
        if supers.len() != blocks + 1 {
            return Err(format!(
                "rank directory has {} entries for {blocks} blocks",
                supers.len()
            ));
        }
        let ones = supers[blocks];
        if samples.len() as u64 != ones.div_ceil(SELECT_SAMPLE) {
            return Err("select directory does not match the bitmap".into());
        }
        Ok(RankSelect {
            bits,
            supers,
            samples,
            ones,
        })
    }

    /// Build the two directories for `bits`.
    pub fn directories(bits: &Bits) -> (Vec<u64>, Vec<u64>) {
        let words = bits.words();
        let mut supers = Vec::with_capacity(words / 8 + 2);
        let mut samples = Vec::new();
        let mut ones = 0u64;
        for k in 0..words {
            if k % 8 == 0 {
                supers.push(ones);
            }
            let c = bits.word(k).count_ones() as u64;
            // a sample for every one numbered 256 t + 1 that falls in this word
            let block = (k / 8) as u64;
            while (samples.len() as u64) * SELECT_SAMPLE < ones + c {
                samples.push(block);
            }
            ones += c;
        }
        supers.push(ones); // one entry per superblock, then the total
        (supers, samples)
    }

    #[inline]
    pub fn ones(&self) -> u64 {
        self.ones
    }

    /// Ask for what `rank1(i)` reads (its superblock's count, bit i's word) ahead of it.
    #[inline]
    pub fn prefetch_rank(&self, i: usize) {
        let supers: &[u8] = unsafe {
            // SAFETY: the same memory, as bytes (u8 has no alignment or validity requirement)
            std::slice::from_raw_parts(self.supers.as_ptr() as *const u8, self.supers.len() * 8)
        };
        prefetch(supers, i / SUPERBLOCK * 8);
        prefetch(self.bits.data, i / 64 * 8);
    }

    /// Ones in bits `0..i`.
    #[inline]
    pub fn rank1(&self, i: usize) -> u64 {
        let block = i / SUPERBLOCK;
        let mut r = self.supers[block];
        let last = i / 64;
        for k in block * 8..last {
            r += self.bits.word(k).count_ones() as u64;
        }
        let rem = i % 64;
        if rem != 0 {
            r += (self.bits.word(last) & ((1u64 << rem) - 1)).count_ones() as u64;
        }
        r
    }

    /// The first one at or after bit `i` when it lies within `NEAR_WORDS` words (else None:
    /// `select1` finds it): the end of a short run, such as a pair's triples, read without
    /// the directories.
    #[inline]
    pub fn next_one_near(&self, i: usize) -> Option<usize> {
        let first = i / 64;
        let mut word = self.bits.word(first) & (u64::MAX << (i % 64));
        for k in first..(first + NEAR_WORDS).min(self.bits.words()) {
            if k > first {
                word = self.bits.word(k);
            }
            if word != 0 {
                return Some(k * 64 + word.trailing_zeros() as usize);
            }
        }
        None
    }

    /// Position of the `k`-th one (`k` from 1), None past the last.
    #[inline]
    pub fn select1(&self, k: u64) -> Option<usize> {
        if k == 0 || k > self.ones {
            return None;
        }
        let mut block = self.samples[((k - 1) / SELECT_SAMPLE) as usize] as usize;
        while self.supers[block + 1] < k {
            block += 1;
        }
        let mut rem = k - self.supers[block];
        let mut w = block * 8;
        loop {
            let word = self.bits.word(w);
            let c = word.count_ones() as u64;
            if c >= rem {
                return Some(w * 64 + select_in_word(word, rem as u32) as usize);
            }
            rem -= c;
            w += 1;
        }
    }
}

/// Position of the `r`-th set bit (from 1) of `x`: its byte by counts, then within the byte
/// (a word of a dense bitmap, such as the triples' one per pair, has dozens of ones before it).
#[inline]
fn select_in_word(x: u64, mut r: u32) -> u32 {
    let mut shift = 0;
    loop {
        let c = ((x >> shift) & 0xff).count_ones();
        if c >= r || shift == 56 {
            break;
        }
        r -= c;
        shift += 8;
    }
    let mut byte = (x >> shift) & 0xff;
    for _ in 1..r {
        byte &= byte - 1;
    }
    shift + byte.trailing_zeros()
}

/// A hint that byte `at` of `data` will be read soon: lookups scattered over a large file
/// (a range of objects read pair by pair) wait for memory one at a time otherwise.
#[inline]
fn prefetch(data: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if at < data.len() {
        // SAFETY: a prefetch reads nothing and faults on nothing; the address is inside `data`.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                data.as_ptr().add(at) as *const i8,
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, at);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leak(v: Vec<u8>) -> &'static [u8] {
        Box::leak(v.into_boxed_slice())
    }

    #[test]
    fn packed_round_trip_every_width() {
        for width in [1u32, 3, 7, 8, 13, 31, 32, 33, 57, 63, 64] {
            let values: Vec<u64> = (0..1000u64)
                .map(|i| {
                    i.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                        & if width == 64 {
                            u64::MAX
                        } else {
                            (1 << width) - 1
                        }
                })
                .collect();
            let mut out = Vec::new();
            pack_into(&mut out, values.iter().copied(), width);
            // without the padding too: the slow path at the end
            let exact = (width as usize * values.len()).div_ceil(8);
            for data in [leak(out.clone()), leak(out[..exact].to_vec())] {
                let p = Packed::new(data, width, values.len()).unwrap();
                for (i, v) in values.iter().enumerate() {
                    assert_eq!(p.get(i), *v, "width {width} index {i}");
                }
            }
        }
    }

    #[test]
    fn rank_select_match_a_naive_count() {
        for (n, density) in [
            (1usize, 1u64),
            (63, 3),
            (64, 2),
            (511, 5),
            (512, 7),
            (5000, 1),
            (20_000, 97),
            (20_000, 3),
        ] {
            let set: Vec<bool> = (0..n as u64)
                .map(|i| (i.wrapping_mul(2654435761) >> 7) % density == 0)
                .collect();
            let mut bytes = vec![0u8; n.div_ceil(8)];
            for (i, b) in set.iter().enumerate() {
                if *b {
                    bytes[i / 8] |= 1 << (i % 8);
                }
            }
            let bits = Bits::new(leak(bytes), n).unwrap();
            let (supers, samples) = RankSelect::directories(&bits);
            let rs = RankSelect::new(
                bits,
                Box::leak(supers.into_boxed_slice()),
                Box::leak(samples.into_boxed_slice()),
            )
            .unwrap();
            let mut ones = 0u64;
            for (i, b) in set.iter().enumerate() {
                assert_eq!(rs.rank1(i), ones);
                assert_eq!(bits.get(i), *b);
                if *b {
                    ones += 1;
                    assert_eq!(rs.select1(ones), Some(i));
                }
            }
            assert_eq!(rs.rank1(n), ones);
            assert_eq!(rs.ones(), ones);
            assert_eq!(rs.select1(ones + 1), None);
            // the next one at or after each bit: found when near, never a wrong one
            let mut next = None;
            for i in (0..=n).rev() {
                if i < n && set[i] {
                    next = Some(i);
                }
                let near = rs.next_one_near(i);
                assert!(near.is_none() || near == next, "n {n} bit {i}");
                if next.is_some_and(|j| j < i + 64) {
                    assert_eq!(near, next, "n {n} bit {i}");
                }
            }
        }
    }
}
