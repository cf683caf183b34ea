//! The side index beside an HDT file (`FILE.hdt.quanta-index.v1`), built once
//! (by `quanta load`, or by the first worker that finds it missing) and then
//! memory-mapped by every process:
//!
//! - rank/select directories of the two triple bitmaps (subject of a pair,
//!   pair of a triple, the triples of a pair) in constant time;
//! - the object index: for each object, the pairs (subject, predicate) it
//!   occurs under, ordered by (predicate, pair) as hdt-cpp orders its own, so
//!   `??O` and `?PO` list triples in pyHDT's order;
//! - the predicate index: for each predicate, its pairs in subject order, and
//!   the number of the predicate's triples before each pair, so a `?P?` scan
//!   reaches any offset by a binary search instead of a walk.

use crate::bits::{bits_for, pack_into, Packed, RankSelect};
use crate::hdt::{Hdt, Mapped};
use std::io::Write;
use std::path::Path;

pub const SUFFIX: &str = ".quanta-index.v1";
const MAGIC: &[u8; 8] = b"QNTIDX\x00\x01";
const SECTIONS: usize = 9;
const HEADER_WORDS: usize = 5;

pub struct Index {
    _map: Mapped,
    pub y: RankSelect,
    pub z: RankSelect,
    /// object id -> first entry of its list in `obj_pairs` (ids from 1: entry o-1)
    pub obj_start: Packed,
    pub obj_pairs: Packed,
    /// predicate id -> first entry in `pred_pairs` (entry p-1)
    pub pred_start: Packed,
    pub pred_pairs: Packed,
    /// triples of the predicate before each of its pairs
    pub pred_cum: Packed,
}

enum Data {
    Words(Vec<u64>),
    Packed(Vec<u64>, u32),
}

/// Build the index of `hdt` and write it to `out` (atomically: a temporary
/// file renamed into place).
pub fn build(hdt: &Hdt, out: &Path) -> Result<(), String> {
    let bytes = build_bytes(hdt);
    // unique per builder (process, thread, time): concurrent builders each rename a whole file
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let tmp = out.with_extension(format!(
        "tmp{}-{:?}-{nanos}",
        std::process::id(),
        std::thread::current().id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, out)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{}: {e}", out.display())
    })
}

