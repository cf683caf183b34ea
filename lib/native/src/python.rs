//! The Python module `quanta.native._core` (PyO3).

use crate::exec::{
    Atom, Budget, Clock, Expired, Mode, Operand, Pattern, Reduce, Repeat, Spec, Status, Tree,
};
use crate::expr::{Expr, Func, Table};
use crate::hdt::Hdt;
use crate::index;
use crate::regexp::py::PyRegex;
use crate::render::{Format, Unrepresentable};
use crate::store::{Cursor, Store};
use crate::wire;
use pyo3::create_exception;
use pyo3::exceptions::{PyIndexError, PyKeyError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PySlice, PyString, PyTuple};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;

/// An HDT file and its side index, memory-mapped.
#[pyclass(frozen, module = "quanta.native._core")]
pub struct NativeHdt {
    store: Arc<Store>,
    /// Encodings of terms already written, per format (`Format::index`)
    terms: Mutex<[TermCache; 4]>,
    /// Python strings of terms already decoded
    strings: Mutex<HashMap<u64, Py<PyString>>>,
}

/// A format's encodings of terms: gid -> range in `arena`.
#[derive(Default)]
struct TermCache {
    spans: HashMap<u64, (u32, u32)>,
    arena: Vec<u8>,
}

const TERM_CACHE_BYTES: usize = 32 << 20;
/// Bytes of terms outside the dictionary (query constants, strings that
/// expressions built: each at most QUANTA_MAX_LITERAL_CHARS) one render or
/// decode call may write: a million-character literal projected into
/// thousands of columns would otherwise be a page of gigabytes.
const MAX_EXTRA_BYTES: usize = 256 << 20;

create_exception!(
    _core,
    PageTooLarge,
    PyValueError,
    "The rows' terms outside the dictionary pass MAX_EXTRA_BYTES."
);

create_exception!(
    _core,
    StateTooLarge,
    PyValueError,
    "An operator's state passes its bound (a closure's nodes: CLOSURE_NODES)."
);

fn count_extra(total: &mut usize, term: &str) -> PyResult<()> {
    *total += term.len();
    if *total > MAX_EXTRA_BYTES {
        return Err(PageTooLarge::new_err(format!(
            "the page's computed terms pass {MAX_EXTRA_BYTES} bytes"
        )));
    }
    Ok(())
}
const STRING_CACHE_TERMS: usize = 1 << 20;

#[pymethods]
impl NativeHdt {
    #[new]
    fn new(py: Python<'_>, path: &str, index_path: &str) -> PyResult<Self> {
        let store = py
            .detach(|| Store::open(Path::new(path), Path::new(index_path)))
            .map_err(PyOSError::new_err)?;
        Ok(NativeHdt {
            store: Arc::new(store),
            terms: Mutex::default(),
            strings: Mutex::default(),
        })
    }

    #[getter]
    fn triples(&self) -> u64 {
        self.store.triples()
    }
    #[getter]
    fn nb_subjects(&self) -> u64 {
        self.store.nb_subjects
    }
    #[getter]
    fn nb_objects(&self) -> u64 {
        self.store.nb_objects
    }
    #[getter]
    fn nb_shared(&self) -> u64 {
        self.store.nb_shared
    }
    #[getter]
    fn nb_predicates(&self) -> u64 {
        self.store.nb_predicates
    }

    /// Triples matching (s, p, o) (global ids, 0 = any) from `offset` on.
    #[pyo3(signature = (s, p, o, offset = 0))]
    fn search(&self, s: i64, p: i64, o: i64, offset: u64) -> TripleCursor {
        TripleCursor {
            cursor: self.store.search(s, p, o, offset),
            store: self.store.clone(),
        }
    }

    fn estimate(&self, s: i64, p: i64, o: i64) -> u64 {
        self.store.estimate(s, p, o)
    }

    /// How many distinct subjects have predicate `p` (exact).
    fn distinct_subjects(&self, p: i64) -> u64 {
        self.store.distinct_subjects(p)
    }

    /// The object-only terms whose strings lie in `[low, high)` in the
    /// dictionary's byte order: their global ids `[start, end)`.
    fn object_string_range(&self, low: &[u8], high: &[u8]) -> PyResult<(i64, i64)> {
        self.store
            .object_string_range(low, high)
            .map_err(PyValueError::new_err)
    }

    /// How many triples of predicate `p` (0: any) have an object in the global
    /// ids `[start, end)`; None when the range spans too many objects to plan.
    fn object_range_count(&self, start: i64, end: i64, p: i64) -> Option<u64> {
        self.store.object_range_count(start, end, p)
    }

    /// Global id of a term spelled exactly so, 0 if absent.
    fn locate(&self, term: &str) -> u64 {
        self.store.locate(term.as_bytes())
    }

