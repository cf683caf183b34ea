//! Native execution of a plan's hot subtree: a left-deep chain of a scan and
//! joins whose right sides are scans (index loop joins and merge joins). It
//! mirrors the Python operators (`quanta.engine.operators.scan`, `.joins`)
//! step for step: the same rows in the same order, the same steps counted
//! (one per scan opened, one per index entry read), a suspension between any
//! two entries, and the same state, which the Python side saves in the same
//! flat layout. Rows are handed back in batches. Each level's rows then go
//! through its FILTERs and BINDs in order (`Step`): comparisons of ids
//! (`Atom`), conditions and values evaluated natively (`crate::expr`), which
//! hand what they cannot decide to the caller.

use crate::expr::{Eval, Expr, Fail, Terms};
use crate::store::{Cursor, Store, Triple};
use std::time::Instant;

/// Why `run` stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// the batch is full: call again for more
    Full,
    /// no more rows
    Done,
    /// the quantum expired (before reading the next entry)
    Expired,
}

/// The quantum's budget of steps and how its clock is checked; and who
/// decides what a step cannot (`undecided(step, row)`: the reference
/// evaluator: a condition's truth as 0 or 1, a BIND's term id, 0 for none;
/// an error stops the run as an expiry does, for the caller to raise).
pub struct Budget<'a> {
    pub steps: i64,
    pub check: &'a mut dyn FnMut(&mut i64) -> Result<(), Expired>,
    pub undecided: &'a mut Undecided<'a>,
}

/// Decides a row (`&[i64]`) for step number `usize`.
pub type Undecided<'a> = dyn FnMut(usize, &[i64]) -> Result<i64, Expired> + 'a;

#[derive(Debug)]
pub struct Expired;

impl Budget<'_> {
    #[inline]
    fn step(&mut self) -> Result<(), Expired> {
        self.steps -= 1;
        if self.steps < 0 {
            (self.check)(&mut self.steps)?;
        }
        Ok(())
    }
}

/// The clock of a real quantum: `CHECK_EVERY` steps between two readings.
pub struct Clock {
    pub deadline: Option<Instant>,
    pub every: i64,
    pub overshoot: f64,
}

impl Clock {
    pub fn check(&mut self, steps: &mut i64) -> Result<(), Expired> {
        if let Some(deadline) = self.deadline {
            let now = Instant::now();
            if now >= deadline {
                self.overshoot = (now - deadline).as_secs_f64();
                *steps = 0;
                return Err(Expired);
            }
        }
        *steps = self.every;
        Ok(())
    }
}

/// A triple pattern: each position `id << 1` (constant) or `slot << 1 | 1`.
#[derive(Clone, Copy, Debug)]
pub struct Pattern(pub [i64; 3]);

impl Pattern {
    /// The pattern under `mu`, and (slot, position) of its free variables.
    fn resolve(&self, mu: &[i64], free: &mut Vec<(usize, usize)>) -> [i64; 3] {
        free.clear();
        let mut values = [0i64; 3];
        for (position, &code) in self.0.iter().enumerate() {
            if code & 1 == 1 {
                let slot = (code >> 1) as usize;
                values[position] = mu[slot];
                if mu[slot] == 0 {
                    free.push((slot, position));
                }
            } else {
                values[position] = code >> 1;
            }
        }
        values
    }
}

/// `mu` extended with the free variables' values from `t`; false when a
/// variable repeated in the pattern gets two values.
#[inline]
fn bind(mu: &[i64], t: &Triple, free: &[(usize, usize)], out: &mut [i64]) -> bool {
    out.copy_from_slice(mu);
    for &(slot, position) in free {
        let v = t[position] as i64;
        if out[slot] == 0 {
            out[slot] = v;
        } else if out[slot] != v {
            return false; // a variable repeated in the pattern, two values
        }
    }
    true
}

struct ScanRt {
    pattern: Pattern,
    offset: u64,
    opened: bool,
    cursor: Cursor,
    free: Vec<(usize, usize)>,
}

