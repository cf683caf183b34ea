//! What the reading thread, the parser threads and the progress ticker share: the counters, and
//! the earliest error (abort mode) or the skipped statements (skip mode).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::events::{emit, Problem};

pub struct Shared {
    pub skip: bool,
    pub bytes_read: AtomicU64,
    pub triples: AtomicU64,
    pub skipped: AtomicU64,
    pub named_graph: AtomicU64,
    /// Sequence number of the earliest block known to hold an error (abort mode); blocks after it
    /// are not parsed, blocks before it still are, so the error reported is the first in the input.
    pub min_error_seq: AtomicU64,
    pub first_error: Mutex<Option<(u64, Problem)>>,
    pub parsing_done: AtomicBool,
    /// No "skipped" events (sampling).
    quiet: bool,
}

impl Shared {
    pub fn new(skip: bool, quiet: bool) -> Self {
        Shared {
            skip,
            bytes_read: AtomicU64::new(0),
            triples: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            named_graph: AtomicU64::new(0),
            min_error_seq: AtomicU64::new(u64::MAX),
            first_error: Mutex::new(None),
            parsing_done: AtomicBool::new(false),
            quiet,
        }
    }

    pub fn stopped_before(&self, seq: u64) -> bool {
        self.min_error_seq.load(Ordering::Relaxed) < seq
    }

    /// Abort mode: remember the error if it is the earliest so far.
    pub fn record_error(&self, seq: u64, problem: Problem) {
        let mut first = self.first_error.lock().unwrap();
        if first.as_ref().is_none_or(|(s, p)| (seq, problem.line) < (*s, p.line)) {
            *first = Some((seq, problem));
            self.min_error_seq.fetch_min(seq, Ordering::Relaxed);
        }
    }

    pub fn report_skip(&self, problem: &Problem) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
        if !self.quiet {
            emit(&problem.json("skipped"));
        }
    }
}