    fn extract<'py>(&self, py: Python<'py>, gid: u64) -> PyResult<Bound<'py, PyString>> {
        let mut buf = Vec::with_capacity(64);
        self.store
            .extract_into(gid, &mut buf)
            .map_err(PyKeyError::new_err)?;
        decoded(py, &buf)
    }

    /// A plan to run natively (see `Pipeline`), described by nested tuples:
    /// `("scan", pattern)` (a pattern: three codes, `id << 1` or `slot << 1 |
    /// 1`), `("values", slots, cells, rows)`, `("union", [plan, ..])`,
    /// `("join", left, right)` (index loop join), `("optional", left, right,
    /// slots the left side may bind)` (its OPTIONAL), `("exists" | "not_exists" |
    /// "minus", left, right, slots right runs under)` (its filters), `("closure",
    /// forward step, backward step, from slot, to slot, subject, object, "*" | "+"
    /// | "?")` (the ends as atoms' operands), `("merge", left, pattern,
    /// key slot)`, `("slice", input, offset, limit or None)`, `("tally", input,
    /// slots, count slot or None, [(source, target, "min" | "max" | "sample")], exact)`,
    /// `("topk", input, [(slot, descending)], k, exact)` (`exact`, optional: in a plan run
    /// whole), `("hashjoin", left, right, key slots)` (in a plan run whole), `("filter",
    /// input, atoms, condition, test)` and `("extend", input, slot, value,
    /// compute)`. Atoms: `(same, (is_slot, value), (is_slot, value))`, the
    /// comparisons of ids a FILTER starts with. A condition or value: an
    /// expression tree (see `expression`), evaluated natively, the reference
    /// function (`test(row)`: truth; `compute(row)`: a term id, 0 for none)
    /// deciding the rows it cannot; `("p",)` to leave every row to the
    /// reference; a condition None when the atoms are the whole FILTER.
    /// `terms`: the plan's term table (`quanta.sparql.term_table.TermTable`:
    /// `string(id)`, `intern_outside(text)`), whose dictionary is this file;
    /// the native evaluator asks it for the terms outside the dictionary, and
    /// for the ids of the values BINDs compute that the file lacks; without
    /// one, rows with such terms go to the reference.
    #[pyo3(signature = (width, spec, terms = None))]
    fn pipeline(
        &self,
        width: usize,
        spec: &Bound<'_, PyAny>,
        terms: Option<Py<PyAny>>,
    ) -> PyResult<Pipeline> {
        let mut undecided = Vec::new();
        let spec = plan_spec(spec, width, &mut undecided)?;
        Ok(Pipeline {
            store: self.store.clone(),
            tree: Tree::new(width, spec),
            undecided,
            terms,
        })
    }

    /// `rows` (a `Rows` buffer, or a list of tuples of ids) projected on
    /// `projection`, in `format` (json, tsv, csv, xml: `render::Format::rows`),
    /// with `keys` what precedes each column's term (JSON: `"var":`, XML:
    /// `<binding name="var">`); negative ids are `extra[-id - 1]` (terms
    /// outside the dictionary).
    fn render<'py>(
        &self,
        py: Python<'py>,
        format: &str,
        keys: Vec<Vec<u8>>,
        rows: &Bound<'py, PyAny>,
        projection: Vec<usize>,
        extra: Vec<String>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let format = Format::of(format)
            .ok_or_else(|| PyValueError::new_err(format!("unknown format {format:?}")))?;
        if keys.len() != projection.len() {
            return Err(PyValueError::new_err("one key per projected column"));
        }
        with_ids(rows, |ids| {
            self.render_ids(py, format, &keys, ids, &projection, &extra)
        })
    }

    /// Rows of ids (a `Rows` buffer, or a list of tuples) to rows of term
    /// strings (None: unbound), projected.
    fn decode_rows<'py>(
        &self,
        py: Python<'py>,
        rows: &Bound<'py, PyAny>,
        projection: Vec<usize>,
        extra: Vec<String>,
    ) -> PyResult<Bound<'py, PyList>> {
        with_ids(rows, |ids| self.decode_ids(py, ids, &projection, &extra))
    }

    /// Strings of many ids at once (one call, one buffer).
    fn extract_many<'py>(&self, py: Python<'py>, gids: Vec<u64>) -> PyResult<Bound<'py, PyList>> {
        let mut buf = Vec::with_capacity(64);
        let list = PyList::empty(py);
        for gid in gids {
            buf.clear();
            self.store
                .extract_into(gid, &mut buf)
                .map_err(PyKeyError::new_err)?;
            list.append(decoded(py, &buf)?)?;
        }
        Ok(list)
    }
}

/// `quanta.sparql.results.Unrepresentable` (a QuantaError the worker answers
/// as 406), as the Python writers raise it; a ValueError if it cannot be had.
fn unrepresentable(py: Python<'_>, error: Unrepresentable) -> PyErr {
    let message = error.to_string();
    let made = py
        .import("quanta.sparql.results")
        .and_then(|module| module.getattr("Unrepresentable"))
        .and_then(|class| class.call1((message.clone(),)));
    match made {
        Ok(value) => PyErr::from_value(value),
        Err(_) => PyValueError::new_err(message),
    }
}