impl ScanRt {
    fn new(pattern: Pattern) -> Self {
        ScanRt {
            pattern,
            offset: 0,
            opened: false,
            cursor: Cursor::Empty,
            free: Vec::new(),
        }
    }

    fn next(
        &mut self,
        store: &Store,
        budget: &mut Budget,
        mu: &[i64],
        out: &mut [i64],
    ) -> Result<bool, Expired> {
        if !self.opened {
            budget.step()?; // opening a scan is a step too
            let [s, p, o] = self.pattern.resolve(mu, &mut self.free);
            self.cursor = store.search(s, p, o, self.offset);
            self.opened = true;
        }
        loop {
            let Some(t) = store.next(&mut self.cursor) else {
                return Ok(false);
            };
            if budget.step().is_err() {
                self.opened = false; // this entry stays unread: reopen at the offset
                return Err(Expired);
            }
            self.offset += 1;
            if bind(mu, &t, &self.free, out) {
                return Ok(true);
            }
        }
    }
}

/// A scan, or a UNION of scans run one after the other (the Python `Union`:
/// its state is the running branch, then each branch's offset; a lone scan's
/// is its offset): a chain's base, or an index join's right side.
struct ScansRt {
    branches: Vec<ScanRt>,
    active: usize,
    union: bool,
}

impl ScansRt {
    fn new(patterns: Vec<Pattern>, union: bool) -> Self {
        ScansRt {
            branches: patterns.into_iter().map(ScanRt::new).collect(),
            active: 0,
            union,
        }
    }

    fn reset(&mut self) {
        self.active = 0;
        for branch in &mut self.branches {
            branch.offset = 0;
            branch.opened = false;
        }
    }

    fn restart(&mut self) {
        self.branches.iter_mut().for_each(|b| b.opened = false);
    }

    /// Values in the state (both layouts).
    fn len(&self) -> usize {
        self.branches.len() + usize::from(self.union)
    }

    fn save(&self, out: &mut Vec<i64>) {
        if self.union {
            out.push(self.active as i64);
        }
        out.extend(self.branches.iter().map(|b| b.offset as i64));
    }

    fn load(&mut self, values: &[i64]) -> Result<(), String> {
        let offsets = if self.union {
            let active = count(values[0])? as usize;
            if active > self.branches.len() {
                return Err(format!("saved branch {active} past the union's"));
            }
            self.active = active;
            &values[1..]
        } else {
            self.active = 0;
            values
        };
        for (branch, &v) in self.branches.iter_mut().zip(offsets) {
            branch.offset = count(v)?;
        }
        Ok(())
    }

    fn next(
        &mut self,
        store: &Store,
        budget: &mut Budget,
        mu: &[i64],
        out: &mut [i64],
    ) -> Result<bool, Expired> {
        while self.active < self.branches.len() {
            if self.branches[self.active].next(store, budget, mu, out)? {
                return Ok(true);
            }
            if !self.union {
                return Ok(false); // a lone scan stays the running one
            }
            self.active += 1;
        }
        Ok(false)
    }
}

/// A count or position of a native state, which is never negative.
fn count(v: i64) -> Result<u64, String> {
    u64::try_from(v).map_err(|_| format!("negative count {v}"))
}

/// What a chain starts from: a scan, a UNION of scans, or inline rows (VALUES).
pub enum BaseSpec {
    Scan(Pattern),
    /// a UNION of scans
    Union(Vec<Pattern>),
    /// the slots the rows bind, their cells (`slots.len()` ids a row, 0:
    /// UNDEF), and how many rows
    Values {
        slots: Vec<usize>,
        cells: Vec<i64>,
        rows: u64,
    },
}

enum Base {
    Scans(ScansRt),
    Values(ValuesRt),
}

/// VALUES as the Python operator runs it: a step per row read (taken before
/// the row, so a suspension leaves it unread); a row joins the input mapping
/// when each cell is UNDEF, unbound there, or equal to it.
struct ValuesRt {
    slots: Vec<usize>,
    cells: Vec<i64>,
    rows: u64,
    position: u64,
}

