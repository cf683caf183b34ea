//! The store over the in-repo sample (data/watdiv-100k.hdt, read only; its
//! index built into a temporary directory): every pattern shape's cursor, at
//! every offset of a sample, against a filter over the full scan.

use quanta_native::hdt::Hdt;
use quanta_native::index;
use quanta_native::store::{Store, Triple};
use std::path::PathBuf;

fn sample() -> Store {
    let hdt_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/watdiv-100k.hdt");
    let dir = std::env::temp_dir().join(format!(
        "quanta-native-test-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let index_path = dir.join("watdiv-100k.hdt.quanta-index.v1");
    index::build(&Hdt::open(&hdt_path).unwrap(), &index_path).unwrap();
    let store = Store::open(&hdt_path, &index_path).unwrap();
    let _ = std::fs::remove_dir_all(&dir); // mapped already: the mapping outlives the name
    store
}

fn all(store: &Store, s: i64, p: i64, o: i64, offset: u64) -> Vec<Triple> {
    let mut cursor = store.search(s, p, o, offset);
    let mut out = Vec::new();
    while let Some(t) = store.next(&mut cursor) {
        out.push(t);
    }
    out
}

#[test]
fn every_shape_is_a_filter_of_the_full_scan() {
    let store = sample();
    let everything = all(&store, 0, 0, 0, 0);
    assert_eq!(everything.len() as u64, store.triples());
    assert!(
        everything.windows(2).all(|w| w[0] < w[1]),
        "SPO order, no duplicates"
    );
    for k in (0..everything.len()).step_by(997) {
        let [s, p, o] = everything[k];
        for (ps, pp, po) in [
            (s, 0, 0),
            (s, p, 0),
            (s, p, o),
            (0, p, 0),
            (0, p, o),
            (0, 0, o),
            (s, 0, o),
        ] {
            let mut expected: Vec<Triple> = everything
                .iter()
                .copied()
                .filter(|t| {
                    (ps == 0 || t[0] == ps) && (pp == 0 || t[1] == pp) && (po == 0 || t[2] == po)
                })
                .collect();
            if ps == 0 && pp == 0 && po != 0 {
                expected.sort_by_key(|t| (t[1], t[0])); // ??O: predicate first
            }
            let (s, p, o) = (ps as i64, pp as i64, po as i64);
            let got = all(&store, s, p, o, 0);
            assert_eq!(got.len(), expected.len(), "{ps} {pp} {po}");
            assert_eq!(store.estimate(s, p, o), expected.len() as u64);
            if !(ps == 0 && pp == 0 && po != 0) {
                assert_eq!(got, expected, "{ps} {pp} {po}");
            }
            for offset in [
                1,
                expected.len() / 2,
                expected.len().saturating_sub(1),
                expected.len(),
                expected.len() + 2,
            ] {
                assert_eq!(
                    all(&store, s, p, o, offset as u64),
                    got[offset.min(got.len())..],
                    "{ps} {pp} {po} @{offset}"
                );
            }
        }
    }
}

#[test]
fn terms_round_trip() {
    let store = sample();
    let mut buf = Vec::new();
    for gid in (1..store.nb_terms).step_by(37).chain([
        1,
        store.nb_shared,
        store.nb_subjects,
        store.nb_terms,
    ]) {
        buf.clear();
        store.extract_into(gid, &mut buf).unwrap();
        assert_eq!(store.locate(&buf), gid, "{}", String::from_utf8_lossy(&buf));
    }
    assert_eq!(store.locate(b"http://example.org/not-there"), 0);
}

#[test]
fn every_section_locates_its_strings_and_nothing_else() {
    // `Section::locate` compares in place along the front coding: against
    // every string of each section, and strings next to them in byte order
    let store = sample();
    let hdt = &store.hdt;
    for section in [&hdt.shared, &hdt.subjects, &hdt.objects, &hdt.predicates] {
        let mut ids = std::collections::HashMap::new();
        for id in 1..=section.len {
            let mut buf = Vec::new();
            section.extract_into(id, &mut buf).unwrap();
            ids.insert(buf, id);
        }
        for text in ids.keys() {
            let mut near = vec![text.clone(), [text.as_slice(), b"x"].concat()];
            near.push([text.as_slice(), b"\0"].concat());
            if let Some((last, head)) = text.split_last() {
                near.push(head.to_vec());
                near.push([head, &[last.wrapping_add(1)]].concat());
                near.push([head, &[last.wrapping_sub(1)]].concat());
            }
            for probe in near {
                let want = ids.get(&probe).copied().unwrap_or(0);
                assert_eq!(
                    section.locate(&probe),
                    want,
                    "{}",
                    String::from_utf8_lossy(&probe)
                );
            }
        }
        assert_eq!(section.locate(b""), 0);
    }
}