fn decoded<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyString>> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| PyValueError::new_err(format!("dictionary string: {e}")))?;
    Ok(PyString::new(py, text))
}

impl NativeHdt {
    fn render_ids<'py>(
        &self,
        py: Python<'py>,
        format: Format,
        keys: &[Vec<u8>],
        ids: Ids<'_>,
        projection: &[usize],
        extra: &[String],
    ) -> PyResult<Bound<'py, PyBytes>> {
        let mut caches = self
            .terms
            .lock()
            .map_err(|_| PyValueError::new_err("poisoned cache"))?;
        let cache = &mut caches[format.index()];
        if cache.arena.len() > TERM_CACHE_BYTES {
            *cache = TermCache::default();
        }
        // Each row's cells as spans of the cache's arena (or of `local`, for extra terms).
        let mut spans: Vec<Option<(bool, u32, u32)>> =
            Vec::with_capacity(ids.count * projection.len());
        let mut local: Vec<u8> = Vec::new();
        let mut extra_bytes = 0;
        let mut buf = Vec::with_capacity(128);
        for r in 0..ids.count {
            for &slot in projection {
                let gid = ids.get(r, slot)?;
                if gid == 0 {
                    spans.push(None);
                } else if gid < 0 {
                    let term = extra
                        .get((-gid - 1) as usize)
                        .ok_or_else(|| PyKeyError::new_err(gid))?;
                    count_extra(&mut extra_bytes, term)?;
                    let start = local.len();
                    format
                        .term(term.as_bytes(), &mut local)
                        .map_err(|e| unrepresentable(py, e))?;
                    spans.push(Some((false, start as u32, (local.len() - start) as u32)));
                } else if let Some(&(start, len)) = cache.spans.get(&(gid as u64)) {
                    spans.push(Some((true, start, len)));
                } else {
                    buf.clear();
                    self.store
                        .extract_into(gid as u64, &mut buf)
                        .map_err(PyKeyError::new_err)?;
                    let start = cache.arena.len();
                    format
                        .term(&buf, &mut cache.arena)
                        .map_err(|e| unrepresentable(py, e))?;
                    let len = (cache.arena.len() - start) as u32;
                    cache.spans.insert(gid as u64, (start as u32, len));
                    spans.push(Some((true, start as u32, len)));
                }
            }
        }
        let arena = &cache.arena;
        let cell = |span: &Option<(bool, u32, u32)>| {
            span.map(|(cached, start, len)| {
                let from = if cached { arena } else { &local };
                &from[start as usize..(start + len) as usize]
            })
        };
        let width = projection.len().max(1);
        let mut out: Vec<u8> = Vec::with_capacity(ids.count * 64 + 2);
        if projection.is_empty() {
            format.rows(
                keys,
                (0..ids.count).map(|_| std::iter::empty::<Option<&[u8]>>()),
                &mut out,
            );
        } else {
            format.rows(
                keys,
                spans.chunks(width).map(|row| row.iter().map(cell)),
                &mut out,
            );
        }
        Ok(PyBytes::new(py, &out))
    }

    fn decode_ids<'py>(
        &self,
        py: Python<'py>,
        ids: Ids<'_>,
        projection: &[usize],
        extra: &[String],
    ) -> PyResult<Bound<'py, PyList>> {
        let mut cache = self
            .strings
            .lock()
            .map_err(|_| PyValueError::new_err("poisoned cache"))?;
        if cache.len() > STRING_CACHE_TERMS {
            cache.clear();
        }
        let mut buf = Vec::with_capacity(128);
        let mut extra_bytes = 0;
        let out = PyList::empty(py);
        let mut cells: Vec<Bound<'py, PyAny>> = Vec::with_capacity(projection.len());
        for r in 0..ids.count {
            cells.clear();
            for &slot in projection {
                let gid = ids.get(r, slot)?;
                let cell = if gid == 0 {
                    py.None().into_bound(py)
                } else if gid < 0 {
                    let term = extra
                        .get((-gid - 1) as usize)
                        .ok_or_else(|| PyKeyError::new_err(gid))?;
                    count_extra(&mut extra_bytes, term)?;
                    PyString::new(py, term).into_any()
                } else if let Some(s) = cache.get(&(gid as u64)) {
                    s.bind(py).clone().into_any()
                } else {
                    buf.clear();
                    self.store
                        .extract_into(gid as u64, &mut buf)
                        .map_err(PyKeyError::new_err)?;
                    let s = decoded(py, &buf)?;
                    cache.insert(gid as u64, s.clone().unbind());
                    s.into_any()
                };
                cells.push(cell);
            }
            out.append(untracked(PyTuple::new(py, &cells)?))?;
        }
        Ok(out)
    }
}