impl ValuesRt {
    fn len(&self) -> u64 {
        self.rows
    }

    fn next(&mut self, budget: &mut Budget, mu: &[i64], out: &mut [i64]) -> Result<bool, Expired> {
        let width = self.slots.len();
        'rows: while self.position < self.len() {
            budget.step()?;
            let start = self.position as usize * width;
            self.position += 1;
            out.copy_from_slice(mu);
            for (&slot, &value) in self.slots.iter().zip(&self.cells[start..start + width]) {
                if value != 0 {
                    if out[slot] != 0 && out[slot] != value {
                        continue 'rows;
                    }
                    out[slot] = value;
                }
            }
            return Ok(true);
        }
        Ok(false)
    }
}

impl Base {
    /// Values in the state.
    fn len(&self) -> usize {
        match self {
            Base::Scans(scans) => scans.len(),
            Base::Values(_) => 1,
        }
    }

    fn save(&self, out: &mut Vec<i64>) {
        match self {
            Base::Scans(scans) => scans.save(out),
            Base::Values(values) => out.push(values.position as i64),
        }
    }

    fn load(&mut self, state: &[i64]) -> Result<(), String> {
        match self {
            Base::Scans(scans) => scans.load(state),
            Base::Values(values) => {
                let position = count(state[0])?;
                if position > values.len() {
                    return Err(format!("saved position {position} past the rows"));
                }
                values.position = position;
                Ok(())
            }
        }
    }

    fn reset(&mut self) {
        match self {
            Base::Scans(scans) => scans.reset(),
            Base::Values(values) => values.position = 0,
        }
    }

    fn restart(&mut self) {
        if let Base::Scans(scans) = self {
            scans.restart();
        }
    }

    fn next(
        &mut self,
        store: &Store,
        budget: &mut Budget,
        mu: &[i64],
        out: &mut [i64],
    ) -> Result<bool, Expired> {
        match self {
            Base::Scans(scans) => scans.next(store, budget, mu, out),
            Base::Values(values) => values.next(budget, mu, out),
        }
    }
}

enum Join {
    Index {
        right: ScansRt,
        current: Vec<i64>,
        has_current: bool,
        in_right: bool,
    },
    Merge {
        key: usize,
        right: Pattern,
        right_offset: u64,
        current: Vec<i64>,
        has_current: bool,
        group_position: u64,
        // transient, rebuilt at every restart
        started: bool,
        finished: bool,
        pending: bool,
        cursor: Cursor,
        free: Vec<(usize, usize)>,
        group: Vec<Triple>,
        group_key: u64,
        lookahead: Option<Triple>,
    },
}

/// One side of a filter's comparison: a variable slot or a term id.
#[derive(Clone, Copy, Debug)]
pub enum Operand {
    Slot(usize),
    Term(i64),
}

/// `a` and `b` are (`same`) or are not the same term; false when either is
/// unbound (an error in SPARQL, which a FILTER treats as false). The Python
/// side only hands over comparisons that ids decide exactly.
#[derive(Clone, Copy, Debug)]
pub struct Atom {
    pub same: bool,
    pub a: Operand,
    pub b: Operand,
}

impl Atom {
    #[inline]
    fn holds(&self, row: &[i64]) -> bool {
        let value = |o: Operand| match o {
            Operand::Slot(slot) => row[slot],
            Operand::Term(id) => id,
        };
        let (a, b) = (value(self.a), value(self.b));
        a != 0 && b != 0 && ((a == b) == self.same)
    }
}

/// What a level does to each of its rows, in order: a FILTER drops it, a
/// BIND sets a slot (numbered conditions and BINDs: by their place among
/// `add_condition` and `add_extend` calls).
enum Step {
    Atoms(Vec<Atom>),
    Condition(usize, Expr),
    /// BIND(expression AS slot): an error leaves the slot unbound; a slot
    /// already bound (by the input mapping) keeps the row only if equal
    Extend(usize, usize, Expr),
}

