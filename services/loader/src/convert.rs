//! The conversion: the progress ticker, the producer and the `hdt` crate's dictionary and triples
//! built side by side, then the HDT file written and the summary printed.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::sync::atomic::Ordering;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::batch::Batch;
use crate::cli::Args;
use crate::events::{emit, fatal, hex, json_str};
use crate::feed::Feed;
use crate::producer::produce;
use crate::shared::Shared;

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

/// The process's peak resident memory so far (0 where /proc does not tell).
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

/// Converts the inputs into the HDT file, printing progress, phases and the summary.
pub fn convert(args: &Args) {
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
        thread::scope(|scope| {
            let producer = scope.spawn(move || produce(args, &shared, tx, started));
            let hdt = hdt::Hdt::from_triples(Feed::new(rx), &args.dataset_iri);
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
