//! N-Triples and N-Quads: the input cut into line-aligned blocks, each parsed line by line on a
//! parser thread (a fast lenient path for plain lines, oxttl's strict parser for the rest).

use std::io::{self, Read};
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;

use oxrdf::GraphName;
use oxttl::{NQuadsParser, NTriplesParser};

use crate::batch::Batch;
use crate::cli::{Format, Input};
use crate::events::Problem;
use crate::fingerprint::Fingerprint;
use crate::iri_cache::IriCache;
use crate::pool::BYTES;
use crate::shared::Shared;

/// Bytes per block handed to a worker: big enough to amortise the hand-off, small enough to
/// keep every core busy on a 100K-triple file.
const BLOCK_BYTES: usize = 1 << 20;

/// A line-aligned piece of one input, parsed by one parser thread; `seq` orders the blocks of
/// all inputs (the earliest error is the one reported).
pub struct Block {
    pub seq: u64,
    pub input: usize,
    pub first_line: u64,
    pub data: Vec<u8>,
}

/// Lines the lenient parser reads exactly as the strict one, given the checks of `IriCache`:
/// no backslash (escapes, surrogate pairs) and no carriage return but a final one.
fn plain_line(line: &[u8]) -> bool {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    memchr::memchr2(b'\\', b'\r', body).is_none()
}

/// Parses one block line by line. Each line gets its own slice parser: the grammar keeps a
/// statement on one line, a parser that sees the end of its input never waits for the next line,
/// so every triple and every error belongs to a known line, and a line with an error yields no
/// triple at all (oxttl can report an error and still emit the line's triple, e.g. a missing dot).
///
/// Fast path: a plain line is parsed leniently and checked by `IriCache`; anything it rejects
/// (and every line with an escape) is parsed again strictly, which gives oxttl's own error.
pub fn parse_block(
    block: &Block, input: &Input, bnode_prefix: &str, shared: &Shared, fp: &Fingerprint, hashes: &mut Vec<u128>,
    iris: &mut IriCache,
) -> Batch {
    let data = &block.data;
    let quads = input.format == Format::NQuads;
    let mut batch = Batch::recycled(data.len());
    let mut start = 0;
    let mut line_no = block.first_line;
    let mut named = 0u64;
    while start < data.len() {
        let end = memchr::memchr(b'\n', &data[start..]).map_or(data.len(), |i| start + i + 1);
        let line = &data[start..end];
        start = end;
        line_no += 1;
        let mark = batch.mark();
        if plain_line(line) {
            let mut ok = true;
            let mut line_named = 0u64;
            if quads {
                for r in NQuadsParser::new().lenient().for_slice(line) {
                    let Ok(q) = r else {
                        ok = false;
                        break;
                    };
                    let graph_ok = match &q.graph_name {
                        GraphName::NamedNode(g) => iris.valid(g.as_str()),
                        _ => true,
                    };
                    if !graph_ok || !iris.valid_triple(&q.subject, q.predicate.as_str(), &q.object) {
                        ok = false;
                        break;
                    }
                    batch.push(&q.subject, q.predicate.as_str(), &q.object, bnode_prefix);
                    line_named += u64::from(q.graph_name != GraphName::DefaultGraph);
                }
            } else {
                for r in NTriplesParser::new().lenient().for_slice(line) {
                    let Ok(t) = r else {
                        ok = false;
                        break;
                    };
                    if !iris.valid_triple(&t.subject, t.predicate.as_str(), &t.object) {
                        ok = false;
                        break;
                    }
                    batch.push(&t.subject, t.predicate.as_str(), &t.object, bnode_prefix);
                }
            }
            if ok {
                named += line_named;
                continue;
            }
            batch.rollback(mark);
        }
        let mut line_named = 0u64;
        let mut error: Option<(u64, String)> = None;
        let mut on_error = |e: oxttl::TurtleSyntaxError| {
            if error.is_none() {
                // the parser saw only this line: its "end of file" is the end of the line
                let reason = e.message().replace("end of file", "end of line");
                error = Some((e.location().start.column + 1, reason));
            }
        };
        if quads {
            for r in NQuadsParser::new().for_slice(line) {
                match r {
                    Ok(q) => {
                        batch.push(&q.subject, q.predicate.as_str(), &q.object, bnode_prefix);
                        line_named += u64::from(q.graph_name != GraphName::DefaultGraph);
                    }
                    Err(e) => on_error(e),
                }
            }
        } else {
            for r in NTriplesParser::new().for_slice(line) {
                match r {
                    Ok(t) => batch.push(&t.subject, t.predicate.as_str(), &t.object, bnode_prefix),
                    Err(e) => on_error(e),
                }
            }
        }
        if let Some((column, reason)) = error {
            batch.rollback(mark);
            let problem = Problem { file: input.display.clone(), line: line_no - 1, column, reason };
            if shared.skip {
                shared.report_skip(&problem);
            } else {
                shared.record_error(block.seq, problem);
                return batch;
            }
        } else {
            named += line_named;
        }
    }
    fp.extend(&batch, 0, hashes);
    shared.named_graph.fetch_add(named, Ordering::Relaxed);
    shared.triples.fetch_add(batch.triples() as u64, Ordering::Relaxed);
    batch
}

/// Reads as much as fits in `buf` (short only at end of input).
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Cuts a line-based input into line-aligned blocks for the workers.
pub fn split_lines(
    reader: &mut impl Read, input: usize, next_seq: &mut u64, blocks: &SyncSender<Block>, shared: &Shared,
) -> io::Result<()> {
    let mut carry: Vec<u8> = Vec::new();
    let mut line = 1u64;
    loop {
        if shared.min_error_seq.load(Ordering::Relaxed) != u64::MAX {
            return Ok(());
        }
        let mut buf = if carry.len() >= BLOCK_BYTES {
            std::mem::take(&mut carry) // inside a very long line: keep growing it, no copy
        } else {
            let mut buf = BYTES.take().unwrap_or_default();
            buf.clear();
            buf.extend_from_slice(&carry);
            carry.clear();
            buf
        };
        let kept = buf.len();
        buf.resize(kept + BLOCK_BYTES, 0);
        let n = read_full(reader, &mut buf[kept..])?;
        buf.truncate(kept + n);
        if n == 0 {
            if !buf.is_empty() {
                let _ = blocks.send(Block { seq: *next_seq, input, first_line: line, data: buf });
                *next_seq += 1;
            }
            return Ok(());
        }
        let Some(last) = memchr::memrchr(b'\n', &buf) else {
            carry = buf; // one line longer than a block: keep reading
            continue;
        };
        carry.extend_from_slice(&buf[last + 1..]);
        buf.truncate(last + 1);
        let lines = memchr::memchr_iter(b'\n', &buf).count() as u64;
        let seq = *next_seq;
        *next_seq += 1;
        if blocks.send(Block { seq, input, first_line: line, data: buf }).is_err() {
            return Ok(());
        }
        line += lines;
    }
}
