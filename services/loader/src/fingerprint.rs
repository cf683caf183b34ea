//! Fingerprints of triples, for the count of distinct triples the written HDT is checked against.

use crate::batch::Batch;

/// 128-bit fingerprint of a triple, independent of the crate's interner, so the count of distinct
/// triples we check the HDT against is computed by other code than the one that wrote it.
pub struct Fingerprint {
    pub a: ahash::RandomState,
    b: ahash::RandomState,
}

impl Fingerprint {
    pub fn new() -> Self {
        Self {
            a: ahash::RandomState::with_seeds(0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344),
            b: ahash::RandomState::with_seeds(0xa409_3822, 0x299f_31d0, 0x082e_fa98, 0xec4e_6c89),
        }
    }

    /// Fingerprints of the triples `from..` of a batch.
    pub fn extend(&self, batch: &Batch, from: usize, hashes: &mut Vec<u128>) {
        for t in from..batch.triples() {
            let key = (batch.term(3 * t), batch.term(3 * t + 1), batch.term(3 * t + 2));
            hashes.push((u128::from(self.a.hash_one(key)) << 64) | u128::from(self.b.hash_one(key)));
        }
    }
}
