//! The Python module `quanta.native._core` (PyO3).

use crate::hdt::Hdt;
use crate::index;
use crate::store::{Cursor, Store};
use pyo3::exceptions::{PyKeyError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};
use std::path::Path;
use std::sync::Arc;

/// An HDT file and its side index, memory-mapped.
#[pyclass(frozen, module = "quanta.native._core")]
pub struct NativeHdt {
    store: Arc<Store>,
}

#[pymethods]
impl NativeHdt {
    #[new]
    fn new(py: Python<'_>, path: &str, index_path: &str) -> PyResult<Self> {
        let store = py
            .detach(|| Store::open(Path::new(path), Path::new(index_path)))
            .map_err(PyOSError::new_err)?;
        Ok(NativeHdt {
            store: Arc::new(store),
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

fn decoded<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyString>> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| PyValueError::new_err(format!("dictionary string: {e}")))?;
    Ok(PyString::new(py, text))
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
    m.add_class::<NativeHdt>()?;
    m.add_class::<TripleCursor>()?;
    m.add_function(wrap_pyfunction!(build_index, m)?)?;
    m.add("INDEX_SUFFIX", index::SUFFIX)?;
    Ok(())
}
