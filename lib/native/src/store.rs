//! The engine's view of one dataset: triples by global term ids, a cursor per
//! pattern shape whose whole state is an offset, estimates, and terms.
//!
//! Global ids are those of `quanta.engine.storage.hdt` (pyHDT backend), so
//! saved plans mean the same on both: subject ids as they are, object-only ids
//! shifted past the subjects, predicates mapped to the term's subject/object
//! id when it has one, else `nb_terms + p`. 0 is "any" in a pattern.
//!
//! Orders are pyHDT's (hdt-cpp 1.3.3): SPO for `???`, `S??`, `SP?`, `SPO`,
//! `S?O`; the predicate's pairs in subject order for `?P?`; the object's
//! pairs in (predicate, subject) order for `??O` and `?PO`.

use crate::bits::RankSelect;
use crate::dict::Section;
use crate::hdt::Hdt;
use crate::index::Index;
use std::collections::HashMap;
use std::path::Path;

pub type Triple = [u64; 3];

/// The most objects a range scan spans (`object_range_count`): planning it costs a binary
/// search each, and so does resuming it.
pub const RANGE_OBJECTS: u64 = 1 << 16;
/// How far ahead of the entry it reads a scan of the object index asks for memory.
const PREFETCH_AHEAD: u64 = 16;

pub struct Store {
    pub hdt: Hdt,
    pub index: Index,
    pub nb_shared: u64,
    pub nb_subjects: u64,
    pub nb_objects: u64,
    pub nb_predicates: u64,
    pub nb_terms: u64,
    object_shift: u64,
    predicate_gid: Vec<u64>,
    gid_predicate: HashMap<u64, u64>,
    /// per predicate id, the first and last subject that has it (a zone map): a lookup of
    /// (s, p) outside it fails without reading the subject's pairs, as (an offer, reviewFor)
    /// does in BSBM, whose subjects of a kind share a prefix and so a range of ids
    subject_span: Vec<(u64, u64)>,
}

/// The end of the run from `start`, whose last position holds one number `k` of `bits`
/// (`start` just past one number `k - 1`): the next one, found near at once or by select.
#[inline]
fn run_end(bits: &RankSelect, start: u64, k: u64) -> u64 {
    match bits.next_one_near(start as usize) {
        Some(i) => i as u64 + 1,
        None => bits.select1(k).map_or(start, |i| i as u64 + 1),
    }
}

/// Position ids of a pattern's terms (0 = any); None when a constant never
/// occurs at its position, so nothing matches.
#[derive(Clone, Copy, Debug)]
struct Ids {
    s: u64,
    p: u64,
    o: u64,
}

impl Store {
    pub fn open(hdt_path: &Path, index_path: &Path) -> Result<Self, String> {
        let hdt = Hdt::open(hdt_path)?;
        let index = Index::open(index_path, &hdt)?;
        let nb_shared = hdt.shared.len;
        let nb_subjects = nb_shared + hdt.subjects.len;
        let nb_objects = nb_shared + hdt.objects.len;
        let nb_predicates = hdt.predicates.len;
        let mut store = Store {
            nb_shared,
            nb_subjects,
            nb_objects,
            nb_predicates,
            nb_terms: nb_subjects + nb_objects - nb_shared,
            object_shift: nb_subjects - nb_shared,
            predicate_gid: vec![0],
            gid_predicate: HashMap::new(),
            subject_span: vec![(1, 0)],
            hdt,
            index,
        };
        let mut buf = Vec::new();
        for p in 1..=nb_predicates {
            buf.clear();
            store.hdt.predicates.extract_into(p, &mut buf)?;
            let gid = match store.so_gid(&buf) {
                0 => store.nb_terms + p,
                g => g,
            };
            store.predicate_gid.push(gid);
            store.gid_predicate.insert(gid, p);
            // a predicate's entries are its pairs in order, so its subjects in order
            let (a, b) = store.predicate_entries(p);
            let span = if a < b {
                let first = store.index.pred_pairs.get(a as usize);
                let last = store.index.pred_pairs.get(b as usize - 1);
                (store.subject_of_pair(first), store.subject_of_pair(last))
            } else {
                (1, 0)
            };
            store.subject_span.push(span);
        }
        Ok(store)
    }