/// The chain: `base`, then each join taking the previous level as its left;
/// `steps[i]`: what happens to each row of level `i`.
pub struct Chain {
    width: usize,
    base: Base,
    joins: Vec<Join>,
    steps: Vec<Vec<Step>>,
    added: usize,
    /// rows a step handed to `Budget::undecided`
    pub undecided: u64,
    terms: Terms,
    scratch: Vec<Vec<i64>>,
}

/// One join of a chain's description.
pub enum JoinSpec {
    Index(Pattern),
    /// an index join whose right side is a UNION of these patterns
    IndexUnion(Vec<Pattern>),
    Merge {
        key: usize,
        right: Pattern,
    },
}

impl Chain {
    pub fn new(width: usize, base: BaseSpec, joins: Vec<JoinSpec>) -> Self {
        let joins: Vec<Join> = joins
            .into_iter()
            .map(|j| match j {
                JoinSpec::Index(p) => Join::Index {
                    right: ScansRt::new(vec![p], false),
                    current: vec![0; width],
                    has_current: false,
                    in_right: false,
                },
                JoinSpec::IndexUnion(patterns) => Join::Index {
                    right: ScansRt::new(patterns, true),
                    current: vec![0; width],
                    has_current: false,
                    in_right: false,
                },
                JoinSpec::Merge { key, right } => Join::Merge {
                    key,
                    right,
                    right_offset: 0,
                    current: vec![0; width],
                    has_current: false,
                    group_position: 0,
                    started: false,
                    finished: false,
                    pending: false,
                    cursor: Cursor::Empty,
                    free: Vec::new(),
                    group: Vec::new(),
                    group_key: 0,
                    lookahead: None,
                },
            })
            .collect();
        let scratch = (0..=joins.len()).map(|_| vec![0; width]).collect();
        let steps = (0..=joins.len()).map(|_| Vec::new()).collect();
        Chain {
            width,
            base: match base {
                BaseSpec::Scan(pattern) => Base::Scans(ScansRt::new(vec![pattern], false)),
                BaseSpec::Union(patterns) => Base::Scans(ScansRt::new(patterns, true)),
                BaseSpec::Values { slots, cells, rows } => Base::Values(ValuesRt {
                    slots,
                    cells,
                    rows,
                    position: 0,
                }),
            },
            joins,
            steps,
            added: 0,
            undecided: 0,
            terms: Terms::default(),
            scratch,
        }
    }

    /// Rows of `level` must also satisfy `condition`; returns its number.
    pub fn add_condition(&mut self, level: usize, condition: Expr) -> Result<usize, String> {
        self.check_slots(&condition, None)?;
        let condition = condition.memoized(&mut self.terms);
        self.add_step(level, |number| Step::Condition(number, condition))
    }

    /// Rows of `level` get `slot` bound to `value` (a BIND); returns its number.
    pub fn add_extend(&mut self, level: usize, slot: usize, value: Expr) -> Result<usize, String> {
        self.check_slots(&value, Some(slot))?;
        self.add_step(level, |number| Step::Extend(number, slot, value))
    }

    /// Rows of `level` must also satisfy `atoms` (a FILTER between joins).
    pub fn add_filter(&mut self, level: usize, atoms: Vec<Atom>) -> Result<(), String> {
        for atom in &atoms {
            for o in [atom.a, atom.b] {
                if matches!(o, Operand::Slot(s) if s >= self.width) {
                    return Err("filter refers to an undeclared variable".into());
                }
            }
        }
        self.add_step(level, |_| Step::Atoms(atoms)).map(|_| ())
    }

    fn check_slots(&self, e: &Expr, target: Option<usize>) -> Result<(), String> {
        if e.max_slot().max(target).is_some_and(|s| s >= self.width) {
            return Err("an expression refers to an undeclared variable".into());
        }
        Ok(())
    }

    fn add_step(
        &mut self,
        level: usize,
        step: impl FnOnce(usize) -> Step,
    ) -> Result<usize, String> {
        let number = self.added;
        let step = step(number);
        let numbered = !matches!(step, Step::Atoms(_));
        self.steps.get_mut(level).ok_or("no such level")?.push(step);
        if numbered {
            self.added += 1;
        }
        Ok(number)
    }

