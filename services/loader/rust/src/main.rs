//! quanta-rdf2hdt: RDF dumps (N-Triples, N-Quads, Turtle; plain or gzip) into one HDT file.
//!
//! Parsing is oxttl (strict, the parser the `hdt` crate itself uses); the HDT is written by the
//! `hdt` crate (`Hdt::from_triples`), never by code of ours. `quanta load` (Python) runs this
//! binary and reads the JSON lines it prints on stdout:
//!
//!   {"event":"progress","bytes":..,"triples":..}      every --progress-ms
//!   {"event":"skipped","file":..,"line":..,"column":..,"reason":..}   --on-error skip, one per statement
//!   {"event":"phase","name":"dictionary"|"write"}
//!   {"event":"error","file":..,"line":..,"column":..,"reason":..}     then exit status 1
//!   {"event":"done",...}                               the summary, exit status 0
//!
//! Usage: quanta-rdf2hdt --output OUT --base-uri IRI [--on-error abort|skip] [--threads N]
//!        [--progress-ms MS] [--scope-blank-nodes] FORMAT:COMPRESSION:PATH...
//! where FORMAT is nt, nq or ttl and COMPRESSION is gz or plain.
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

type StrTriple = [String; 3];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    NTriples,
    NQuads,
    Turtle,
}

struct Input {
    format: Format,
    gzip: bool,
    path: PathBuf,
    display: String,
}

struct Args {
    output: PathBuf,
    base_uri: String,
    skip: bool,
    threads: usize,
    progress_ms: u64,
    scope_blank_nodes: bool,
    inputs: Vec<Input>,
}

fn usage(msg: &str) -> ! {
    eprintln!("quanta-rdf2hdt: {msg}");
    eprintln!(
        "usage: quanta-rdf2hdt --output OUT --base-uri IRI [--on-error abort|skip] [--threads N] \
         [--progress-ms MS] [--scope-blank-nodes] FORMAT:COMPRESSION:PATH..."
    );
    process::exit(2);
}

fn parse_args() -> Args {
    let mut output = None;
    let mut base_uri = None;
    let mut skip = false;
    let mut threads = thread::available_parallelism().map_or(2, std::num::NonZero::get).min(16);
    let mut progress_ms = 0;
    let mut scope_blank_nodes = false;
    let mut inputs = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().unwrap_or_else(|| usage(&format!("{name} needs a value")));
        match arg.as_str() {
            "--output" => output = Some(PathBuf::from(value("--output"))),
            "--base-uri" => base_uri = Some(value("--base-uri")),
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
            "--version" => {
                println!("quanta-rdf2hdt {} (hdt crate 0.7.3)", env!("CARGO_PKG_VERSION"));
                process::exit(0);
            }
            spec if !spec.starts_with("--") => {
                let mut parts = spec.splitn(3, ':');
                let (Some(fmt), Some(comp), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
                    usage(&format!("input {spec:?} is not FORMAT:COMPRESSION:PATH"));
                };
                let format = match fmt {
                    "nt" => Format::NTriples,
                    "nq" => Format::NQuads,
                    "ttl" => Format::Turtle,
                    _ => usage(&format!("unknown format {fmt:?}")),
                };
                let gzip = match comp {
                    "gz" => true,
                    "plain" => false,
                    _ => usage(&format!("unknown compression {comp:?}")),
                };
                inputs.push(Input { format, gzip, path: PathBuf::from(path), display: path.to_owned() });
            }
            other => usage(&format!("unknown option {other}")),
        }
    }
    let output = output.unwrap_or_else(|| usage("--output is required"));
    let base_uri = base_uri.unwrap_or_else(|| usage("--base-uri is required"));
    if inputs.is_empty() {
        usage("no input");
    }
    Args { output, base_uri, skip, threads: threads.max(1), progress_ms, scope_blank_nodes, inputs }
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
}

impl Shared {
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
        emit(&problem.json("skipped"));
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

/// The HDT dictionary spelling (hdt-cpp's, which the engine reads): IRIs bare, literals quoted
/// with their lexical form unescaped, blank nodes `_:label`.
struct Speller {
    /// With several inputs, blank node labels are scoped per input (RDF merge): `_:b` in two
    /// files are two different nodes.
    bnode_prefix: String,
}

impl Speller {
    fn subject(&self, s: NamedOrBlankNode) -> String {
        match s {
            NamedOrBlankNode::NamedNode(n) => n.into_string(),
            NamedOrBlankNode::BlankNode(b) => self.bnode(b.as_str()),
        }
    }

