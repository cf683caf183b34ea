//! REGEX and REPLACE. A pattern without back-references runs on a
//! linear-time engine (the `regex` crate: finite automata, no backtracking),
//! so a pattern like `^(a+)+$` costs time linear in its input instead of
//! exponential. A pattern with back-references, which no linear engine runs,
//! runs on a backtracking one (`fancy-regex`, which hands the pattern's parts
//! without back-references to `regex`) under a budget: `BACKTRACK_LIMIT`
//! backtracks a search, inputs of at most `BACKTRACK_INPUT_BYTES`, and for
//! REPLACE at most `REPLACE_BACKTRACK_TIME` of searching in all; past it the
//! call fails with `Exceeded`. Patterns arrive already translated from
//! XPath's syntax (quanta.sparql.functions_regex), the same translation for
//! both engines; the compiled program and the lazy DFA's cache are bounded,
//! and a pattern over the bound is refused rather than compiled.

use std::time::{Duration, Instant};

use regex::{Regex, RegexBuilder};

/// Bytes of compiled program one pattern may take (the crate's default is
/// 10 MiB). Unicode classes are large as automata: `\w{40}` fits in 2 MiB,
/// `[a-z]{1000}` too; `\w{5000}` does not.
pub const SIZE_LIMIT: usize = 2 << 20;
/// Bytes of the lazy DFA's cache per pattern and thread; past it the search
/// falls back to a slower automaton, still linear.
pub const DFA_SIZE_LIMIT: usize = 2 << 20;
/// Backtracks one search of the backtracking engine may make (fancy-regex's
/// default is 1,000,000). A backtrack may cost a pass over the rest of the
/// input (a part handed to `regex`, a back-reference compared), so a search's
/// work is about this times the input's length: with `BACKTRACK_INPUT_BYTES`,
/// 0.1-0.25 s at worst on the project's 2-core machine (a pattern handing 40
/// parts to `regex`, see the tests; the usual catastrophic ones stop in 1-2 ms).
pub const BACKTRACK_LIMIT: usize = 50_000;
/// The longest input (bytes of UTF-8) the backtracking engine runs on.
pub const BACKTRACK_INPUT_BYTES: usize = 1024;
/// Instructions of the backtracking engine's program for one pattern.
pub const BACKTRACK_PROGRAM: usize = 10_000;
/// The wall time REPLACE's searches may take together on the backtracking
/// engine: each search has its own `BACKTRACK_LIMIT`, and a text may hold a
/// match every few characters.
pub const REPLACE_BACKTRACK_TIME: Duration = Duration::from_millis(100);

/// Why a pattern was not compiled.
#[derive(Debug, PartialEq, Eq)]
pub enum CompileError {
    /// Not valid syntax for the engine.
    Syntax(String),
    /// Compiles to more than `SIZE_LIMIT` (or `BACKTRACK_PROGRAM`).
    TooBig,
}

/// Why a search on the backtracking engine stopped: its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    /// A search passed `BACKTRACK_LIMIT` backtracks (or the engine's bound on
    /// its stack), or REPLACE's searches passed `REPLACE_BACKTRACK_TIME`.
    Backtracks,
    /// The input is longer than `BACKTRACK_INPUT_BYTES`.
    Input,
}

enum Engine {
    Linear(Regex),
    Backtracking(fancy_regex::Regex),
}

/// A compiled pattern.
pub struct Regexp {
    engine: Engine,
}

/// A piece of a replacement: literal text, or the text of a capture group
/// (empty when the group did not take part in the match).
#[derive(Debug, Clone)]
pub enum Part {
    Text(String),
    Group(usize),
}