    pub fn triples(&self) -> u64 {
        self.hdt.triples()
    }

    // -- terms --

    fn so_gid(&self, term: &[u8]) -> u64 {
        let id = self.hdt.shared.locate(term);
        if id != 0 {
            return id;
        }
        let id = self.hdt.subjects.locate(term);
        if id != 0 {
            return self.nb_shared + id;
        }
        let id = self.hdt.objects.locate(term);
        if id != 0 {
            return self.object_gid(self.nb_shared + id);
        }
        0
    }

    /// Global id of a term in dictionary syntax (exactly as spelled), 0 if absent.
    pub fn locate(&self, term: &[u8]) -> u64 {
        match self.so_gid(term) {
            0 => match self.hdt.predicates.locate(term) {
                0 => 0,
                p => self.predicate_gid[p as usize],
            },
            gid => gid,
        }
    }

    /// The dictionary string of a global id, appended to `out`.
    pub fn extract_into(&self, gid: u64, out: &mut Vec<u8>) -> Result<(), String> {
        let (section, id): (&Section, u64) = if gid == 0 {
            return Err("id 0 is no term".into());
        } else if gid <= self.nb_shared {
            (&self.hdt.shared, gid)
        } else if gid <= self.nb_subjects {
            (&self.hdt.subjects, gid - self.nb_shared)
        } else if gid <= self.nb_terms {
            (&self.hdt.objects, gid - self.nb_subjects)
        } else {
            (&self.hdt.predicates, gid - self.nb_terms)
        };
        section.extract_into(id, out)
    }

    #[inline]
    pub fn object_gid(&self, oid: u64) -> u64 {
        if oid <= self.nb_shared {
            oid
        } else {
            oid + self.object_shift
        }
    }

    #[inline]
    pub fn predicate_gid(&self, pid: u64) -> u64 {
        self.predicate_gid[pid as usize]
    }

    fn ids(&self, s: i64, p: i64, o: i64) -> Option<Ids> {
        if s < 0 || p < 0 || o < 0 {
            return None; // terms outside the dictionary match nothing
        }
        let (s, p, o) = (s as u64, p as u64, o as u64);
        if s > self.nb_subjects {
            return None;
        }
        let p = if p == 0 {
            0
        } else {
            *self.gid_predicate.get(&p)?
        };
        let o = if o <= self.nb_shared {
            o
        } else if self.nb_subjects < o && o <= self.nb_terms {
            o - self.object_shift
        } else {
            return None;
        };
        Some(Ids { s, p, o })
    }

    // -- the triples' structure --

    /// Pairs (subject, predicate) of subject `s`: `start..end` (each subject's last pair
    /// is marked by a one).
    #[inline]
    fn subject_pairs(&self, s: u64) -> (u64, u64) {
        let y = &self.index.y;
        let start = if s == 1 {
            Some(0)
        } else {
            y.select1(s - 1).map(|i| i as u64 + 1)
        };
        match start {
            Some(start) => (start, run_end(y, start, s)),
            None => (u64::MAX, u64::MAX),
        }
    }

    /// Triples of pair `y`: `start..end` (each pair's last triple is marked by a one).
    #[inline]
    fn pair_triples(&self, y: u64) -> (u64, u64) {
        let z = &self.index.z;
        let start = if y == 0 {
            Some(0)
        } else {
            z.select1(y).map(|i| i as u64 + 1)
        };
        match start {
            Some(start) => (start, run_end(z, start, y + 1)),
            None => (0, 0),
        }
    }