    pub fn width(&self) -> usize {
        self.width
    }

    /// Free what the steps keep between rows (decoded terms, memoized tests).
    pub fn trim(&mut self) {
        self.terms.clear();
    }

    /// Back to the initial state (to run again for another input mapping).
    pub fn reset(&mut self) {
        self.base.reset();
        for join in &mut self.joins {
            match join {
                Join::Index {
                    right, has_current, ..
                } => {
                    right.reset();
                    *has_current = false;
                }
                Join::Merge {
                    right_offset,
                    has_current,
                    group_position,
                    ..
                } => {
                    *right_offset = 0;
                    *has_current = false;
                    *group_position = 0;
                }
            }
        }
        self.restart();
    }

    /// Start iterating from the saved state, as a new generator would: every
    /// scan reopens at its offset (counting its opening step).
    pub fn restart(&mut self) {
        self.base.restart();
        for join in &mut self.joins {
            match join {
                Join::Index {
                    right,
                    has_current,
                    in_right,
                    ..
                } => {
                    right.restart();
                    *in_right = *has_current;
                }
                Join::Merge {
                    started,
                    finished,
                    pending,
                    group,
                    lookahead,
                    ..
                } => {
                    *started = false;
                    *finished = false;
                    *pending = false;
                    group.clear();
                    *lookahead = None;
                }
            }
        }
    }

    /// The state, flat: the base scan's offset, then per join (bottom up)
    /// `[has_current, current.., right offset]` (index; a UNION on the right:
    /// `[.., active branch, each branch's offset]`) or
    /// `[has_current, current.., group_position, right offset]` (merge).
    pub fn state(&self) -> Vec<i64> {
        let mut out = Vec::new();
        self.base.save(&mut out);
        for join in &self.joins {
            match join {
                Join::Index {
                    right,
                    current,
                    has_current,
                    ..
                } => {
                    out.push(*has_current as i64);
                    out.extend_from_slice(current);
                    right.save(&mut out);
                }
                Join::Merge {
                    right_offset,
                    current,
                    has_current,
                    group_position,
                    ..
                } => {
                    out.push(*has_current as i64);
                    out.extend_from_slice(current);
                    out.push(*group_position as i64);
                    out.push(*right_offset as i64);
                }
            }
        }
        out
    }

    pub fn load(&mut self, state: &[i64]) -> Result<(), String> {
        let w = self.width;
        let expected = self.base.len()
            + self
                .joins
                .iter()
                .map(|j| match j {
                    Join::Index { right, .. } => 1 + w + right.len(),
                    Join::Merge { .. } => 3 + w,
                })
                .sum::<usize>();
        if state.len() != expected {
            return Err(format!(
                "native state of {} values, expected {expected}",
                state.len()
            ));
        }
        let mut i = self.base.len();
        self.base.load(&state[..i])?;
        for join in &mut self.joins {
            match join {
                Join::Index {
                    right,
                    current,
                    has_current,
                    ..
                } => {
                    *has_current = state[i] != 0;
                    current.copy_from_slice(&state[i + 1..i + 1 + w]);
                    let n = right.len();
                    right.load(&state[i + 1 + w..i + 1 + w + n])?;
                    i += 1 + w + n;
                }
                Join::Merge {
                    right_offset,
                    current,
                    has_current,
                    group_position,
                    ..
                } => {
                    *has_current = state[i] != 0;
                    current.copy_from_slice(&state[i + 1..i + 1 + w]);
                    *group_position = count(state[i + 1 + w])?;
                    *right_offset = count(state[i + 2 + w])?;
                    i += 3 + w;
                }
            }
        }
        self.restart();
        Ok(())
    }