impl Regexp {
    /// A pattern for the linear-time engine (a back-reference is a syntax error).
    pub fn new(pattern: &str) -> Result<Self, CompileError> {
        RegexBuilder::new(pattern)
            .size_limit(SIZE_LIMIT)
            .dfa_size_limit(DFA_SIZE_LIMIT)
            .build()
            .map(|re| Regexp {
                engine: Engine::Linear(re),
            })
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(_) => CompileError::TooBig,
                other => CompileError::Syntax(other.to_string()),
            })
    }

    /// A pattern for the backtracking engine, under its budget.
    pub fn backtracking(pattern: &str) -> Result<Self, CompileError> {
        fancy_regex::RegexBuilder::new(pattern)
            .backtrack_limit(BACKTRACK_LIMIT)
            .delegate_size_limit(SIZE_LIMIT)
            .delegate_dfa_size_limit(DFA_SIZE_LIMIT)
            .max_prog_size(BACKTRACK_PROGRAM)
            .build()
            .map(|re| Regexp {
                engine: Engine::Backtracking(re),
            })
            .map_err(|e| match e {
                fancy_regex::Error::CompileError(ref inner) => match &**inner {
                    fancy_regex::CompileError::PatternTooComplex => CompileError::TooBig,
                    fancy_regex::CompileError::InnerError(build)
                        if build.size_limit().is_some() =>
                    {
                        CompileError::TooBig
                    }
                    _ => CompileError::Syntax(e.to_string()),
                },
                other => CompileError::Syntax(other.to_string()),
            })
    }

    /// Whether the pattern runs on the backtracking engine.
    pub fn is_backtracking(&self) -> bool {
        matches!(self.engine, Engine::Backtracking(_))
    }

    /// Capture groups, not counting the whole match.
    pub fn groups(&self) -> usize {
        match &self.engine {
            Engine::Linear(re) => re.captures_len() - 1,
            Engine::Backtracking(re) => re.captures_len() - 1,
        }
    }

    pub fn is_match(&self, text: &str) -> Result<bool, Exceeded> {
        match &self.engine {
            Engine::Linear(re) => Ok(re.is_match(text)),
            Engine::Backtracking(re) => {
                if text.len() > BACKTRACK_INPUT_BYTES {
                    return Err(Exceeded::Input);
                }
                re.is_match(text).map_err(|_| Exceeded::Backtracks)
            }
        }
    }

    /// `text` with every match replaced by `parts`; Ok(None) as soon as the
    /// result would pass `max_bytes` (so an expanding replacement never
    /// builds more than the limit).
    pub fn replace(
        &self,
        text: &str,
        parts: &[Part],
        max_bytes: usize,
    ) -> Result<Option<String>, Exceeded> {
        let mut out = String::new();
        let mut last = 0;
        match &self.engine {
            Engine::Linear(re) => {
                for caps in re.captures_iter(text) {
                    let whole = caps.get(0).expect("group 0 always matches");
                    let group = |i: usize| caps.get(i).map_or("", |m| m.as_str());
                    if expand(
                        &mut out,
                        &text[last..whole.start()],
                        parts,
                        group,
                        max_bytes,
                    )
                    .is_none()
                    {
                        return Ok(None);
                    }
                    last = whole.end();
                }
            }
            Engine::Backtracking(re) => {
                if text.len() > BACKTRACK_INPUT_BYTES {
                    return Err(Exceeded::Input);
                }
                let started = Instant::now();
                for caps in re.captures_iter(text) {
                    let caps = caps.map_err(|_| Exceeded::Backtracks)?;
                    if started.elapsed() > REPLACE_BACKTRACK_TIME {
                        return Err(Exceeded::Backtracks);
                    }
                    let whole = caps.get(0).expect("group 0 always matches");
                    let group = |i: usize| caps.get(i).map_or("", |m| m.as_str());
                    if expand(
                        &mut out,
                        &text[last..whole.start()],
                        parts,
                        group,
                        max_bytes,
                    )
                    .is_none()
                    {
                        return Ok(None);
                    }
                    last = whole.end();
                }
            }
        }
        Ok(push(&mut out, &text[last..], max_bytes).map(|()| out))
    }
}

/// Appends the text before a match and the match's replacement.
fn expand<'t>(
    out: &mut String,
    before: &str,
    parts: &[Part],
    group: impl Fn(usize) -> &'t str,
    max_bytes: usize,
) -> Option<()> {
    push(out, before, max_bytes)?;
    for part in parts {
        match part {
            Part::Text(s) => push(out, s, max_bytes)?,
            Part::Group(i) => push(out, group(*i), max_bytes)?,
        }
    }
    Some(())
}

