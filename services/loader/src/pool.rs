//! Recycled buffers: the read blocks and the term batches, handed back once used.

use std::sync::Mutex;

use crate::batch::Batch;

/// Buffers handed back for reuse: a fresh megabyte from the allocator is a fresh mmap, whose
/// page faults and zeroing cost several percent of the whole conversion.
pub struct Pool<T> {
    items: Mutex<Vec<T>>,
}

impl<T> Pool<T> {
    const KEEP: usize = 16;

    pub const fn new() -> Self {
        Self { items: Mutex::new(Vec::new()) }
    }

    pub fn take(&self) -> Option<T> {
        self.items.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop()
    }

    pub fn give(&self, item: T) {
        let mut items = self.items.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if items.len() < Self::KEEP {
            items.push(item);
        }
    }
}

/// The blocks read from N-Triples and N-Quads inputs.
pub static BYTES: Pool<Vec<u8>> = Pool::new();
/// The batches of terms, once interned.
pub static BATCHES: Pool<Batch> = Pool::new();