    fn object(&self, o: Term) -> String {
        match o {
            Term::NamedNode(n) => n.into_string(),
            Term::BlankNode(b) => self.bnode(b.as_str()),
            Term::Literal(l) => literal(l),
        }
    }

    fn bnode(&self, label: &str) -> String {
        let mut s = String::with_capacity(2 + self.bnode_prefix.len() + label.len());
        s.push_str("_:");
        s.push_str(&self.bnode_prefix);
        s.push_str(label);
        s
    }
}

fn literal(l: Literal) -> String {
    let (value, datatype, language) = l.destruct();
    let mut s = String::with_capacity(value.len() + 2 + language.as_ref().map_or(0, |l| l.len() + 1));
    s.push('"');
    s.push_str(&value);
    s.push('"');
    if let Some(lang) = language {
        s.push('@');
        s.push_str(&lang);
    } else if let Some(dt) = datatype {
        if dt.as_str() != XSD_STRING {
            s.push_str("^^<");
            s.push_str(dt.as_str());
            s.push('>');
        }
    }
    s
}

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

    fn of(&self, t: &StrTriple) -> u128 {
        let key = (&t[0], &t[1], &t[2]);
        ((self.a.hash_one(key) as u128) << 64) | self.b.hash_one(key) as u128
    }
}

// ---------------------------------------------------------------- line-based formats

struct Block {
    seq: u64,
    input: usize,
    first_line: u64,
    data: Vec<u8>,
}

enum LineParser {
    Triples(oxttl::ntriples::LowLevelNTriplesParser),
    Quads(oxttl::nquads::LowLevelNQuadsParser),
}

/// Parses one block line by line: each line is fed alone so that every triple and every error
/// belongs to a known line, and a line with any error yields no triple at all.
fn parse_block(
    block: &Block, inputs: &[Input], speller: &Speller, shared: &Shared, fp: &Fingerprint, hashes: &mut Vec<u128>,
) -> Vec<StrTriple> {
    let input = &inputs[block.input];
    let mut parser = match input.format {
        Format::NQuads => LineParser::Quads(NQuadsParser::new().low_level()),
        _ => LineParser::Triples(NTriplesParser::new().low_level()),
    };
    let mut out = Vec::with_capacity(block.data.len() / 100);
    let mut line_triples: Vec<(StrTriple, bool)> = Vec::with_capacity(2);
    let mut start = 0;
    let mut line_no = block.first_line;
    let data = &block.data;
    while start < data.len() {
        let end = memchr::memchr(b'\n', &data[start..]).map_or(data.len(), |i| start + i + 1);
        let line = &data[start..end];
        let mut error: Option<(u64, String)> = None;
        line_triples.clear();
        match &mut parser {
            LineParser::Triples(p) => {
                p.extend_from_slice(line);
                if end == data.len() && line.last() != Some(&b'\n') {
                    p.end();
                }
                while let Some(r) = p.parse_next() {
                    match r {
                        Ok(t) => line_triples.push((
                            [speller.subject(t.subject), t.predicate.into_string(), speller.object(t.object)],
                            false,
                        )),
                        Err(e) => {
                            if error.is_none() {
                                error = Some((e.location().start.column + 1, e.message().to_owned()));
                            }
                        }
                    }
                }
            }
            LineParser::Quads(p) => {
                p.extend_from_slice(line);
                if end == data.len() && line.last() != Some(&b'\n') {
                    p.end();
                }
                while let Some(r) = p.parse_next() {
                    match r {
                        Ok(q) => line_triples.push((
                            [speller.subject(q.subject), q.predicate.into_string(), speller.object(q.object)],
                            q.graph_name != GraphName::DefaultGraph,
                        )),
                        Err(e) => {
                            if error.is_none() {
                                error = Some((e.location().start.column + 1, e.message().to_owned()));
                            }
                        }
                    }
                }
            }
        }
        if let Some((column, reason)) = error {
            let problem = Problem { file: input.display.clone(), line: line_no, column, reason };
            if shared.skip {
                shared.report_skip(&problem);
            } else {
                shared.record_error(block.seq, problem);
                return out;
            }
        } else {
            for (t, named) in line_triples.drain(..) {
                if named {
                    shared.named_graph.fetch_add(1, Ordering::Relaxed);
                }
                hashes.push(fp.of(&t));
                out.push(t);
            }
        }
        start = end;
        line_no += 1;
    }
    shared.triples.fetch_add(out.len() as u64, Ordering::Relaxed);
    out
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
        let mut buf = std::mem::take(&mut carry);
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
        carry = buf[last + 1..].to_vec();
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

fn parse_turtle(
    reader: impl Read, input: &Input, base_uri: &str, seq: u64, speller: &Speller, shared: &Shared,
    fp: &Fingerprint, hashes: &mut Vec<u128>, out: &SyncSender<Vec<StrTriple>>,
) -> io::Result<()> {
    let parser = TurtleParser::new()
        .with_base_iri(base_uri)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("bad base IRI {base_uri:?}: {e}")))?;
    let mut batch = Vec::with_capacity(BATCH_TRIPLES);
    for r in parser.for_reader(reader) {
        match r {
            Ok(t) => {
                let t = [speller.subject(t.subject), t.predicate.into_string(), speller.object(t.object)];
                hashes.push(fp.of(&t));
                batch.push(t);
                if batch.len() == BATCH_TRIPLES {
                    shared.triples.fetch_add(batch.len() as u64, Ordering::Relaxed);
                    let _ = out.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH_TRIPLES)));
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
                    break;
                }
            }
            Err(TurtleParseError::Io(e)) => return Err(e),
        }
    }
    shared.triples.fetch_add(batch.len() as u64, Ordering::Relaxed);
    let _ = out.send(batch);
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

