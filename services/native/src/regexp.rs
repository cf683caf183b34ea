//! REGEX and REPLACE on a linear-time engine (the `regex` crate: finite
//! automata, no backtracking), so a pattern like `^(a+)+$` costs time linear
//! in its input instead of exponential. Patterns arrive already translated
//! from XPath's syntax (quanta.sparql.functions_regex); the compiled program
//! and the lazy DFA's cache are bounded, and a pattern over the bound is
//! refused rather than compiled.

use regex::{Regex, RegexBuilder};

/// Bytes of compiled program one pattern may take (the crate's default is
/// 10 MiB). Unicode classes are large as automata: `\w{40}` fits in 2 MiB,
/// `[a-z]{1000}` too; `\w{5000}` does not.
pub const SIZE_LIMIT: usize = 2 << 20;
/// Bytes of the lazy DFA's cache per pattern and thread; past it the search
/// falls back to a slower automaton, still linear.
pub const DFA_SIZE_LIMIT: usize = 2 << 20;

/// Why a pattern was not compiled.
#[derive(Debug, PartialEq, Eq)]
pub enum CompileError {
    /// Not valid syntax for the engine (a back-reference, say).
    Syntax(String),
    /// Compiles to more than `SIZE_LIMIT`.
    TooBig,
}

/// A compiled pattern.
pub struct Regexp {
    re: Regex,
}

/// A piece of a replacement: literal text, or the text of a capture group
/// (empty when the group did not take part in the match).
#[derive(Debug, Clone)]
pub enum Part {
    Text(String),
    Group(usize),
}

impl Regexp {
    pub fn new(pattern: &str) -> Result<Self, CompileError> {
        RegexBuilder::new(pattern)
            .size_limit(SIZE_LIMIT)
            .dfa_size_limit(DFA_SIZE_LIMIT)
            .build()
            .map(|re| Regexp { re })
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(_) => CompileError::TooBig,
                other => CompileError::Syntax(other.to_string()),
            })
    }

    /// Capture groups, not counting the whole match.
    pub fn groups(&self) -> usize {
        self.re.captures_len() - 1
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.re.is_match(text)
    }

    /// `text` with every match replaced by `parts`; None as soon as the
    /// result would pass `max_bytes` (so an expanding replacement never
    /// builds more than the limit).
    pub fn replace(&self, text: &str, parts: &[Part], max_bytes: usize) -> Option<String> {
        let mut out = String::new();
        let mut last = 0;
        for caps in self.re.captures_iter(text) {
            let whole = caps.get(0).expect("group 0 always matches");
            push(&mut out, &text[last..whole.start()], max_bytes)?;
            for part in parts {
                match part {
                    Part::Text(s) => push(&mut out, s, max_bytes)?,
                    Part::Group(i) => {
                        push(&mut out, caps.get(*i).map_or("", |m| m.as_str()), max_bytes)?
                    }
                }
            }
            last = whole.end();
        }
        push(&mut out, &text[last..], max_bytes)?;
        Some(out)
    }
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
            assert!(!re.is_match(&text), "{pattern}");
            assert!(
                started.elapsed().as_secs_f64() < 2.0,
                "{pattern} took {:?}",
                started.elapsed()
            );
        }
    }

    #[test]
    fn back_references_and_huge_patterns_are_refused() {
        assert!(matches!(
            Regexp::new(r"(a)\1"),
            Err(CompileError::Syntax(_))
        ));
        assert_eq!(Regexp::new(r"\w{5000}").err(), Some(CompileError::TooBig));
    }

    #[test]
    fn replace_expands_groups_and_stops_at_the_limit() {
        let re = Regexp::new("(a)(x)?").unwrap();
        let parts = [Part::Group(1), Part::Text("-".into()), Part::Group(2)];
        assert_eq!(re.replace("bab", &parts, 100).as_deref(), Some("ba-b"));
        assert_eq!(re.replace("aaaa", &parts, 7), None);
        assert_eq!(re.replace("aaaa", &parts, 8).as_deref(), Some("a-a-a-a-"));
    }
}

#[cfg(feature = "python")]
pub mod py {
    //! `quanta.native._core.Regex`: matching releases the GIL on long inputs,
    //! so other threads (the gateway's event loop) run meanwhile.

    use super::{CompileError, Part, Regexp};
    use pyo3::create_exception;
    use pyo3::exceptions::{PyTypeError, PyValueError};
    use pyo3::prelude::*;

    create_exception!(
        _core,
        RegexTooBig,
        PyValueError,
        "The pattern compiles to more than the engine's size limit."
    );

    /// Adds `Regex` and `RegexTooBig` to the module.
    pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add_class::<PyRegex>()?;
        m.add("RegexTooBig", m.py().get_type::<RegexTooBig>())
    }

    /// Inputs longer than this (bytes) are matched without the GIL.
    const DETACH_BYTES: usize = 4096;

    #[pyclass(frozen, module = "quanta.native._core", name = "Regex")]
    pub struct PyRegex {
        inner: Regexp,
    }

    #[pymethods]
    impl PyRegex {
        #[new]
        fn new(pattern: &str) -> PyResult<Self> {
            match Regexp::new(pattern) {
                Ok(inner) => Ok(PyRegex { inner }),
                Err(CompileError::TooBig) => Err(RegexTooBig::new_err(format!(
                    "the pattern compiles to more than {} bytes",
                    super::SIZE_LIMIT
                ))),
                Err(CompileError::Syntax(message)) => Err(PyValueError::new_err(message)),
            }
        }

        #[getter]
        fn groups(&self) -> usize {
            self.inner.groups()
        }

        fn search(&self, py: Python<'_>, text: &str) -> bool {
            if text.len() > DETACH_BYTES {
                py.detach(|| self.inner.is_match(text))
            } else {
                self.inner.is_match(text)
            }
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
            let parts = parts
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
                .collect::<PyResult<Vec<Part>>>()?;
            Ok(if text.len() > DETACH_BYTES {
                py.detach(|| self.inner.replace(text, &parts, max_bytes))
            } else {
                self.inner.replace(text, &parts, max_bytes)
            })
        }
    }
}
