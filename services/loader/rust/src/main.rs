//! quanta-rdf2hdt: RDF dumps (N-Triples, N-Quads, Turtle; plain or gzip) into one HDT file.
//!
//! Parsing is oxttl (the parser the `hdt` crate itself uses) with all its strict checks (a fast
//! path parses plain N-Triples lines leniently and runs those checks once per distinct IRI); the
//! HDT is written by the `hdt` crate (`Hdt::from_triples`), never by code of ours. `quanta load` (Python) runs this
//! binary and reads the JSON lines it prints on stdout:
//!
//!   {"event":"progress","bytes":..,"triples":..}      every --progress-ms
//!   {"event":"skipped","file":..,"line":..,"column":..,"reason":..}   --on-error skip, one per statement
//!   {"event":"phase","name":"dictionary"|"write"}
//!   {"event":"error","file":..,"line":..,"column":..,"reason":..}     then exit status 1
//!   {"event":"done",...}                               the summary, exit status 0
//!
//! With `--sample BYTES` it writes nothing and prints, per input, what the first BYTES hold
//! (triples, distinct terms and their bytes): `quanta load`'s memory model extrapolates from it.
//!
//! Usage: quanta-rdf2hdt --output OUT --dataset-iri IRI [--on-error abort|skip] [--threads N]
//!        [--progress-ms MS] [--scope-blank-nodes] --input FORMAT COMPRESSION BASE PATH...
//! where FORMAT is nt, nq or ttl, COMPRESSION is gz or plain, BASE the base IRI for Turtle.
//!
//! Pipeline (why it is shaped like this): the crate's `from_triples` interns terms on the calling
//! thread, so that thread does nothing else; a producer thread reads (and un-gzips) the inputs,
//! cuts line-based formats into line-aligned blocks that worker threads parse in parallel (the
//! same parallelism `hdt convert` gets from splitting a plain file), and parses Turtle itself.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use flate2::read::MultiGzDecoder;
use oxrdf::{GraphName, Literal, NamedOrBlankNode, Term};
use oxttl::{NQuadsParser, NTriplesParser, TurtleParseError, TurtleParser};
use rayon::slice::ParallelSliceMut;
use sha2::{Digest, Sha256};

const XSD_STRING: &str = "http://www.w3.org/2001/XMLSchema#string";
/// Bytes per block handed to a worker: big enough to amortise the hand-off, small enough to
/// keep every core busy on a 100K-triple file.
const BLOCK_BYTES: usize = 1 << 20;
/// Triples per batch sent from a Turtle parser to the interning thread.
const BATCH_TRIPLES: usize = 8192;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    NTriples,
    NQuads,
    Turtle,
}

struct Input {
    format: Format,
    gzip: bool,
    /// Base IRI for relative IRIs (Turtle only; N-Triples and N-Quads have none).
    base: String,
    path: PathBuf,
    display: String,
}

struct Args {
    output: PathBuf,
    dataset_iri: String,
    skip: bool,
    threads: usize,
    progress_ms: u64,
    scope_blank_nodes: bool,
    /// `--sample BYTES`: only measure the first BYTES of each input (for the memory model).
    sample: Option<u64>,
    inputs: Vec<Input>,
}

fn usage(msg: &str) -> ! {
    eprintln!("quanta-rdf2hdt: {msg}");
    eprintln!(
        "usage: quanta-rdf2hdt --output OUT --dataset-iri IRI [--on-error abort|skip] [--threads N] \
         [--progress-ms MS] [--scope-blank-nodes] --input FORMAT COMPRESSION BASE PATH..."
    );
    process::exit(2);
}