/// Rows of ids, flat: row `r`'s slot `i` is `ids[r * width + i]`.
#[derive(Clone, Copy)]
struct Ids<'a> {
    width: usize,
    count: usize,
    ids: &'a [i64],
}

impl Ids<'_> {
    fn get(&self, row: usize, slot: usize) -> PyResult<i64> {
        if slot >= self.width {
            return Err(PyValueError::new_err(format!(
                "slot {slot} of a row of {}",
                self.width
            )));
        }
        Ok(self.ids[row * self.width + slot])
    }
}

/// `f` over the ids of `rows`: a `Rows` buffer as it is, a list of tuples flattened.
fn with_ids<R>(rows: &Bound<'_, PyAny>, f: impl FnOnce(Ids<'_>) -> PyResult<R>) -> PyResult<R> {
    if let Ok(buffer) = rows.cast::<Rows>() {
        let buffer = buffer.borrow();
        return f(buffer.as_ids());
    }
    let list = rows.cast::<PyList>()?;
    let mut ids: Vec<i64> = Vec::new();
    let mut width = 0;
    for row in list.iter() {
        let row = row.cast::<PyTuple>()?;
        width = row.len();
        for item in row.iter() {
            ids.push(item.extract()?);
        }
    }
    if ids.len() != width * list.len() {
        return Err(PyValueError::new_err("rows of different widths"));
    }
    f(Ids {
        width,
        count: list.len(),
        ids: &ids,
    })
}

/// Rows of ids as one flat buffer: what a native chain hands to a page, with
/// no Python object per row (a page of a megabyte holds ~10^4 rows). Reads as
/// a sequence of tuples; slices are buffers.
#[pyclass(module = "quanta.native._core")]
pub struct Rows {
    width: usize,
    count: usize,
    ids: Vec<i64>,
}

impl Rows {
    fn as_ids(&self) -> Ids<'_> {
        Ids {
            width: self.width,
            count: self.count,
            ids: &self.ids,
        }
    }

    fn row<'py>(&self, py: Python<'py>, r: usize) -> PyResult<Bound<'py, PyTuple>> {
        Ok(untracked(PyTuple::new(
            py,
            &self.ids[r * self.width..(r + 1) * self.width],
        )?))
    }
}

#[pymethods]
impl Rows {
    #[new]
    fn new(width: usize) -> Self {
        Rows {
            width,
            count: 0,
            ids: Vec::new(),
        }
    }

    #[getter]
    fn width(&self) -> usize {
        self.width
    }

    fn __len__(&self) -> usize {
        self.count
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        index: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(slice) = index.cast::<PySlice>() {
            let span = slice.indices(self.count as isize)?;
            if span.step != 1 {
                return Err(PyValueError::new_err("a slice of rows has step 1"));
            }
            let (start, len) = (span.start as usize, span.slicelength);
            let ids = self.ids[start * self.width..(start + len) * self.width].to_vec();
            let part = Rows {
                width: self.width,
                count: len,
                ids,
            };
            return Ok(Bound::new(py, part)?.into_any());
        }
        let i: isize = index.extract()?;
        let r = if i < 0 { i + self.count as isize } else { i };
        if r < 0 || r as usize >= self.count {
            return Err(PyIndexError::new_err("row index out of range"));
        }
        Ok(self.row(py, r as usize)?.into_any())
    }

    fn __iter__(slf: Bound<'_, Self>) -> RowsIter {
        RowsIter {
            rows: slf.unbind(),
            next: 0,
        }
    }
}

/// Iterator of a `Rows` buffer's rows, as tuples.
#[pyclass(module = "quanta.native._core")]
pub struct RowsIter {
    rows: Py<Rows>,
    next: usize,
}

#[pymethods]
impl RowsIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let rows = self.rows.bind(py).borrow();
        if self.next >= rows.count {
            return Ok(None);
        }
        self.next += 1;
        Ok(Some(rows.row(py, self.next - 1)?))
    }
}

/// Iterator of (s, p, o) global-id tuples.
#[pyclass(module = "quanta.native._core")]
pub struct TripleCursor {
    store: Arc<Store>,
    cursor: Cursor,
}

#[pymethods]
impl TripleCursor {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        match self.store.next(&mut self.cursor) {
            Some(t) => Ok(Some(PyTuple::new(py, t)?)),
            None => Ok(None),
        }
    }
}

/// A plan run natively for a quantum's step budget; the engine's
/// `NativeTree` operator drives it.
#[pyclass(module = "quanta.native._core")]
pub struct Pipeline {
    store: Arc<Store>,
    tree: Tree,
    /// per condition or BIND (by number), the Python function that decides
    /// what it cannot, and whether it gives a term id (a BIND's value) rather
    /// than a truth
    undecided: Vec<(Py<PyAny>, bool)>,
    /// the plan's term table, if any (see `NativeHdt.pipeline`)
    terms: Option<Py<PyAny>>,
}