    /// The state in the layout the Python operators save (pre-order from the
    /// top join: an index join `[mapping, left.., right offset]`, a merge join
    /// `[mapping, group position, right offset, left..]`, a scan `[offset]`; a
    /// mapping `[n, v1..vn]` without trailing unbound slots, `[-1]` for none).
    /// None if a mapping holds an id below `-fixed` (a computed term, which
    /// the Python side renumbers).
    pub fn saved_layout(&self, fixed: i64) -> Option<Vec<i64>> {
        let mut out = Vec::with_capacity(8 + self.joins.len() * (self.width + 3));
        self.write_level(self.joins.len(), fixed, &mut out)
            .then_some(out)
    }

    fn write_level(&self, level: usize, fixed: i64, out: &mut Vec<i64>) -> bool {
        if level == 0 {
            self.base.save(out);
            return true;
        }
        let mapping = |out: &mut Vec<i64>, has: bool, current: &[i64]| -> bool {
            if !has {
                out.push(-1);
                return true;
            }
            let n = current.iter().rposition(|&v| v != 0).map_or(0, |i| i + 1);
            out.push(n as i64);
            out.extend_from_slice(&current[..n]);
            current[..n].iter().all(|&v| v >= -fixed)
        };
        match &self.joins[level - 1] {
            Join::Index {
                right,
                current,
                has_current,
                ..
            } => {
                mapping(out, *has_current, current) && self.write_level(level - 1, fixed, out) && {
                    right.save(out);
                    true
                }
            }
            Join::Merge {
                right_offset,
                current,
                has_current,
                group_position,
                ..
            } => {
                let ok = mapping(out, *has_current, current);
                out.push(*group_position as i64);
                out.push(*right_offset as i64);
                ok && self.write_level(level - 1, fixed, out)
            }
        }
    }

    /// Read the Python layout (see `saved_layout`) value by value from `next`
    /// into this chain's own layout (see `state`), checking it as the Python
    /// operators do. Returns the state and whether a mapping holds an id
    /// below `-fixed` (to be mapped by the Python side before `load`).
    pub fn parse_layout(
        &self,
        next: &mut dyn FnMut() -> Result<i64, String>,
        fixed: i64,
    ) -> Result<(Vec<i64>, bool), String> {
        let w = self.width;
        // per level, bottom up: filled from the top down, so collect then order
        let mut levels: Vec<Vec<i64>> = vec![Vec::new(); self.joins.len()];
        let mut foreign = false;
        let mut mapping = |next: &mut dyn FnMut() -> Result<i64, String>,
                           out: &mut Vec<i64>|
         -> Result<(), String> {
            let n = next()?;
            if n < 0 {
                out.push(0);
                out.extend(std::iter::repeat_n(0, w));
                return Ok(());
            }
            if n as usize > w {
                return Err("saved mapping is wider than the plan".into());
            }
            out.push(1);
            for _ in 0..n {
                let v = next()?;
                foreign |= v < -fixed;
                out.push(v);
            }
            out.extend(std::iter::repeat_n(0, w - n as usize));
            Ok(())
        };
        let count = |v: i64| -> Result<i64, String> {
            if v < 0 {
                Err(format!("saved position {v} out of range"))
            } else {
                Ok(v)
            }
        };
        // index joins save their right side's state after the left's: remember them
        let mut pending_right: Vec<(usize, usize)> = Vec::new();
        for level in (1..=self.joins.len()).rev() {
            let out = &mut levels[level - 1];
            match &self.joins[level - 1] {
                Join::Index { right, .. } => {
                    mapping(next, out)?;
                    pending_right.push((level - 1, right.len()));
                }
                Join::Merge { .. } => {
                    mapping(next, out)?;
                    out.push(count(next()?)?);
                    out.push(count(next()?)?);
                }
            }
        }
        let mut state = Vec::with_capacity(self.base.len());
        for _ in 0..self.base.len() {
            state.push(count(next()?)?);
        }
        for &(index, values) in pending_right.iter().rev() {
            for _ in 0..values {
                levels[index].push(count(next()?)?);
            }
        }
        for level in levels {
            state.extend(level);
        }
        Ok((state, foreign))
    }