pub fn build_bytes(hdt: &Hdt) -> Vec<u8> {
    let n_y = hdt.seq_y.len();
    let n_z = hdt.seq_z.len();
    let n_p = hdt.predicates.len as usize;
    let n_o = (hdt.shared.len + hdt.objects.len) as usize;
    let (y_supers, y_samples) = RankSelect::directories(&hdt.bitmap_y);
    let (z_supers, z_samples) = RankSelect::directories(&hdt.bitmap_z);

    // first triple of each pair (and the end), walking the Z bitmap once
    let mut z_start: Vec<u64> = Vec::with_capacity(n_y + 1);
    z_start.push(0);
    for z in 0..n_z {
        if hdt.bitmap_z.get(z) {
            z_start.push(z as u64 + 1);
        }
    }
    z_start.resize(n_y + 1, n_z as u64);

    // predicate index: pairs grouped by predicate, ascending within each;
    // after the prefix sums, predicate p's entries are pred_start[p-1]..pred_start[p]
    let mut pred_start = vec![0u64; n_p + 1];
    for y in 0..n_y {
        let p = hdt.seq_y.get(y) as usize;
        if (1..=n_p).contains(&p) {
            pred_start[p] += 1;
        }
    }
    for p in 1..=n_p {
        pred_start[p] += pred_start[p - 1];
    }
    let mut fill: Vec<u64> = pred_start.clone(); // fill[p-1]: next slot of p
    let mut pred_pairs = vec![0u64; n_y];
    for y in 0..n_y {
        let p = hdt.seq_y.get(y) as usize;
        if (1..=n_p).contains(&p) {
            pred_pairs[fill[p - 1] as usize] = y as u64;
            fill[p - 1] += 1;
        }
    }
    let mut pred_cum = vec![0u64; n_y];
    let mut max_cum = 0u64;
    for p in 1..=n_p {
        let mut total = 0u64;
        for i in pred_start[p - 1] as usize..pred_start[p] as usize {
            pred_cum[i] = total;
            let y = pred_pairs[i] as usize;
            total += z_start[y + 1] - z_start[y];
        }
        max_cum = max_cum.max(total);
    }

    // object index: each object's pairs in (predicate, pair) order, by walking
    // the pairs in that order and appending each to its objects' lists;
    // object o's entries are obj_start[o-1]..obj_start[o]
    let mut obj_start = vec![0u64; n_o + 1];
    for z in 0..n_z {
        let o = hdt.seq_z.get(z) as usize;
        if (1..=n_o).contains(&o) {
            obj_start[o] += 1;
        }
    }
    for o in 1..=n_o {
        obj_start[o] += obj_start[o - 1];
    }
    let mut fill: Vec<u64> = obj_start.clone();
    let mut obj_pairs = vec![0u64; n_z];
    for &y in &pred_pairs {
        let y = y as usize;
        for z in z_start[y]..z_start[y + 1] {
            let o = hdt.seq_z.get(z as usize) as usize;
            if (1..=n_o).contains(&o) {
                obj_pairs[fill[o - 1] as usize] = y as u64;
                fill[o - 1] += 1;
            }
        }
    }
    drop(fill);

    let sections = [
        Data::Words(y_supers),
        Data::Words(y_samples),
        Data::Words(z_supers),
        Data::Words(z_samples),
        Data::Packed(obj_start, bits_for(n_z as u64)),
        Data::Packed(obj_pairs, bits_for(n_y as u64)),
        Data::Packed(pred_start, bits_for(n_y as u64)),
        Data::Packed(pred_pairs, bits_for(n_y as u64)),
        Data::Packed(pred_cum, bits_for(max_cum)),
    ];
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    for v in [
        hdt.file_len(),
        hdt.fingerprint,
        n_y as u64,
        n_z as u64,
        SECTIONS as u64,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let table = out.len();
    out.resize(table + SECTIONS * 32, 0);
    for (k, section) in sections.iter().enumerate() {
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
        let start = out.len();
        let (width, len) = match section {
            Data::Words(words) => {
                for w in words {
                    out.extend_from_slice(&w.to_le_bytes());
                }
                (64u64, words.len() as u64)
            }
            Data::Packed(values, width) => {
                pack_into(&mut out, values.iter().copied(), *width);
                (*width as u64 | 1 << 32, values.len() as u64) // bit 32: packed
            }
        };
        let entry = table + k * 32;
        for (j, v) in [width, len, start as u64, (out.len() - start) as u64]
            .iter()
            .enumerate()
        {
            out[entry + 8 * j..entry + 8 * j + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
    out
}

impl Index {
    /// Map the index of `hdt`; an error if it is missing, damaged or was
    /// built for another file.
    pub fn open(path: &Path, hdt: &Hdt) -> Result<Self, String> {
        let map = Mapped::open(path)?;
        let bytes = map.bytes();
        let word = |i: usize| -> Result<u64, String> {
            bytes
                .get(8 + 8 * i..16 + 8 * i)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
                .ok_or_else(|| format!("{}: truncated index", path.display()))
        };
        if bytes.get(..8) != Some(MAGIC) {
            return Err(format!("{}: not a quanta index (v1)", path.display()));
        }
        let expected = [
            hdt.file_len(),
            hdt.fingerprint,
            hdt.seq_y.len() as u64,
            hdt.seq_z.len() as u64,
        ];
        for (i, e) in expected.iter().enumerate() {
            if word(i)? != *e {
                return Err(format!("{}: built for another HDT file", path.display()));
            }
        }
        if word(4)? != SECTIONS as u64 {
            return Err(format!("{}: unexpected section count", path.display()));
        }
        let mut words: Vec<&'static [u64]> = Vec::new();
        let mut packed: Vec<Packed> = Vec::new();
        for k in 0..SECTIONS {
            let base = HEADER_WORDS + 4 * k;
            let (kind, len, start, size) = (
                word(base)?,
                word(base + 1)? as usize,
                word(base + 2)?,
                word(base + 3)?,
            );
            let body = bytes
                .get(start as usize..(start + size) as usize)
                .ok_or_else(|| format!("{}: section {k} out of range", path.display()))?;
            if kind == 64 {
                if size as usize != len * 8 || !(body.as_ptr() as usize).is_multiple_of(8) {
                    return Err(format!("{}: section {k} malformed", path.display()));
                }
                // SAFETY: aligned, in range, and u64 has no invalid bit patterns
                // (the file is little-endian, as is every target we build for).
                words.push(unsafe { std::slice::from_raw_parts(body.as_ptr() as *const u64, len) });
            } else {
                packed.push(Packed::new(body, (kind & 0xff) as u32, len)?);
            }
        }
        if words.len() != 4 || packed.len() != 5 {
            return Err(format!("{}: unexpected sections", path.display()));
        }
        let y = RankSelect::new(hdt.bitmap_y, words[0], words[1])?;
        let z = RankSelect::new(hdt.bitmap_z, words[2], words[3])?;
        Ok(Index {
            _map: map,
            y,
            z,
            obj_start: packed[0],
            obj_pairs: packed[1],
            pred_start: packed[2],
            pred_pairs: packed[3],
            pred_cum: packed[4],
        })
    }
}

#[cfg(not(target_endian = "little"))]
compile_error!("the index format is little-endian");