/// The plan's Python term table as the native evaluator asks it; an error it
/// raises is kept for the run to raise (the row goes to the reference meanwhile).
struct PyTable<'a, 'py> {
    terms: Option<&'a Bound<'py, PyAny>>,
    failure: &'a RefCell<Option<PyErr>>,
}

impl PyTable<'_, '_> {
    fn kept<T>(&self, result: PyResult<T>) -> Option<T> {
        result
            .map_err(|e| {
                self.failure.borrow_mut().get_or_insert(e);
            })
            .ok()
    }
}

impl Table for PyTable<'_, '_> {
    fn text(&mut self, gid: i64) -> Option<String> {
        let terms = self.terms?;
        let result = terms.call_method1(pyo3::intern!(terms.py(), "string"), (gid,));
        self.kept(result.and_then(|r| r.extract()))
    }

    fn outside(&mut self, text: &str) -> Option<i64> {
        let terms = self.terms?;
        let result = terms.call_method1(pyo3::intern!(terms.py(), "intern_outside"), (text,));
        self.kept(result.and_then(|r| r.extract()))
    }
}

pub const FULL: u8 = 0;
pub const DONE: u8 = 1;
pub const EXPIRED: u8 = 2;

#[pymethods]
impl Pipeline {
    /// An empty buffer for this plan's rows.
    fn rows(&self) -> Rows {
        Rows::new(self.tree.width())
    }

    fn restart(&mut self) {
        self.tree.restart();
    }

    /// Free the conditions' caches of decoded terms and memoized tests (a
    /// pooled plan keeps none).
    fn trim(&mut self) {
        self.tree.trim();
    }

    /// The estimated fraction of the plan done, 0..1, from its state
    /// (`quanta.engine.progress`).
    fn progress(&self) -> f64 {
        self.tree.progress(&self.store)
    }

    /// Rows the native conditions and BINDs left to the reference so far.
    #[getter]
    fn undecided(&self) -> u64 {
        self.tree.undecided
    }

    /// The state in the saved plans' layout, as field 3 of a SavedPlan message (`wire`);
    /// `rename(id)` gives each negative id (a term outside the dictionary) as it is saved.
    fn save<'py>(
        &self,
        py: Python<'py>,
        rename: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let (mut values, foreign) = self.tree.save();
        for i in foreign {
            values[i] = rename.call1((values[i],))?.extract()?;
        }
        Ok(PyBytes::new(py, &wire::state_field(&values)))
    }

    /// Load the state of `saved`, a SavedPlan message (all of its state); `restored(id)` maps
    /// each negative id a mapping holds.
    fn load(&mut self, saved: &[u8], restored: Bound<'_, PyAny>) -> PyResult<()> {
        let state = wire::state_of(saved).map_err(PyValueError::new_err)?;
        let mut failure: Option<PyErr> = None;
        let mut restore = |v: i64| -> Result<i64, String> {
            restored.call1((v,)).and_then(|r| r.extract()).map_err(|e| {
                let text = e.to_string();
                failure = Some(e);
                text
            })
        };
        let result = self.tree.load(&state, &mut restore);
        if let Some(e) = failure {
            return Err(e);
        }
        result.map_err(PyValueError::new_err)
    }

    /// Up to `max_rows` rows appended to `into`, and why it stopped (FULL,
    /// DONE, EXPIRED). Steps come from and go back to `quantum.budget`; the
    /// clock is checked natively
    /// when `deadline_in` (seconds left, maybe inf) is given, else by calling
    /// `quantum.check()`, whose `expired` exception means the quantum is over.
    /// `cpu`: the deadline is on the thread's CPU clock (`Clock`).
    #[pyo3(signature = (into, max_rows, quantum, expired, deadline_in = None, every = 64, cpu = false))]
    #[allow(clippy::too_many_arguments)]
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        into: Bound<'py, Rows>,
        max_rows: usize,
        quantum: &Bound<'py, PyAny>,
        expired: &Bound<'py, PyAny>,
        deadline_in: Option<f64>,
        every: i64,
        cpu: bool,
    ) -> PyResult<u8> {
        let width = self.tree.width();
        if into.borrow().width != width {
            return Err(PyValueError::new_err("a buffer of rows of the wrong width"));
        }
        let mut buffer = into.borrow_mut();
        let steps: i64 = quantum.getattr("budget")?.extract()?;
        buffer.ids.reserve(max_rows.min(4096) * width);
        // a Python error met inside the run (the clock's check, a test), raised after it
        let failure: RefCell<Option<PyErr>> = RefCell::new(None);
        let mut clock = Clock::new(deadline_in, cpu, every);
        let native_clock = deadline_in.is_some();
        let status = {
            let mut python_check = |steps: &mut i64| -> Result<(), Expired> {
                let result = quantum
                    .setattr("budget", *steps)
                    .and_then(|_| quantum.call_method0("check"));
                match result {
                    Ok(_) => {
                        *steps = quantum
                            .getattr("budget")
                            .and_then(|b| b.extract())
                            .unwrap_or(every);
                        Ok(())
                    }
                    Err(e) => {
                        if !e.is_instance(py, expired) {
                            *failure.borrow_mut() = Some(e);
                        }
                        *steps = 0;
                        Err(Expired)
                    }
                }
            };
            let mut clock_check = |steps: &mut i64| clock.check(steps);
            let check: &mut dyn FnMut(&mut i64) -> Result<(), Expired> = if native_clock {
                &mut clock_check
            } else {
                &mut python_check
            };
            let undecided = &self.undecided;
            let mut ask = |number: usize, row: &[i64]| -> Result<i64, Expired> {
                let (function, gives_id) = &undecided[number];
                let result = PyTuple::new(py, row)
                    .and_then(|row| function.bind(py).call1((row,)))
                    .and_then(|r| {
                        if *gives_id {
                            r.extract::<i64>()
                        } else {
                            r.is_truthy().map(i64::from)
                        }
                    });
                result.map_err(|e| {
                    *failure.borrow_mut() = Some(e);
                    Expired
                })
            };
            let mut budget = Budget {
                steps,
                check,
                undecided: &mut ask,
                error: None,
            };
            let terms = self.terms.as_ref().map(|t| t.bind(py));
            let mut table = PyTable {
                terms,
                failure: &failure,
            };
            let done = self.tree.run(
                &self.store,
                &mut table,
                &mut budget,
                max_rows,
                &mut buffer.ids,
            );
            quantum.setattr("budget", budget.steps)?;
            if let Some(error) = budget.error {
                return Err(StateTooLarge::new_err(error));
            }
            done
        };
        let (status, produced) = status;
        if let Some(e) = failure.into_inner() {
            return Err(e);
        }
        if status == Status::Expired && native_clock {
            quantum.setattr("overshoot", clock.overshoot)?;
        }
        buffer.count += produced;
        Ok(match status {
            Status::Full => FULL,
            Status::Done => DONE,
            Status::Expired => EXPIRED,
        })
    }
}