    /// Up to `max_rows` rows (each `width` values, appended to `rows`),
    /// stopping right after the last one.
    pub fn run(
        &mut self,
        store: &Store,
        budget: &mut Budget,
        mu: &[i64],
        max_rows: usize,
        rows: &mut Vec<i64>,
    ) -> (Status, usize) {
        let top = self.joins.len();
        let mut out = std::mem::take(&mut self.scratch[top]);
        let mut produced = 0;
        let status = loop {
            if produced >= max_rows {
                break Status::Full;
            }
            match self.next(top, store, budget, mu, &mut out) {
                Ok(true) => {
                    rows.extend_from_slice(&out);
                    produced += 1;
                }
                Ok(false) => break Status::Done,
                Err(Expired) => break Status::Expired,
            }
        };
        self.scratch[top] = out;
        (status, produced)
    }

    /// The next row of level `level` (0: the base scan) into `out` that
    /// passes the level's filter.
    fn next(
        &mut self,
        level: usize,
        store: &Store,
        budget: &mut Budget,
        mu: &[i64],
        out: &mut [i64],
    ) -> Result<bool, Expired> {
        loop {
            if !self.next_unfiltered(level, store, budget, mu, out)? {
                return Ok(false);
            }
            if self.steps_keep(level, store, budget, out)? {
                return Ok(true);
            }
        }
    }

    /// `row` through the level's steps: whether it is kept (BINDs set in place).
    fn steps_keep(
        &mut self,
        level: usize,
        store: &Store,
        budget: &mut Budget,
        row: &mut [i64],
    ) -> Result<bool, Expired> {
        let Chain {
            steps,
            terms,
            undecided,
            ..
        } = self;
        for step in &steps[level] {
            match step {
                Step::Atoms(atoms) => {
                    if !atoms.iter().all(|atom| atom.holds(row)) {
                        return Ok(false);
                    }
                }
                Step::Condition(number, condition) => {
                    let holds = match (Eval { store, terms, row }).test(condition) {
                        Ok(holds) => holds,
                        Err(Fail::Unknown) => {
                            *undecided += 1;
                            (budget.undecided)(*number, row)? != 0
                        }
                        Err(Fail::Error) => false,
                    };
                    if !holds {
                        return Ok(false);
                    }
                }
                Step::Extend(number, slot, value) => {
                    let id = match (Eval { store, terms, row }).id(value) {
                        Ok(id) => id,
                        Err(_) => {
                            *undecided += 1;
                            (budget.undecided)(*number, row)?
                        }
                    };
                    if id != 0 {
                        if row[*slot] == 0 {
                            row[*slot] = id;
                        } else if row[*slot] != id {
                            return Ok(false);
                        }
                    }
                }
            }
        }
        Ok(true)
    }

    fn next_unfiltered(
        &mut self,
        level: usize,
        store: &Store,
        budget: &mut Budget,
        mu: &[i64],
        out: &mut [i64],
    ) -> Result<bool, Expired> {
        if level == 0 {
            return self.base.next(store, budget, mu, out);
        }
        let mut left_row = std::mem::take(&mut self.scratch[level - 1]);
        let result = self.next_join(level, store, budget, mu, out, &mut left_row);
        self.scratch[level - 1] = left_row;
        result
    }

    fn next_join(
        &mut self,
        level: usize,
        store: &Store,
        budget: &mut Budget,
        mu: &[i64],
        out: &mut [i64],
        left_row: &mut [i64],
    ) -> Result<bool, Expired> {
        let is_index = matches!(self.joins[level - 1], Join::Index { .. });
        if is_index {
            loop {
                if let Join::Index {
                    right,
                    current,
                    in_right,
                    ..
                } = &mut self.joins[level - 1]
                {
                    if *in_right {
                        if right.next(store, budget, current, out)? {
                            return Ok(true);
                        }
                        *in_right = false;
                    }
                }
                // the next left mapping (current keeps the old one until then)
                let found = self.next(level - 1, store, budget, mu, left_row)?;
                let Join::Index {
                    right,
                    current,
                    has_current,
                    in_right,
                } = &mut self.joins[level - 1]
                else {
                    unreachable!()
                };
                if !take_left(found, left_row, current, has_current) {
                    return Ok(false);
                }
                right.reset();
                *in_right = true;
            }
        }
        self.next_merge(level, store, budget, mu, out, left_row)
    }

