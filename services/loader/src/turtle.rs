//! Turtle: parsed as one stream on the reading thread (the grammar does not split on lines),
//! sent on in batches.

use std::io::{self, Read};
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;

use oxttl::{TurtleParseError, TurtleParser};

use crate::batch::Batch;
use crate::cli::Input;
use crate::events::Problem;
use crate::fingerprint::Fingerprint;
use crate::shared::Shared;

/// Triples per batch sent from a Turtle parser to the interning thread.
const BATCH_TRIPLES: usize = 8192;

#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
pub fn parse_turtle(
    reader: impl Read, input: &Input, seq: u64, bnode_prefix: &str, shared: &Shared, fp: &Fingerprint,
    hashes: &mut Vec<u128>, out: &SyncSender<Batch>,
) -> io::Result<()> {
    let base = &input.base;
    let parser = TurtleParser::new()
        .with_base_iri(base)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("bad base IRI {base:?}: {e}")))?;
    let mut batch = Batch::with_capacity(BATCH_TRIPLES * 100);
    let mut flush = |batch: &mut Batch| {
        fp.extend(batch, 0, hashes);
        shared.triples.fetch_add(batch.triples() as u64, Ordering::Relaxed);
        let _ = out.send(std::mem::replace(batch, Batch::with_capacity(BATCH_TRIPLES * 100)));
    };
    for r in parser.for_reader(reader) {
        match r {
            Ok(t) => {
                batch.push(&t.subject, t.predicate.as_str(), &t.object, bnode_prefix);
                if batch.triples() == BATCH_TRIPLES || batch.text.len() > 1 << 28 {
                    flush(&mut batch);
                }
            }
            Err(TurtleParseError::Syntax(e)) => {
                let loc = e.location();
                let problem = Problem {
                    file: input.display.clone(),
                    line: loc.start.line + 1,
                    column: loc.start.column + 1,
                    reason: e.message().to_owned(),
                };
                if shared.skip {
                    // oxttl resumes after the statement's closing '.'; triples of the statement
                    // completed before the error are kept (see the README).
                    shared.report_skip(&problem);
                } else {
                    shared.record_error(seq, problem);
                    return Ok(());
                }
            }
            Err(TurtleParseError::Io(e)) => return Err(e),
        }
    }
    flush(&mut batch);
    Ok(())
}