/// `row` out of the cyclic garbage collector's sight: a tuple of ints, strings
/// or None cannot be part of a cycle, and a page of them (thousands of rows)
/// would otherwise be traversed by the next collection, about 0.1 ms per
/// thousand rows. CPython untracks such tuples itself, but only when a
/// collection has already paid for them.
fn untracked(row: Bound<'_, PyTuple>) -> Bound<'_, PyTuple> {
    // SAFETY: `row` is a live tuple we own a reference to; untracking an object
    // that holds no reference to a container only keeps the collector from visiting it.
    unsafe { pyo3::ffi::PyObject_GC_UnTrack(row.as_ptr().cast()) };
    row
}

/// A plan's nested tuples (see `NativeHdt.pipeline`) as a `Spec`; the
/// reference functions of its conditions and BINDs pushed to `undecided` in
/// the order `Tree::new` numbers them.
fn plan_spec(
    node: &Bound<'_, PyAny>,
    width: usize,
    undecided: &mut Vec<(Py<PyAny>, bool)>,
) -> PyResult<Spec> {
    let item = |i: usize| node.get_item(i);
    // an optional flag at `i` (absent: false)
    let exact = |i: usize| -> PyResult<bool> {
        if node.len()? > i {
            item(i)?.extract()
        } else {
            Ok(false)
        }
    };
    let input = |undecided: &mut Vec<(Py<PyAny>, bool)>| -> PyResult<Box<Spec>> {
        Ok(Box::new(plan_spec(&item(1)?, width, undecided)?))
    };
    let pattern = |p: Bound<'_, PyAny>| -> PyResult<Pattern> {
        let (s, p, o): (i64, i64, i64) = p.extract()?;
        for code in [s, p, o] {
            if code & 1 == 1 && (code >> 1) as usize >= width {
                return Err(PyValueError::new_err(
                    "pattern refers to an undeclared variable",
                ));
            }
        }
        Ok(Pattern([s, p, o]))
    };
    // a condition's or value's tree; None for ("p",): the reference decides every row
    let native = |tree: Bound<'_, PyAny>, target: Option<usize>| -> PyResult<Option<Expr>> {
        if tree.get_item(0)?.extract::<String>()? == "p" {
            return Ok(None);
        }
        let e = expression(&tree)?;
        if e.max_slot().max(target).is_some_and(|s| s >= width) {
            return Err(PyValueError::new_err(
                "an expression refers to an undeclared variable",
            ));
        }
        Ok(Some(e))
    };
    let tag: String = item(0)?.extract()?;
    Ok(match tag.as_str() {
        "scan" => {
            let objects: Option<(i64, i64)> = item(2)?.extract()?;
            Spec::Scan(pattern(item(1)?)?, objects)
        }
        "values" => {
            let (slots, cells, rows): (Vec<usize>, Vec<i64>, u64) = (
                item(1)?.extract()?,
                item(2)?.extract()?,
                item(3)?.extract()?,
            );
            if slots.iter().any(|&s| s >= width) || cells.len() as u64 != slots.len() as u64 * rows
            {
                return Err(PyValueError::new_err("values: malformed rows"));
            }
            Spec::Values { slots, cells, rows }
        }
        "union" => Spec::Union(
            item(1)?
                .try_iter()?
                .map(|b| plan_spec(&b?, width, undecided))
                .collect::<PyResult<_>>()?,
        ),
        "join" => {
            let left = input(undecided)?;
            Spec::Join(
                left,
                Box::new(plan_spec(&item(2)?, width, undecided)?),
                None,
            )
        }
        "optional" | "exists" | "not_exists" | "minus" => {
            let mode = match tag.as_str() {
                "optional" => Mode::Optional,
                "exists" => Mode::Exists,
                "not_exists" => Mode::NotExists,
                _ => Mode::Minus,
            };
            let left = input(undecided)?;
            let right = Box::new(plan_spec(&item(2)?, width, undecided)?);
            let slots: Vec<usize> = item(3)?.extract()?;
            if slots.iter().any(|&s| s >= width) {
                return Err(PyValueError::new_err(format!(
                    "{tag}: a left slot is an undeclared variable"
                )));
            }
            Spec::Join(left, right, Some((mode, slots)))
        }
        "closure" => {
            let (from, to): (usize, usize) = (item(3)?.extract()?, item(4)?.extract()?);
            let subject = operand(item(5)?.extract()?, width)?;
            let object = operand(item(6)?.extract()?, width)?;
            let repeat = match item(7)?.extract::<String>()?.as_str() {
                "*" => Repeat::ZeroOrMore,
                "+" => Repeat::OneOrMore,
                "?" => Repeat::ZeroOrOne,
                other => {
                    return Err(PyValueError::new_err(format!(
                        "closure: no path operator {other}"
                    )))
                }
            };
            if from >= width || to >= width || from == to {
                return Err(PyValueError::new_err(
                    "closure: its step's ends are undeclared or the same",
                ));
            }
            Spec::Closure {
                forward: input(undecided)?,
                backward: Box::new(plan_spec(&item(2)?, width, undecided)?),
                from,
                to,
                subject,
                object,
                repeat,
            }
        }
        "merge" => {
            let key: usize = item(3)?.extract()?;
            if key >= width {
                return Err(PyValueError::new_err(
                    "merge join key is an undeclared variable",
                ));
            }
            Spec::Merge {
                left: input(undecided)?,
                right: pattern(item(2)?)?,
                key,
            }
        }
        "slice" => Spec::Slice {
            input: input(undecided)?,
            offset: item(2)?.extract()?,
            limit: item(3)?.extract()?,
        },
        "filter" => {
            let input = input(undecided)?;
            let mut atoms = Vec::new();
            for a in item(2)?.try_iter()? {
                #[allow(clippy::type_complexity)]
                let (same, a, b): (bool, (bool, i64), (bool, i64)) = a?.extract()?;
                atoms.push(Atom {
                    same,
                    a: operand(a, width)?,
                    b: operand(b, width)?,
                });
            }
            let condition = item(3)?;
            let condition = if condition.is_none() {
                None
            } else {
                let native = native(condition, None)?;
                undecided.push((item(4)?.unbind(), false));
                Some(native)
            };
            Spec::Filter {
                input,
                atoms,
                condition,
            }
        }
        "extend" => {
            let input = input(undecided)?;
            let slot: usize = item(2)?.extract()?;
            let value = native(item(3)?, Some(slot))?;
            undecided.push((item(4)?.unbind(), true));
            Spec::Extend { input, slot, value }
        }
        "tally" => {
            let input = input(undecided)?;
            let (slots, count): (Vec<usize>, Option<usize>) =
                (item(2)?.extract()?, item(3)?.extract()?);
            let listed: Vec<(usize, usize, String)> = item(4)?.extract()?;
            let mut reduced = Vec::with_capacity(listed.len());
            for (source, target, how) in listed {
                let how = match how.as_str() {
                    "min" => Reduce::Min,
                    "max" => Reduce::Max,
                    "sample" => Reduce::Sample,
                    "sum" => Reduce::Sum,
                    "avg" => Reduce::Avg,
                    other => {
                        return Err(PyValueError::new_err(format!(
                            "tally: no reduction {other}"
                        )))
                    }
                };
                reduced.push((source, target, how));
            }
            let used = reduced.iter().flat_map(|&(a, b, _)| [a, b]);
            if slots
                .iter()
                .chain(count.iter())
                .copied()
                .chain(used)
                .any(|s| s >= width)
            {
                return Err(PyValueError::new_err("tally of an undeclared variable"));
            }
            Spec::Tally {
                input,
                slots,
                count,
                reduced,
                exact: exact(5)?,
            }
        }
        "topk" => {
            let input = input(undecided)?;
            let (keys, k): (Vec<(usize, bool)>, usize) = (item(2)?.extract()?, item(3)?.extract()?);
            if keys.iter().any(|&(s, _)| s >= width) || k == 0 {
                return Err(PyValueError::new_err(
                    "top-k of an undeclared variable, or of no row",
                ));
            }
            Spec::TopK {
                input,
                keys,
                k,
                exact: exact(4)?,
            }
        }
        "hashjoin" => {
            let left = input(undecided)?;
            let right = Box::new(plan_spec(&item(2)?, width, undecided)?);
            let keys: Vec<usize> = item(3)?.extract()?;
            if keys.iter().any(|&s| s >= width) {
                return Err(PyValueError::new_err("hash join on an undeclared variable"));
            }
            Spec::HashJoin { left, right, keys }
        }
        other => return Err(PyValueError::new_err(format!("no operator {other:?}"))),
    })
}