fn produce(args: &Args, shared: &Arc<Shared>, triples_out: SyncSender<Vec<StrTriple>>, started: Instant) -> Produced {
    let inputs = &args.inputs;
    let spellers: Vec<Speller> = (0..inputs.len())
        .map(|i| Speller { bnode_prefix: if args.scope_blank_nodes { format!("f{}_", i + 1) } else { String::new() } })
        .collect();
    let fp = Fingerprint::new();
    let (block_tx, block_rx) = sync_channel::<Block>(args.threads * 2);
    let block_rx = Mutex::new(block_rx);
    let mut sources = Vec::with_capacity(inputs.len());
    let mut all_hashes: Vec<u128> = Vec::new();

    thread::scope(|scope| {
        let workers: Vec<_> = (0..args.threads)
            .map(|_| {
                let (block_rx, spellers, fp, shared, out) = (&block_rx, &spellers, &fp, &**shared, triples_out.clone());
                scope.spawn(move || {
                    let mut hashes = Vec::new();
                    loop {
                        let next = block_rx.lock().unwrap().recv();
                        let Ok(block) = next else { break };
                        if shared.stopped_before(block.seq) {
                            continue;
                        }
                        let triples = parse_block(&block, inputs, &spellers[block.input], shared, fp, &mut hashes);
                        if !triples.is_empty() && out.send(triples).is_err() {
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
                    parse_turtle(
                        reader,
                        input,
                        &args.base_uri,
                        this_seq,
                        &spellers[i],
                        shared,
                        &fp,
                        &mut all_hashes,
                        &triples_out,
                    )
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

/// Feeds the batches to `Hdt::from_triples` on the calling thread.
struct Feed {
    rx: Receiver<Vec<StrTriple>>,
    current: std::vec::IntoIter<StrTriple>,
}

impl Iterator for Feed {
    type Item = StrTriple;

    fn next(&mut self) -> Option<StrTriple> {
        loop {
            if let Some(t) = self.current.next() {
                return Some(t);
            }
            self.current = self.rx.recv().ok()?.into_iter();
        }
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

fn main() {
    let args = parse_args();
    let started = Instant::now();
    let shared = Arc::new(Shared {
        skip: args.skip,
        bytes_read: AtomicU64::new(0),
        triples: AtomicU64::new(0),
        skipped: AtomicU64::new(0),
        named_graph: AtomicU64::new(0),
        min_error_seq: AtomicU64::new(u64::MAX),
        first_error: Mutex::new(None),
        parsing_done: AtomicBool::new(false),
    });

    if args.progress_ms > 0 {
        let shared = Arc::clone(&shared);
        let every = Duration::from_millis(args.progress_ms);
        thread::spawn(move || {
            while !shared.parsing_done.load(Ordering::Relaxed) {
                thread::sleep(every);
                emit(&format!(
                    "{{\"event\":\"progress\",\"bytes\":{},\"triples\":{}}}",
                    shared.bytes_read.load(Ordering::Relaxed),
                    shared.triples.load(Ordering::Relaxed)
                ));
            }
        });
    }

    let (tx, rx) = sync_channel::<Vec<StrTriple>>(args.threads * 4);
    let producer = {
        let shared = Arc::clone(&shared);
        let args = &args;
        thread::scope(|scope| {
            let producer = scope.spawn(move || produce(args, &shared, tx, started));
            let hdt = hdt::Hdt::from_triples(Feed { rx, current: Vec::new().into_iter() }, &args.base_uri);
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
         \"tool\":\"quanta-rdf2hdt {} (hdt crate 0.7.3, oxttl 0.2)\",\"sources\":[{}]}}",
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