    #[allow(clippy::too_many_arguments)]
    fn next_merge(
        &mut self,
        level: usize,
        store: &Store,
        budget: &mut Budget,
        mu: &[i64],
        out: &mut [i64],
        left_row: &mut [i64],
    ) -> Result<bool, Expired> {
        {
            let Join::Merge {
                key,
                right,
                right_offset,
                has_current,
                started,
                finished,
                pending,
                cursor,
                free,
                group,
                lookahead,
                group_key,
                ..
            } = &mut self.joins[level - 1]
            else {
                unreachable!()
            };
            if *finished {
                return Ok(false);
            }
            if !*started {
                // the right side resolved under no bindings: its key is free
                let zero = vec![0i64; mu.len()];
                let [s, p, o] = right.resolve(&zero, free);
                let key_slot = *key;
                free.retain(|&(slot, _)| slot != key_slot); // the key comes from the left mapping
                *cursor = store.search(s, p, o, *right_offset);
                *lookahead = store.next(cursor);
                group.clear();
                *started = true;
                if !next_group(
                    store,
                    budget,
                    right_offset,
                    group,
                    group_key,
                    lookahead,
                    cursor,
                )? {
                    *finished = true;
                    return Ok(false);
                }
                *pending = *has_current; // resumed in the middle of a left mapping
            }
        }
        loop {
            let need_left =
                matches!(&self.joins[level - 1], Join::Merge { pending, .. } if !*pending);
            if need_left {
                let found = self.next(level - 1, store, budget, mu, left_row)?;
                let Join::Merge {
                    current,
                    has_current,
                    group_position,
                    pending,
                    finished,
                    ..
                } = &mut self.joins[level - 1]
                else {
                    unreachable!()
                };
                if !take_left(found, left_row, current, has_current) {
                    *finished = true;
                    return Ok(false);
                }
                *group_position = 0;
                *pending = true;
            }
            let Join::Merge {
                key,
                right_offset,
                current,
                has_current,
                group_position,
                finished,
                pending,
                cursor,
                free,
                group,
                group_key,
                lookahead,
                ..
            } = &mut self.joins[level - 1]
            else {
                unreachable!()
            };
            let wanted = current[*key] as u64;
            while *group_key < wanted {
                if !next_group(
                    store,
                    budget,
                    right_offset,
                    group,
                    group_key,
                    lookahead,
                    cursor,
                )? {
                    *has_current = false;
                    current.iter_mut().for_each(|v| *v = 0);
                    *finished = true;
                    return Ok(false);
                }
            }
            if *group_key == wanted && (*group_position as usize) < group.len() {
                let t = group[*group_position as usize];
                *group_position += 1;
                bind(current, &t, free, out);
                return Ok(true);
            }
            *pending = false;
        }
    }
}

/// A join's current left mapping once the next one was searched for: `left_row`
/// if `found`, else none (all unbound). Returns `found`.
fn take_left(found: bool, left_row: &[i64], current: &mut [i64], has_current: &mut bool) -> bool {
    if found {
        current.copy_from_slice(left_row);
    } else {
        current.fill(0);
    }
    *has_current = found;
    found
}

/// Move to the next group of equal subjects; false when the right side is done.
fn next_group(
    store: &Store,
    budget: &mut Budget,
    right_offset: &mut u64,
    group: &mut Vec<Triple>,
    group_key: &mut u64,
    lookahead: &mut Option<Triple>,
    cursor: &mut Cursor,
) -> Result<bool, Expired> {
    *right_offset += group.len() as u64;
    group.clear();
    let Some(first) = *lookahead else {
        return Ok(false);
    };
    *group_key = first[0];
    while let Some(t) = *lookahead {
        if t[0] != *group_key {
            break;
        }
        budget.step()?;
        group.push(t);
        *lookahead = store.next(cursor);
    }
    Ok(true)
}