/// One side of an atom: a slot (below `width`) or a term id.
fn operand((is_slot, v): (bool, i64), width: usize) -> PyResult<Operand> {
    if !is_slot {
        return Ok(Operand::Term(v));
    }
    match usize::try_from(v) {
        Ok(slot) if slot < width => Ok(Operand::Slot(slot)),
        _ => Err(PyValueError::new_err(
            "filter refers to an undeclared variable",
        )),
    }
}

/// An expression tree compiled: `("v", slot)`, `("t", term, id)`, `("n",)` for an
/// error, `("b", slot)` for BOUND, `("c", function, [args])`, `("r", text, Regex)`.
fn expression(node: &Bound<'_, PyAny>) -> PyResult<Expr> {
    let tag: String = node.get_item(0)?.extract()?;
    Ok(match tag.as_str() {
        "v" => Expr::Var(node.get_item(1)?.extract()?),
        "b" => Expr::Bound(node.get_item(1)?.extract()?),
        "n" => Expr::Const(None),
        "t" => Expr::constant(
            &node.get_item(1)?.extract::<String>()?,
            node.get_item(2)?.extract()?,
        ),
        "c" => {
            let number: u32 = node.get_item(1)?.extract()?;
            let f = Func::from_number(number)
                .ok_or_else(|| PyValueError::new_err(format!("no native function {number}")))?;
            let args = node
                .get_item(2)?
                .try_iter()?
                .map(|a| expression(&a?))
                .collect::<PyResult<Vec<Expr>>>()?;
            Expr::call(f, args).map_err(PyValueError::new_err)?
        }
        "r" => {
            let text = expression(&node.get_item(1)?)?;
            let regex = node.get_item(2)?.cast::<PyRegex>()?.get().shared();
            Expr::Regex(Box::new(text), regex)
        }
        "x" => {
            let text = expression(&node.get_item(1)?)?;
            let regex = node.get_item(2)?.cast::<PyRegex>()?.get().shared();
            let parts = crate::regexp::py::replacement(node.get_item(3)?.extract()?)?;
            Expr::Replace(Box::new(text), regex, parts, node.get_item(4)?.extract()?)
        }
        other => {
            return Err(PyValueError::new_err(format!(
                "no expression node {other:?}"
            )))
        }
    })
}