fn push(out: &mut String, s: &str, max_bytes: usize) -> Option<()> {
    if out.len() + s.len() > max_bytes {
        return None;
    }
    out.push_str(s);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn catastrophic_patterns_are_linear() {
        let text = "a".repeat(100_000) + "!";
        for pattern in [r"^(a+)+\z", r"(a|aa)+\z", r"(.*a){20}\z", r"^(a|a?)+\z"] {
            let re = Regexp::new(pattern).unwrap();
            let started = Instant::now();
            assert_eq!(re.is_match(&text), Ok(false), "{pattern}");
            assert!(
                started.elapsed().as_secs_f64() < 2.0,
                "{pattern} took {:?}",
                started.elapsed()
            );
        }
    }

    #[test]
    fn the_linear_engine_refuses_back_references_and_huge_patterns() {
        assert!(matches!(
            Regexp::new(r"(a)\1"),
            Err(CompileError::Syntax(_))
        ));
        assert_eq!(Regexp::new(r"\w{5000}").err(), Some(CompileError::TooBig));
        assert_eq!(
            Regexp::backtracking(r"(a)\1\w{5000}").err(),
            Some(CompileError::TooBig)
        );
        let many = "(a)\\1".repeat(BACKTRACK_PROGRAM);
        assert_eq!(
            Regexp::backtracking(&many).err(),
            Some(CompileError::TooBig)
        );
        assert!(matches!(
            Regexp::backtracking(r"(a"),
            Err(CompileError::Syntax(_))
        ));
    }

    #[test]
    fn back_references_match_on_the_backtracking_engine() {
        let re = Regexp::backtracking(r"^(.)\1").unwrap();
        assert!(re.is_backtracking() && !Regexp::new("a").unwrap().is_backtracking());
        assert_eq!(re.groups(), 1);
        assert_eq!(re.is_match("aab"), Ok(true));
        assert_eq!(re.is_match("abb"), Ok(false));
        assert_eq!(re.is_match("ééx"), Ok(true));
        // XPath: a group that took no part in the match matches the empty string
        // (the translation writes \N as (?(N)\N)).
        let re = Regexp::backtracking(r"^(?:(a)|b)(?(1)\1)\z").unwrap();
        assert_eq!(re.is_match("aa"), Ok(true));
        assert_eq!(re.is_match("b"), Ok(true));
        assert_eq!(re.is_match("a"), Ok(false));
        // case-insensitive flag, multi-line flag and \z as the translation writes them
        let re = Regexp::backtracking(r"(?i)(?m)^(ab)(?(1)\1)$").unwrap();
        assert_eq!(re.is_match("x\nabAB\ny"), Ok(true));
        let parts = [
            Part::Text("<".into()),
            Part::Group(1),
            Part::Text(">".into()),
        ];
        let re = Regexp::backtracking(r"(\w)(?(1)\1)").unwrap();
        assert_eq!(
            re.replace("aabccd", &parts, 100),
            Ok(Some("<a>b<c>d".into()))
        );
        assert_eq!(re.replace("aabccd", &parts, 5), Ok(None));
    }

    /// The worst this machine takes for one search under the budget, and the
    /// catastrophic patterns stop at it: `cargo test --release -- --nocapture`
    /// prints the times.
    #[test]
    fn the_backtracking_engine_stops_at_its_budget() {
        let text = "a".repeat(BACKTRACK_INPUT_BYTES - 1) + "!";
        let alternatives = |n: usize| -> String {
            let parts: Vec<String> = (0..n).map(|i| format!("[^!]*!{i}")).collect();
            format!(r"(x)\1|{}", parts.join("|"))
        };
        let stopped = Err(Exceeded::Backtracks);
        let cases = [
            (r"^(a|aa)+\1\z".to_string(), "a".repeat(40) + "!", stopped),
            (r"(a|aa)+\1\z".to_string(), text.clone(), stopped),
            (r"(.*)\1\z".to_string(), text.clone(), stopped),
            (r"(a*)*\1\z".to_string(), text.clone(), stopped),
            (r"(\w+)\s+\1".to_string(), text.clone(), stopped),
            // every start position hands each alternative to `regex`, which
            // reads to the end: the work is the budget times the input's length
            (alternatives(40), text.clone(), Ok(false)),
            (alternatives(48), text.clone(), stopped),
            (alternatives(100), text.clone(), stopped),
        ];
        let mut worst = Duration::ZERO;
        for (pattern, input, expected) in &cases {
            let re = Regexp::backtracking(pattern).unwrap();
            let started = Instant::now();
            assert_eq!(&re.is_match(input), expected, "{pattern:.40}");
            let took = started.elapsed();
            println!("{pattern:.40} over {} bytes: {took:?}", input.len());
            worst = worst.max(took);
        }
        assert!(worst < Duration::from_secs(2), "{worst:?}");
        let re = Regexp::backtracking(r"(a)\1").unwrap();
        let long = "ab".repeat(BACKTRACK_INPUT_BYTES / 2) + "a";
        assert_eq!(re.is_match(&long), Err(Exceeded::Input));
        assert_eq!(re.replace(&long, &[], 1 << 20), Err(Exceeded::Input));
        assert_eq!(re.is_match(&long[..BACKTRACK_INPUT_BYTES]), Ok(false));
    }

    #[test]
    fn replace_on_the_backtracking_engine_stops_at_its_budget() {
        // Each search is within its backtracks (100 start positions of 200
        // alternatives) but reads to the end of the text 20,000 times: ten
        // searches pass REPLACE_BACKTRACK_TIME together.
        let alternatives: Vec<String> = (0..200).map(|i| format!("[^!]*!{i}")).collect();
        let pattern = format!(r"(x)\1|{}|y", alternatives.join("|"));
        let re = Regexp::backtracking(&pattern).unwrap();
        let text = ("a".repeat(99) + "y").repeat(BACKTRACK_INPUT_BYTES / 100);
        assert_eq!(re.is_match(&text), Ok(true));
        let started = Instant::now();
        let result = re.replace(&text, &[], 1 << 20);
        let took = started.elapsed();
        println!("REPLACE of {} bytes: {result:?} after {took:?}", text.len());
        assert_eq!(result, Err(Exceeded::Backtracks));
        assert!(
            took < REPLACE_BACKTRACK_TIME + Duration::from_millis(500),
            "{took:?}"
        );
        // the same REPLACE on a text with an early '!' is quick and complete
        let quick = ("a".repeat(99) + "y!").repeat(2);
        assert_eq!(
            re.replace(&quick, &[], 1 << 20),
            Ok(Some(("a".repeat(99) + "!").repeat(2)))
        );
    }

    #[test]
    fn replace_expands_groups_and_stops_at_the_limit() {
        let re = Regexp::new("(a)(x)?").unwrap();
        let parts = [Part::Group(1), Part::Text("-".into()), Part::Group(2)];
        assert_eq!(re.replace("bab", &parts, 100), Ok(Some("ba-b".into())));
        assert_eq!(re.replace("aaaa", &parts, 7), Ok(None));
        assert_eq!(re.replace("aaaa", &parts, 8), Ok(Some("a-a-a-a-".into())));
    }
}

