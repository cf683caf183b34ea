//! Reading the inputs: the thread that opens, counts, hashes and un-gzips each input, cuts
//! N-Triples and N-Quads into blocks for the parser threads it starts, and parses Turtle itself.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::process;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Instant;

use flate2::read::MultiGzDecoder;
use rayon::slice::ParallelSliceMut;
use sha2::{Digest, Sha256};

use crate::batch::Batch;
use crate::cli::{Args, Format, Input};
use crate::events::{emit, fatal, hex};
use crate::fingerprint::Fingerprint;
use crate::iri_cache::IriCache;
use crate::line_formats::{parse_block, split_lines, Block};
use crate::pool::BYTES;
use crate::shared::Shared;
use crate::turtle::parse_turtle;

/// Counts (for the progress bar) and hashes (for the metadata) the raw bytes of an input.
pub struct Tap<R> {
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

pub struct Source {
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

pub struct Produced {
    pub sources: Vec<Source>,
    pub distinct: u64,
    pub parse_seconds: f64,
}

pub fn open(input: &Input, shared: &Arc<Shared>) -> Tap<File> {
    match File::open(&input.path) {
        Ok(f) => Tap { inner: f, sha: Sha256::new(), shared: Arc::clone(shared) },
        Err(e) => fatal(&input.display, &format!("cannot open: {e}")),
    }
}

pub fn produce(args: &Args, shared: &Arc<Shared>, triples_out: SyncSender<Batch>, started: Instant) -> Produced {
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
