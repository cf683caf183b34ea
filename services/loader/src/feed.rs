//! The batches as the `hdt` crate's `Hdt::from_triples` takes them: an iterator of triples of
//! terms, run on the interning thread.

use std::sync::mpsc::Receiver;
use std::sync::Arc;

use crate::batch::Batch;
use crate::pool::BATCHES;

/// One term of a shared batch, as `Hdt::from_triples` wants it (`AsRef<str>`).
pub struct TermRef {
    batch: Arc<Batch>,
    index: usize,
}

impl AsRef<str> for TermRef {
    fn as_ref(&self) -> &str {
        self.batch.term(self.index)
    }
}

/// Feeds the batches to `Hdt::from_triples` on the calling thread.
pub struct Feed {
    rx: Receiver<Batch>,
    batch: Arc<Batch>,
    next: usize,
}

impl Feed {
    pub fn new(rx: Receiver<Batch>) -> Self {
        Self { rx, batch: Arc::new(Batch::with_capacity(0)), next: 0 }
    }
}

impl Iterator for Feed {
    type Item = [TermRef; 3];

    fn next(&mut self) -> Option<[TermRef; 3]> {
        while self.next == self.batch.ends.len() {
            let done = std::mem::replace(&mut self.batch, Arc::new(self.rx.recv().ok()?));
            if let Ok(batch) = Arc::try_unwrap(done) {
                BATCHES.give(batch); // the crate has interned (copied) every term of it
            }
            self.next = 0;
        }
        let i = self.next;
        self.next += 3;
        Some([i, i + 1, i + 2].map(|index| TermRef { batch: Arc::clone(&self.batch), index }))
    }
}