#[cfg(feature = "python")]
pub mod py {
    //! `quanta.native._core.Regex`: matching releases the GIL on long inputs,
    //! and always on the backtracking engine (whose time the input's length
    //! does not tell), so other threads run meanwhile.

    use super::{CompileError, Exceeded, Part, Regexp};
    use pyo3::create_exception;
    use pyo3::exceptions::{PyTypeError, PyValueError};
    use pyo3::prelude::*;
    use std::sync::Arc;

    create_exception!(
        _core,
        RegexTooBig,
        PyValueError,
        "The pattern compiles to more than the engine's size limit."
    );
    create_exception!(
        _core,
        RegexBudgetExceeded,
        PyValueError,
        "A search on the backtracking engine passed its budget."
    );

    /// Adds `Regex`, `RegexTooBig` and `RegexBudgetExceeded` to the module.
    pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add_class::<PyRegex>()?;
        m.add("RegexTooBig", m.py().get_type::<RegexTooBig>())?;
        m.add(
            "RegexBudgetExceeded",
            m.py().get_type::<RegexBudgetExceeded>(),
        )
    }

    /// Inputs longer than this (bytes) are matched without the GIL.
    const DETACH_BYTES: usize = 4096;

    fn exceeded(e: Exceeded) -> PyErr {
        RegexBudgetExceeded::new_err(match e {
            Exceeded::Backtracks => format!(
                "the regular expression exceeded its backtracking budget ({} backtracks a search, \
                 {} ms for all of REPLACE's searches)",
                super::BACKTRACK_LIMIT,
                super::REPLACE_BACKTRACK_TIME.as_millis()
            ),
            Exceeded::Input => format!(
                "the regular expression exceeded its backtracking budget: a pattern with \
                 back-references runs on strings of at most {} bytes",
                super::BACKTRACK_INPUT_BYTES
            ),
        })
    }

    /// A replacement's parts: a str is literal text, an int a group's text.
    pub fn replacement(parts: Vec<Bound<'_, PyAny>>) -> PyResult<Vec<Part>> {
        parts
            .iter()
            .map(|p| {
                if let Ok(i) = p.extract::<usize>() {
                    Ok(Part::Group(i))
                } else if let Ok(s) = p.extract::<String>() {
                    Ok(Part::Text(s))
                } else {
                    Err(PyTypeError::new_err("a part is a str or a group number"))
                }
            })
            .collect()
    }

    #[pyclass(frozen, module = "quanta.native._core", name = "Regex")]
    pub struct PyRegex {
        inner: Arc<Regexp>,
    }

    impl PyRegex {
        /// The compiled pattern, for native FILTERs (`crate::expr`).
        pub fn shared(&self) -> Arc<Regexp> {
            self.inner.clone()
        }

        fn detach(&self, text: &str) -> bool {
            self.inner.is_backtracking() || text.len() > DETACH_BYTES
        }
    }

    #[pymethods]
    impl PyRegex {
        #[new]
        #[pyo3(signature = (pattern, backtracking = false))]
        fn new(pattern: &str, backtracking: bool) -> PyResult<Self> {
            let compiled = if backtracking {
                Regexp::backtracking(pattern)
            } else {
                Regexp::new(pattern)
            };
            match compiled {
                Ok(inner) => Ok(PyRegex {
                    inner: Arc::new(inner),
                }),
                Err(CompileError::TooBig) => Err(RegexTooBig::new_err(format!(
                    "the pattern compiles to more than {} bytes (or {} instructions of the \
                     backtracking engine)",
                    super::SIZE_LIMIT,
                    super::BACKTRACK_PROGRAM
                ))),
                Err(CompileError::Syntax(message)) => Err(PyValueError::new_err(message)),
            }
        }

        #[getter]
        fn groups(&self) -> usize {
            self.inner.groups()
        }

        #[getter]
        fn backtracking(&self) -> bool {
            self.inner.is_backtracking()
        }

        fn search(&self, py: Python<'_>, text: &str) -> PyResult<bool> {
            if self.detach(text) {
                py.detach(|| self.inner.is_match(text))
            } else {
                self.inner.is_match(text)
            }
            .map_err(exceeded)
        }

        /// `text` with each match replaced by `parts` (a str is literal text,
        /// an int a group's text); None if the result would pass `max_bytes`.
        fn replace(
            &self,
            py: Python<'_>,
            text: &str,
            parts: Vec<Bound<'_, PyAny>>,
            max_bytes: usize,
        ) -> PyResult<Option<String>> {
            let parts = replacement(parts)?;
            if self.detach(text) {
                py.detach(|| self.inner.replace(text, &parts, max_bytes))
            } else {
                self.inner.replace(text, &parts, max_bytes)
            }
            .map_err(exceeded)
        }
    }
}