    /// Ask for what reading the object index's entry `i` (below `end`) will read: its pair's
    /// subject and, unless the scan knows it (`p_gid`), its predicate, scattered over the
    /// file, so that several entries wait for memory at once rather than one after the other.
    #[inline]
    fn prefetch_object_entry(&self, i: u64, end: u64, p_gid: u64) {
        if i < end {
            let y = self.index.obj_pairs.get(i as usize) as usize;
            if p_gid == 0 {
                self.hdt.seq_y.prefetch(y);
            }
            self.index.y.prefetch_rank(y);
        }
    }

    /// The triple of the object index's entry `i`, of object `o_gid`; its predicate is
    /// `p_gid` when the scan is of one predicate's entries (else 0: read from the pair).
    #[inline]
    fn object_entry(&self, i: u64, o_gid: u64, p_gid: u64) -> Triple {
        let y = self.index.obj_pairs.get(i as usize);
        let p_gid = match p_gid {
            0 => self.predicate_gid(self.hdt.seq_y.get(y as usize)),
            known => known,
        };
        [self.subject_of_pair(y), p_gid, o_gid]
    }

    #[inline]
    fn subject_of_pair(&self, y: u64) -> u64 {
        self.index.y.rank1(y as usize) + 1
    }

    #[inline]
    fn pair_of_triple(&self, z: u64) -> u64 {
        self.index.z.rank1(z as usize)
    }

    /// The pair (s, p), if the subject has the predicate.
    fn find_pair(&self, s: u64, p: u64) -> Option<u64> {
        let (first, last) = self.subject_span[p as usize];
        if s < first || s > last {
            return None;
        }
        let (a, b) = self.subject_pairs(s);
        let i = self.hdt.seq_y.lower_bound(a as usize, b as usize, p);
        (i < b as usize && self.hdt.seq_y.get(i) == p).then_some(i as u64)
    }

    /// Object `o` among the triples of pair `y`, as a triple position.
    fn find_object(&self, y: u64, o: u64) -> Option<u64> {
        let (a, b) = self.pair_triples(y);
        let i = self.hdt.seq_z.lower_bound(a as usize, b as usize, o);
        (i < b as usize && self.hdt.seq_z.get(i) == o).then_some(i as u64)
    }