fn parse_args() -> Args {
    let mut output = None;
    let mut dataset_iri = None;
    let mut skip = false;
    let mut threads = thread::available_parallelism().map_or(2, std::num::NonZero::get).min(16);
    let mut progress_ms = 0;
    let mut scope_blank_nodes = false;
    let mut sample = None;
    let mut inputs = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().unwrap_or_else(|| usage(&format!("{name} needs a value")));
        match arg.as_str() {
            "--output" => output = Some(PathBuf::from(value("--output"))),
            "--dataset-iri" => dataset_iri = Some(value("--dataset-iri")),
            "--on-error" => match value("--on-error").as_str() {
                "abort" => skip = false,
                "skip" => skip = true,
                other => usage(&format!("--on-error must be abort or skip, not {other}")),
            },
            "--threads" => threads = value("--threads").parse().unwrap_or_else(|_| usage("bad --threads")),
            "--progress-ms" => {
                progress_ms = value("--progress-ms").parse().unwrap_or_else(|_| usage("bad --progress-ms"));
            }
            "--scope-blank-nodes" => scope_blank_nodes = true,
            "--sample" => sample = Some(value("--sample").parse().unwrap_or_else(|_| usage("bad --sample"))),
            "--version" => {
                println!("quanta-rdf2hdt {} (hdt crate 0.7.3)", env!("CARGO_PKG_VERSION"));
                process::exit(0);
            }
            "--input" => {
                let (fmt, comp, base, path) = (value("FORMAT"), value("COMPRESSION"), value("BASE"), value("PATH"));
                let format = match fmt.as_str() {
                    "nt" => Format::NTriples,
                    "nq" => Format::NQuads,
                    "ttl" => Format::Turtle,
                    _ => usage(&format!("unknown format {fmt:?}")),
                };
                let gzip = match comp.as_str() {
                    "gz" => true,
                    "plain" => false,
                    _ => usage(&format!("unknown compression {comp:?}")),
                };
                inputs.push(Input { format, gzip, base, path: PathBuf::from(&path), display: path });
            }
            other => usage(&format!("unknown option {other}")),
        }
    }
    let output =
        output.unwrap_or_else(|| if sample.is_some() { PathBuf::new() } else { usage("--output is required") });
    let dataset_iri = dataset_iri.unwrap_or_default();
    if inputs.is_empty() {
        usage("no input");
    }
    Args { output, dataset_iri, skip, threads: threads.max(1), progress_ms, scope_blank_nodes, sample, inputs }
}

// ---------------------------------------------------------------- output lines

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

static STDOUT: Mutex<()> = Mutex::new(());

