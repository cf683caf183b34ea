//! quanta's native storage core: an HDT file and its side index, memory-mapped
//! and shared between processes, read through cursors whose state is an
//! offset; and native execution of the plans' hot subtrees (scans and joins).

pub mod bits;
pub mod dict;
pub mod exec;
pub mod expr;
pub mod hdt;
pub mod index;
pub mod order;
pub mod query;
pub mod regexp;
pub mod render;
pub mod store;
pub mod temporal;
pub mod wire;

#[cfg(feature = "python")]
mod python;
