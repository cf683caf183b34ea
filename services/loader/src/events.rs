//! The JSON lines printed on stdout for `quanta load`: one object per line, never interleaved
//! across threads; `Problem` is a malformed statement (an error or a skipped statement).

use std::io::{self, Write};
use std::process;
use std::sync::Mutex;

pub fn json_str(s: &str) -> String {
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
pub fn emit(line: &str) {
    let _guard = STDOUT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut out = io::stdout().lock();
    // A closed stdout (the driver died) must not panic a worker: the exit follows anyway.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[derive(Clone)]
pub struct Problem {
    pub file: String,
    pub line: u64,
    pub column: u64,
    pub reason: String,
}

impl Problem {
    pub fn json(&self, event: &str) -> String {
        format!(
            "{{\"event\":\"{event}\",\"file\":{},\"line\":{},\"column\":{},\"reason\":{}}}",
            json_str(&self.file),
            self.line,
            self.column,
            json_str(&self.reason)
        )
    }
}

pub fn fatal(file: &str, reason: &str) -> ! {
    emit(&Problem { file: file.to_owned(), line: 0, column: 0, reason: reason.to_owned() }.json("error"));
    process::exit(1);
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