/// One JSON object per line; the lock keeps lines from interleaving across threads.
fn emit(line: &str) {
    let _guard = STDOUT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut out = io::stdout().lock();
    // A closed stdout (the driver died) must not panic a worker: the exit follows anyway.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[derive(Clone)]
struct Problem {
    file: String,
    line: u64,
    column: u64,
    reason: String,
}

impl Problem {
    fn json(&self, event: &str) -> String {
        format!(
            "{{\"event\":\"{event}\",\"file\":{},\"line\":{},\"column\":{},\"reason\":{}}}",
            json_str(&self.file),
            self.line,
            self.column,
            json_str(&self.reason)
        )
    }
}

fn fatal(file: &str, reason: &str) -> ! {
    emit(&Problem { file: file.to_owned(), line: 0, column: 0, reason: reason.to_owned() }.json("error"));
    process::exit(1);
}

// ---------------------------------------------------------------- shared state

struct Shared {
    skip: bool,
    bytes_read: AtomicU64,
    triples: AtomicU64,
    skipped: AtomicU64,
    named_graph: AtomicU64,
    /// Sequence number of the earliest block known to hold an error (abort mode); blocks after it
    /// are not parsed, blocks before it still are, so the error reported is the first in the input.
    min_error_seq: AtomicU64,
    first_error: Mutex<Option<(u64, Problem)>>,
    parsing_done: AtomicBool,
    /// No "skipped" events (sampling).
    quiet: bool,
}

impl Shared {
    fn new(skip: bool, quiet: bool) -> Self {
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

    fn stopped_before(&self, seq: u64) -> bool {
        self.min_error_seq.load(Ordering::Relaxed) < seq
    }

    /// Abort mode: remember the error if it is the earliest so far.
    fn record_error(&self, seq: u64, problem: Problem) {
        let mut first = self.first_error.lock().unwrap();
        if first.as_ref().is_none_or(|(s, p)| (seq, problem.line) < (*s, p.line)) {
            *first = Some((seq, problem));
            self.min_error_seq.fetch_min(seq, Ordering::Relaxed);
        }
    }

    fn report_skip(&self, problem: &Problem) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
        if !self.quiet {
            emit(&problem.json("skipped"));
        }
    }
}

/// Counts (for the progress bar) and hashes (for the metadata) the raw bytes of an input.
struct Tap<R> {
    inner: R,
    sha: Sha256,
    shared: Arc<Shared>,
}

impl<R: Read> Read for Tap<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sha.update(&buf[..n]);
        self.shared.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

// ---------------------------------------------------------------- terms in HDT syntax

/// Terms of many triples packed into one string: one allocation per batch instead of one per
/// term, and the terms are freed on the thread that made them rather than on the interning
/// thread (glibc's malloc is slow at cross-thread frees).
struct Batch {
    text: String,
    /// End offset of each term in `text`; three per triple.
    ends: Vec<u32>,
}

impl Batch {
    fn with_capacity(bytes: usize) -> Self {
        Self { text: String::with_capacity(bytes), ends: Vec::with_capacity(bytes / 24) }
    }

    /// An empty batch, recycled when one is available.
    fn recycled(bytes: usize) -> Self {
        match BATCHES.take() {
            Some(mut b) => {
                b.text.clear();
                b.ends.clear();
                b
            }
            None => Self::with_capacity(bytes),
        }
    }

    fn end_term(&mut self) {
        self.ends.push(u32::try_from(self.text.len()).expect("batch over 4 GiB"));
    }

    fn mark(&self) -> (usize, usize) {
        (self.text.len(), self.ends.len())
    }

    fn rollback(&mut self, mark: (usize, usize)) {
        self.text.truncate(mark.0);
        self.ends.truncate(mark.1);
    }

    fn term(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    fn triples(&self) -> usize {
        self.ends.len() / 3
    }

    /// Appends a triple in the HDT dictionary spelling (hdt-cpp's, which the engine reads):
    /// IRIs bare, literals quoted with their lexical form unescaped, blank nodes `_:label`.
    fn push(&mut self, subject: &NamedOrBlankNode, predicate: &str, object: &Term, bnode_prefix: &str) {
        match subject {
            NamedOrBlankNode::NamedNode(n) => self.text.push_str(n.as_str()),
            NamedOrBlankNode::BlankNode(b) => self.push_bnode(b.as_str(), bnode_prefix),
        }
        self.end_term();
        self.text.push_str(predicate);
        self.end_term();
        match object {
            Term::NamedNode(n) => self.text.push_str(n.as_str()),
            Term::BlankNode(b) => self.push_bnode(b.as_str(), bnode_prefix),
            Term::Literal(l) => self.push_literal(l),
        }
        self.end_term();
    }

    fn push_bnode(&mut self, label: &str, prefix: &str) {
        self.text.push_str("_:");
        self.text.push_str(prefix);
        self.text.push_str(label);
    }

    fn push_literal(&mut self, l: &Literal) {
        self.text.push('"');
        self.text.push_str(l.value());
        self.text.push('"');
        if let Some(lang) = l.language() {
            self.text.push('@');
            self.text.push_str(lang);
        } else {
            let dt = l.datatype().as_str();
            if dt != XSD_STRING {
                self.text.push_str("^^<");
                self.text.push_str(dt);
                self.text.push('>');
            }
        }
    }
}

/// Buffers handed back for reuse: a fresh megabyte from the allocator is a fresh mmap, whose
/// page faults and zeroing cost several percent of the whole conversion.
struct Pool<T> {
    items: Mutex<Vec<T>>,
}

impl<T> Pool<T> {
    const KEEP: usize = 16;

    const fn new() -> Self {
        Self { items: Mutex::new(Vec::new()) }
    }

    fn take(&self) -> Option<T> {
        self.items.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop()
    }

    fn give(&self, item: T) {
        let mut items = self.items.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if items.len() < Self::KEEP {
            items.push(item);
        }
    }
}

static BYTES: Pool<Vec<u8>> = Pool::new();
static BATCHES: Pool<Batch> = Pool::new();

/// 128-bit fingerprint of a triple, independent of the crate's interner, so the count of distinct
/// triples we check the HDT against is computed by other code than the one that wrote it.
struct Fingerprint {
    a: ahash::RandomState,
    b: ahash::RandomState,
}

impl Fingerprint {
    fn new() -> Self {
        Self {
            a: ahash::RandomState::with_seeds(0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344),
            b: ahash::RandomState::with_seeds(0xa409_3822, 0x299f_31d0, 0x082e_fa98, 0xec4e_6c89),
        }
    }

    /// Fingerprints of the triples `from..` of a batch.
    fn extend(&self, batch: &Batch, from: usize, hashes: &mut Vec<u128>) {
        for t in from..batch.triples() {
            let key = (batch.term(3 * t), batch.term(3 * t + 1), batch.term(3 * t + 2));
            hashes.push((u128::from(self.a.hash_one(key)) << 64) | u128::from(self.b.hash_one(key)));
        }
    }
}

// ---------------------------------------------------------------- line-based formats

struct Block {
    seq: u64,
    input: usize,
    first_line: u64,
    data: Vec<u8>,
}

const RDF_LANG_STRING: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString";

/// IRIs already validated, so that the IRIs repeated all over a dump are checked once: the strict
/// parser re-validates every occurrence, a fifth of the whole conversion's CPU. Direct-mapped and
/// exact (a hit compares the string).
struct IriCache {
    slots: Vec<Option<(u64, Box<str>)>>,
    hasher: ahash::RandomState,
}

impl IriCache {
    const SLOTS: usize = 1 << 14;

    fn new() -> Self {
        Self { slots: vec![None; Self::SLOTS], hasher: ahash::RandomState::with_seeds(1, 2, 3, 4) }
    }

    fn valid(&mut self, iri: &str) -> bool {
        let h = self.hasher.hash_one(iri);
        let slot = &mut self.slots[(h as usize) & (Self::SLOTS - 1)];
        if matches!(slot, Some((sh, s)) if *sh == h && &**s == iri) {
            return true;
        }
        if oxiri::Iri::parse(iri).is_err() {
            return false;
        }
        *slot = Some((h, iri.into()));
        true
    }

    /// What the strict parser checks and the lenient one does not, for a line without escapes
    /// or carriage returns: IRIs, language tags, and no rdf:langString without a language.
    fn valid_triple(&mut self, subject: &NamedOrBlankNode, predicate: &str, object: &Term) -> bool {
        if let NamedOrBlankNode::NamedNode(n) = subject {
            if !self.valid(n.as_str()) {
                return false;
            }
        }
        if !self.valid(predicate) {
            return false;
        }
        match object {
            Term::NamedNode(n) => self.valid(n.as_str()),
            Term::BlankNode(_) => true,
            Term::Literal(l) => match l.language() {
                Some(lang) => oxilangtag::LanguageTag::parse(lang).is_ok(),
                None => {
                    let dt = l.datatype().as_str();
                    dt == XSD_STRING || (dt != RDF_LANG_STRING && self.valid(dt))
                }
            },
        }
    }
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
fn parse_block(
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
fn split_lines(
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

// ---------------------------------------------------------------- Turtle

#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
fn parse_turtle(
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

// ---------------------------------------------------------------- producer

struct Source {
    path: String,
    bytes: u64,
    sha256: String,
}

struct Produced {
    sources: Vec<Source>,
    distinct: u64,
    parse_seconds: f64,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn open(input: &Input, shared: &Arc<Shared>) -> Tap<File> {
    match File::open(&input.path) {
        Ok(f) => Tap { inner: f, sha: Sha256::new(), shared: Arc::clone(shared) },
        Err(e) => fatal(&input.display, &format!("cannot open: {e}")),
    }
}

fn produce(args: &Args, shared: &Arc<Shared>, triples_out: SyncSender<Batch>, started: Instant) -> Produced {
    let inputs = &args.inputs;
    // With several inputs, blank node labels are scoped per input (RDF merge): `_:b` in two files
    // are two different nodes.
    let prefixes: Vec<String> = (0..inputs.len())
        .map(|i| if args.scope_blank_nodes { format!("f{}_", i + 1) } else { String::new() })
        .collect();
    let fp = Fingerprint::new();
    let (block_tx, block_rx) = sync_channel::<Block>(args.threads * 2);
    let block_rx = Mutex::new(block_rx);
    let mut sources = Vec::with_capacity(inputs.len());
    let mut all_hashes: Vec<u128> = Vec::new();

    thread::scope(|scope| {
        let workers: Vec<_> = (0..args.threads)
            .map(|_| {
                let (block_rx, prefixes, fp, shared, out) = (&block_rx, &prefixes, &fp, &**shared, triples_out.clone());
                scope.spawn(move || {
                    let mut hashes = Vec::new();
                    let mut iris = IriCache::new();
                    loop {
                        let next = block_rx.lock().unwrap().recv();
                        let Ok(block) = next else { break };
                        if shared.stopped_before(block.seq) {
                            continue;
                        }
                        let input = &inputs[block.input];
                        let prefix = &prefixes[block.input];
                        let batch = parse_block(&block, input, prefix, shared, fp, &mut hashes, &mut iris);
                        BYTES.give(block.data);
                        if batch.triples() > 0 && out.send(batch).is_err() {
                            break;
                        }
                    }
                    hashes
                })
            })
            .collect();

        let mut seq = 0u64;
        for (i, input) in inputs.iter().enumerate() {
            if shared.min_error_seq.load(Ordering::Relaxed) != u64::MAX {
                break;
            }
            let mut tap = open(input, shared);
            let bytes = tap.inner.metadata().map(|m| m.len()).unwrap_or(0);
            let result = match (input.format, input.gzip) {
                (Format::Turtle, gzip) => {
                    let this_seq = seq;
                    seq += 1;
                    let reader: Box<dyn Read> = if gzip {
                        Box::new(MultiGzDecoder::new(BufReader::with_capacity(1 << 16, &mut tap)))
                    } else {
                        Box::new(BufReader::with_capacity(1 << 16, &mut tap))
                    };
                    parse_turtle(reader, input, this_seq, &prefixes[i], shared, &fp, &mut all_hashes, &triples_out)
                }
                (_, true) => {
                    let mut gz = MultiGzDecoder::new(BufReader::with_capacity(1 << 16, &mut tap));
                    split_lines(&mut gz, i, &mut seq, &block_tx, shared)
                }
                (_, false) => split_lines(&mut tap, i, &mut seq, &block_tx, shared),
            };
            if let Err(e) = result {
                fatal(&input.display, &format!("cannot read: {e}"));
            }
            sources.push(Source { path: input.display.clone(), bytes, sha256: hex(&tap.sha.finalize()) });
        }
        drop(block_tx);
        for w in workers {
            all_hashes.append(&mut w.join().expect("parser thread panicked"));
        }
    });
    drop(triples_out);

    if let Some((_, problem)) = shared.first_error.lock().unwrap().take() {
        emit(&problem.json("error"));
        process::exit(1);
    }
    shared.parsing_done.store(true, Ordering::Relaxed);
    let parse_seconds = started.elapsed().as_secs_f64();
    emit("{\"event\":\"phase\",\"name\":\"dictionary\"}");
    all_hashes.par_sort_unstable();
    all_hashes.dedup();
    Produced { sources, distinct: all_hashes.len() as u64, parse_seconds }
}

/// One term of a shared batch, as `Hdt::from_triples` wants it (`AsRef<str>`).
struct TermRef {
    batch: Arc<Batch>,
    index: usize,
}

impl AsRef<str> for TermRef {
    fn as_ref(&self) -> &str {
        self.batch.term(self.index)
    }
}

/// Feeds the batches to `Hdt::from_triples` on the calling thread.
struct Feed {
    rx: Receiver<Batch>,
    batch: Arc<Batch>,
    next: usize,
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

/// Counts and hashes what goes into the output file.
struct HashingWriter<W> {
    inner: W,
    sha: Sha256,
    bytes: u64,
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()))
        })
        .map_or(0, |kb| kb * 1024)
}

/// Triples, distinct terms and distinct term bytes in the first `limit` uncompressed bytes of each
/// input; malformed statements are ignored (the sample may end mid-statement).
fn sample(args: &Args, limit: u64) {
    let shared = Arc::new(Shared::new(true, true));
    let fp = Fingerprint::new();
    for input in &args.inputs {
        let mut tap = open(input, &shared);
        let mut data = Vec::new();
        let read = if input.gzip {
            MultiGzDecoder::new(BufReader::new(&mut tap)).take(limit).read_to_end(&mut data)
        } else {
            (&mut tap).take(limit).read_to_end(&mut data)
        };
        if let Err(e) = read {
            fatal(&input.display, &format!("cannot read: {e}"));
        }
        let complete = (data.len() as u64) < limit;
        let mut batch = Batch::with_capacity(data.len());
        let sampled;
        if input.format == Format::Turtle {
            sampled = data.len();
            for t in TurtleParser::new().with_base_iri(&input.base).unwrap_or_default().for_slice(&data).flatten() {
                batch.push(&t.subject, t.predicate.as_str(), &t.object, "");
            }
        } else {
            if !complete {
                data.truncate(memchr::memrchr(b'\n', &data).map_or(0, |i| i + 1));
            }
            sampled = data.len();
            let block = Block { seq: 0, input: 0, first_line: 1, data };
            batch = parse_block(&block, input, "", &shared, &fp, &mut Vec::new(), &mut IriCache::new());
        }
        let mut seen = std::collections::HashSet::with_capacity(batch.ends.len());
        let mut distinct_bytes = 0u64;
        for i in 0..batch.ends.len() {
            let term = batch.term(i);
            if seen.insert(fp.a.hash_one(term)) {
                distinct_bytes += term.len() as u64;
            }
        }
        emit(&format!(
            "{{\"event\":\"sample\",\"file\":{},\"bytes\":{},\"complete\":{complete},\"triples\":{},\
             \"distinct_terms\":{},\"distinct_term_bytes\":{distinct_bytes}}}",
            json_str(&input.display),
            sampled,
            batch.triples(),
            seen.len()
        ));
    }
}

fn main() {
    let args = parse_args();
    if let Some(limit) = args.sample {
        sample(&args, limit);
        return;
    }
    let started = Instant::now();
    let shared = Arc::new(Shared::new(args.skip, false));

    if args.progress_ms > 0 {
        let shared = Arc::clone(&shared);
        let every = Duration::from_millis(args.progress_ms);
        thread::spawn(move || {
            // until the process exits: the driver also uses these ticks to watch memory
            loop {
                thread::sleep(every);
                emit(&format!(
                    "{{\"event\":\"progress\",\"bytes\":{},\"triples\":{},\"parsed\":{}}}",
                    shared.bytes_read.load(Ordering::Relaxed),
                    shared.triples.load(Ordering::Relaxed),
                    shared.parsing_done.load(Ordering::Relaxed)
                ));
            }
        });
    }

    let (tx, rx) = sync_channel::<Batch>(args.threads * 2);
    let producer = {
        let shared = Arc::clone(&shared);
        let args = &args;
        thread::scope(|scope| {
            let producer = scope.spawn(move || produce(args, &shared, tx, started));
            let hdt = hdt::Hdt::from_triples(
                Feed { rx, batch: Arc::new(Batch::with_capacity(0)), next: 0 },
                &args.dataset_iri,
            );
            let produced = producer.join().expect("producer thread panicked");
            (hdt, produced)
        })
    };
    let (hdt, produced) = producer;
    let hdt = hdt.unwrap_or_else(|e| fatal("", &format!("HDT construction failed: {e}")));
    let build_seconds = started.elapsed().as_secs_f64() - produced.parse_seconds;

    emit("{\"event\":\"phase\",\"name\":\"write\"}");
    let write_started = Instant::now();
    let file = File::create(&args.output)
        .unwrap_or_else(|e| fatal(&args.output.display().to_string(), &format!("cannot create: {e}")));
    let mut writer = HashingWriter { inner: BufWriter::with_capacity(1 << 20, file), sha: Sha256::new(), bytes: 0 };
    let written = hdt.write(&mut writer).map_err(|e| e.to_string());
    if let Err(e) = written.and_then(|()| writer.inner.get_ref().sync_all().map_err(|e| e.to_string())) {
        fatal(&args.output.display().to_string(), &format!("cannot write: {e}"));
    }
    let write_seconds = write_started.elapsed().as_secs_f64();
    let hdt_triples = hdt.triples.adjlist_z.sequence.entries;

    let sources: Vec<String> = produced
        .sources
        .iter()
        .map(|s| format!("{{\"path\":{},\"bytes\":{},\"sha256\":\"{}\"}}", json_str(&s.path), s.bytes, s.sha256))
        .collect();
    emit(&format!(
        "{{\"event\":\"done\",\"triples_read\":{},\"distinct_triples\":{},\"hdt_triples\":{},\"skipped\":{},\
         \"named_graph_triples\":{},\"hdt_bytes\":{},\"hdt_sha256\":\"{}\",\"parse_seconds\":{:.3},\
         \"build_seconds\":{:.3},\"write_seconds\":{:.3},\"seconds\":{:.3},\"peak_rss_bytes\":{},\
         \"tool\":{{\"name\":\"quanta-rdf2hdt\",\"version\":\"{}\",\"writer\":\"hdt crate 0.7.3\",\
         \"parser\":\"oxttl 0.2\"}},\"sources\":[{}]}}",
        shared.triples.load(Ordering::Relaxed),
        produced.distinct,
        hdt_triples,
        shared.skipped.load(Ordering::Relaxed),
        shared.named_graph.load(Ordering::Relaxed),
        writer.bytes,
        hex(&writer.sha.finalize()),
        produced.parse_seconds,
        build_seconds,
        write_seconds,
        started.elapsed().as_secs_f64(),
        peak_rss_bytes(),
        env!("CARGO_PKG_VERSION"),
        sources.join(",")
    ));
}