/// Build the side index of an HDT file.
#[pyfunction]
fn build_index(py: Python<'_>, path: &str, index_path: &str) -> PyResult<()> {
    py.detach(|| {
        let hdt = Hdt::open(Path::new(path))?;
        index::build(&hdt, Path::new(index_path))
    })
    .map_err(PyOSError::new_err)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    #[cfg(target_arch = "x86_64")]
    if !std::arch::is_x86_feature_detected!("popcnt") {
        return Err(pyo3::exceptions::PyImportError::new_err(
            "quanta's native core was built for x86-64-v2 (lib/native/.cargo/config.toml) \
             and this CPU lacks POPCNT",
        ));
    }
    m.add_class::<NativeHdt>()?;
    m.add_class::<TripleCursor>()?;
    m.add_class::<Pipeline>()?;
    m.add_class::<Rows>()?;
    m.add_class::<RowsIter>()?;
    crate::regexp::py::register(m)?;
    crate::query::py::register(m)?;
    m.add("PageTooLarge", m.py().get_type::<PageTooLarge>())?;
    m.add("StateTooLarge", m.py().get_type::<StateTooLarge>())?;
    m.add("FULL", FULL)?;
    m.add("DONE", DONE)?;
    m.add("EXPIRED", EXPIRED)?;
    m.add_function(wrap_pyfunction!(build_index, m)?)?;
    m.add("INDEX_SUFFIX", index::SUFFIX)?;
    Ok(())
}