    /// Object `o`'s entries in the object index, restricted to predicate `p` (0: all).
    fn object_entries(&self, o: u64, p: u64) -> (u64, u64) {
        let ix = &self.index;
        if o == 0 || o as usize >= ix.obj_start.len() {
            return (0, 0);
        }
        let (a, b) = (
            ix.obj_start.get(o as usize - 1),
            ix.obj_start.get(o as usize),
        );
        if p == 0 {
            return (a, b);
        }
        // the list is ordered by predicate: find p's run
        let (mut lo, mut hi) = (a, b);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.hdt.seq_y.get(ix.obj_pairs.get(mid as usize) as usize) < p {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let start = lo;
        let mut hi = b;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.hdt.seq_y.get(ix.obj_pairs.get(mid as usize) as usize) <= p {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (start, lo)
    }

    /// Predicate `p`'s entries in the predicate index.
    fn predicate_entries(&self, p: u64) -> (u64, u64) {
        let ix = &self.index;
        (
            ix.pred_start.get(p as usize - 1),
            ix.pred_start.get(p as usize),
        )
    }

    // -- TripleStore --

    /// Triples matching the pattern (global ids, 0 = any), after skipping
    /// `offset` of them.
    pub fn search(&self, s: i64, p: i64, o: i64, offset: u64) -> Cursor {
        match self.ids(s, p, o) {
            Some(ids) => self.cursor(ids, offset),
            None => Cursor::Empty,
        }
    }

    fn cursor(&self, Ids { s, p, o }: Ids, offset: u64) -> Cursor {
        match (s != 0, p != 0, o != 0) {
            (false, false, false) => self.range(0, self.triples(), offset),
            (true, false, false) => {
                let (a, b) = self.subject_pairs(s);
                if a >= b {
                    return Cursor::Empty;
                }
                let (start, _) = self.pair_triples(a);
                let (_, end) = self.pair_triples(b - 1);
                self.range(start, end, offset)
            }
            (true, true, false) => match self.find_pair(s, p) {
                Some(y) => {
                    let (start, end) = self.pair_triples(y);
                    self.range(start, end, offset)
                }
                None => Cursor::Empty,
            },
            (true, true, true) => match self.find_pair(s, p).and_then(|y| self.find_object(y, o)) {
                Some(z) => self.range(z, z + 1, offset),
                None => Cursor::Empty,
            },
            (false, true, false) => {
                let (a, b) = self.predicate_entries(p);
                let cum = &self.index.pred_cum;
                // the pair holding the predicate's triple number `offset`
                let i = cum.upper_bound(a as usize, b as usize, offset) as u64;
                if i == a {
                    return Cursor::Empty;
                }
                let i = i - 1;
                let y = self.index.pred_pairs.get(i as usize);
                let (start, end) = self.pair_triples(y);
                let z = start + (offset - cum.get(i as usize));
                if z >= end {
                    return Cursor::Empty;
                }
                Cursor::Predicate {
                    p_gid: self.predicate_gid(p),
                    i,
                    end_i: b,
                    z,
                    z_end: end,
                    s: self.subject_of_pair(y),
                }
            }
            (false, _, true) => {
                let (a, b) = self.object_entries(o, p);
                Cursor::Object {
                    i: a.saturating_add(offset).min(b),
                    end: b,
                    o_gid: self.object_gid(o),
                    p_gid: self.predicate_gid(p), // 0 for any predicate
                }
            }
            (true, false, true) => {
                let (a, b) = self.subject_pairs(s);
                let mut cursor = Cursor::SubjectObject { y: a, end: b, s, o };
                for _ in 0..offset {
                    if self.next(&mut cursor).is_none() {
                        break;
                    }
                }
                cursor
            }
        }
    }

    fn range(&self, start: u64, end: u64, offset: u64) -> Cursor {
        let z = start.saturating_add(offset);
        if z >= end {
            return Cursor::Empty;
        }
        let y = self.pair_of_triple(z);
        Cursor::Range {
            z,
            end,
            y,
            s: self.subject_of_pair(y),
            p_gid: self.predicate_gid(self.hdt.seq_y.get(y as usize)),
        }
    }

    /// The next triple of a cursor, in global ids.
    #[inline]
    pub fn next(&self, cursor: &mut Cursor) -> Option<Triple> {
        match cursor {
            Cursor::Empty => None,
            Cursor::One(t) => {
                let t = *t;
                *cursor = Cursor::Empty;
                Some(t)
            }
            Cursor::Range {
                z,
                end,
                y,
                s,
                p_gid,
            } => {
                if *z >= *end {
                    return None;
                }
                let t = [*s, *p_gid, self.object_gid(self.hdt.seq_z.get(*z as usize))];
                if self.hdt.bitmap_z.get(*z as usize) {
                    // last triple of its pair: the next one starts a new pair
                    if self.hdt.bitmap_y.get(*y as usize) {
                        *s += 1;
                    }
                    *y += 1;
                    if (*y as usize) < self.hdt.seq_y.len() {
                        *p_gid = self.predicate_gid(self.hdt.seq_y.get(*y as usize));
                    }
                }
                *z += 1;
                Some(t)
            }
            Cursor::Predicate {
                p_gid,
                i,
                end_i,
                z,
                z_end,
                s,
            } => {
                if *z >= *z_end {
                    return None;
                }
                let t = [*s, *p_gid, self.object_gid(self.hdt.seq_z.get(*z as usize))];
                *z += 1;
                if *z >= *z_end {
                    *i += 1;
                    if *i < *end_i {
                        let y = self.index.pred_pairs.get(*i as usize);
                        let (start, end) = self.pair_triples(y);
                        *z = start;
                        *z_end = end;
                        *s = self.subject_of_pair(y);
                    }
                }
                Some(t)
            }
            Cursor::Object {
                i,
                end,
                o_gid,
                p_gid,
            } => {
                if *i >= *end {
                    return None;
                }
                self.prefetch_object_entry(*i + PREFETCH_AHEAD, *end, *p_gid);
                let entry = self.object_entry(*i, *o_gid, *p_gid);
                *i += 1;
                Some(entry)
            }
            Cursor::Objects {
                i,
                run_end,
                o,
                o_end,
                p,
            } => {
                while *i >= *run_end {
                    *o += 1;
                    if *o >= *o_end {
                        return None;
                    }
                    (*i, *run_end) = self.object_entries(*o, *p);
                }
                let p_gid = self.predicate_gid(*p); // 0 for any predicate
                self.prefetch_object_entry(*i + PREFETCH_AHEAD, *run_end, p_gid);
                let entry = self.object_entry(*i, self.object_gid(*o), p_gid);
                *i += 1;
                Some(entry)
            }
            Cursor::SubjectObject { y, end, s, o } => {
                while *y < *end {
                    let pair = *y;
                    *y += 1;
                    if self.find_object(pair, *o).is_some() {
                        let p = self.hdt.seq_y.get(pair as usize);
                        return Some([*s, self.predicate_gid(p), self.object_gid(*o)]);
                    }
                }
                None
            }
        }
    }

    /// The object-only terms whose strings lie in `[low, high)` in the
    /// dictionary's byte order, as global ids `[start, end)`.
    pub fn object_string_range(&self, low: &[u8], high: &[u8]) -> Result<(i64, i64), String> {
        let objects = &self.hdt.objects;
        let a = objects.lower_bound(low)?;
        let b = objects.lower_bound(high)?.max(a);
        let gid = |o: u64| (self.nb_shared + o + self.object_shift) as i64;
        Ok((gid(a), gid(b)))
    }

    /// Objects `[oa, ob)` (object positions) of the global ids `[start, end)`
    /// of object-only terms, and predicate `p`'s local id (0: any; None: not a
    /// predicate of the file).
    fn object_range(&self, start: i64, end: i64, p: i64) -> Option<(u64, u64, u64)> {
        let local = |gid: i64| {
            (gid.max(0) as u64)
                .saturating_sub(self.object_shift)
                .clamp(self.nb_shared + 1, self.nb_objects + 1)
        };
        let p = self.ids(0, p, 0)?.p;
        Some((local(start), local(end).max(local(start)), p))
    }

    /// How many triples of predicate `p` (0: any) have an object in the global
    /// ids `[start, end)`: a binary search per object, so None past
    /// `RANGE_OBJECTS` objects.
    pub fn object_range_count(&self, start: i64, end: i64, p: i64) -> Option<u64> {
        let Some((oa, ob, p)) = self.object_range(start, end, p) else {
            return Some(0);
        };
        if ob - oa > RANGE_OBJECTS {
            return None;
        }
        Some(
            (oa..ob)
                .map(|o| self.object_entries(o, p))
                .map(|(a, b)| b - a)
                .sum(),
        )
    }

    /// The triples of predicate `p` (0: any) whose object's global id is in
    /// `[start, end)` (object-only terms), object after object, each object's
    /// in the object index's order, after skipping `offset` of them (a walk
    /// over the objects before, a binary search each).
    pub fn search_objects(&self, start: i64, end: i64, p: i64, offset: u64) -> Cursor {
        let Some((mut o, o_end, p)) = self.object_range(start, end, p) else {
            return Cursor::Empty;
        };
        let mut left = offset;
        while o < o_end {
            let (a, b) = self.object_entries(o, p);
            if left < b - a {
                return Cursor::Objects {
                    i: a + left,
                    run_end: b,
                    o,
                    o_end,
                    p,
                };
            }
            left -= b - a;
            o += 1;
        }
        Cursor::Empty
    }

    /// The subject of predicate `p`'s triple number `offset` (in the order a
    /// `?P?` scan reads them) and how many of its triples from there on have
    /// that subject: one step of a count by subject. None past the end.
    pub fn predicate_subject_run(&self, p: i64, offset: u64) -> Option<(u64, u64)> {
        let ids = self.ids(0, p, 0).filter(|ids| ids.p != 0)?;
        let (a, b) = self.predicate_entries(ids.p);
        let cum = &self.index.pred_cum;
        let i = cum.upper_bound(a as usize, b as usize, offset) as u64;
        if i == a {
            return None;
        }
        let y = self.index.pred_pairs.get(i as usize - 1);
        let (start, end) = self.pair_triples(y);
        let z = start + (offset - cum.get(i as usize - 1));
        (z < end).then(|| (self.subject_of_pair(y), end - z))
    }

    /// How many distinct subjects have predicate `p` (a global id): its pairs
    /// in the predicate index, exact; 0 for a predicate the data lacks.
    pub fn distinct_subjects(&self, p: i64) -> u64 {
        match self.ids(0, p, 0) {
            Some(Ids { p, .. }) if p != 0 => {
                let (a, b) = self.predicate_entries(p);
                b - a
            }
            _ => 0,
        }
    }

    /// Cardinality of a pattern, as pyHDT estimates it (exact but for `S?O`,
    /// counted here as the quanta backend over pyHDT counts it).
    pub fn estimate(&self, s: i64, p: i64, o: i64) -> u64 {
        let Some(ids) = self.ids(s, p, o) else {
            return 0;
        };
        match (ids.s != 0, ids.p != 0, ids.o != 0) {
            (false, false, false) => self.triples(),
            (true, false, false) => {
                let (a, b) = self.subject_pairs(ids.s);
                if a >= b {
                    0
                } else {
                    self.pair_triples(b - 1).1 - self.pair_triples(a).0
                }
            }
            (true, true, false) => self.find_pair(ids.s, ids.p).map_or(0, |y| {
                let (a, b) = self.pair_triples(y);
                b - a
            }),
            (true, true, true) => self
                .find_pair(ids.s, ids.p)
                .and_then(|y| self.find_object(y, ids.o))
                .map_or(0, |_| 1),
            (false, true, false) => {
                let (a, b) = self.predicate_entries(ids.p);
                if a == b {
                    0
                } else {
                    let last = self.index.pred_pairs.get(b as usize - 1);
                    let (start, end) = self.pair_triples(last);
                    self.index.pred_cum.get(b as usize - 1) + (end - start)
                }
            }
            (false, _, true) => {
                let (a, b) = self.object_entries(ids.o, ids.p);
                b - a
            }
            (true, false, true) => {
                let mut cursor = self.cursor(ids, 0);
                let mut n = 0;
                while self.next(&mut cursor).is_some() {
                    n += 1;
                }
                n
            }
        }
    }
}

/// Where a scan is. Each variant resumes from an offset in constant time
/// (but `S?O`, which walks the subject's pairs).
#[derive(Clone, Debug)]
pub enum Cursor {
    Empty,
    /// one triple known to be in the data (a membership the caller checked itself)
    One(Triple),
    /// a run of triple positions (`???`, `S??`, `SP?`, `SPO`), with the pair
    /// and subject of the current one
    Range {
        z: u64,
        end: u64,
        y: u64,
        s: u64,
        p_gid: u64,
    },
    /// the predicate's pairs `i..end_i`, inside pair `i` at triple `z`
    Predicate {
        p_gid: u64,
        i: u64,
        end_i: u64,
        z: u64,
        z_end: u64,
        s: u64,
    },
    /// entries `i..end` of the object index (`??O`, `?PO`: those of predicate `p_gid` alone)
    Object {
        i: u64,
        end: u64,
        o_gid: u64,
        p_gid: u64,
    },
    /// objects `o..o_end`, inside object `o`'s entries `i..run_end` of
    /// predicate `p` (0: any) in the object index
    Objects {
        i: u64,
        run_end: u64,
        o: u64,
        o_end: u64,
        p: u64,
    },
    /// the subject's pairs `y..end`, each checked for the object
    SubjectObject {
        y: u64,
        end: u64,
        s: u64,
        o: u64,
    },
}
