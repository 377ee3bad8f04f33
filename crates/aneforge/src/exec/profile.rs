//! Timing of executions: nested spans (call ⊃ stage ⊃ program/op) recorded by executors that
//! support it ([`super::Loaded::execute_profiled`]); an executor that cannot see inside its
//! program (the ANE) reports the whole program as one span. Recording is off unless a caller
//! passes a [`Profile`], so the plain `execute` path pays nothing.

use std::time::Instant;

use crate::error::Result;
use crate::exec::clock::{process_cpu_us, Clock};

/// What a span covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    /// One whole call (feeding done, outputs not yet read).
    Call,
    /// One stage of a segmented plan (a region or a host op).
    Stage,
    /// A whole program on an executor that reports no per-op time (the ANE).
    Program,
    /// One op of the reference executor.
    Op,
}

impl SpanKind {
    /// Lower-case name used in tables and trace categories.
    pub fn name(self) -> &'static str {
        match self {
            SpanKind::Call => "call",
            SpanKind::Stage => "stage",
            SpanKind::Program => "program",
            SpanKind::Op => "op",
        }
    }
}

/// The work of one op span: op name (`conv+batch_norm+relu` for a fused step), first output
/// shape, bytes moved and flops (see [`crate::cost::NodeWork`]).
#[derive(Clone, Debug, PartialEq)]
pub struct OpLabel {
    pub op: String,
    pub shape: Vec<usize>,
    pub bytes: u64,
    pub flops: u64,
}

/// One finished span; `start_us` is from the profile's origin, `depth` 0 = outermost.
#[derive(Clone, Debug, PartialEq)]
pub struct Span {
    pub name: String,
    pub kind: SpanKind,
    pub start_us: f64,
    pub dur_us: f64,
    pub depth: u32,
    /// Index of the call (run) the span belongs to.
    pub run: usize,
    /// The plan stage it sits in (`None` outside plans).
    pub stage: Option<usize>,
    /// Whether no span was recorded inside it.
    pub leaf: bool,
    pub label: Option<OpLabel>,
}

/// An open span: when it started (µs on the profile's clock).
#[derive(Debug)]
pub struct Open {
    start: f64,
}

/// The span recorder: spans in closing order (children before their parent).
#[derive(Debug)]
pub struct Profile {
    origin: Instant,
    /// The clock spans are timed by (CPU time: every thread of the process).
    clock: Clock,
    /// The CPU clock's reading at `origin` (0 on the wall clock).
    cpu_origin: f64,
    /// Finished spans.
    pub spans: Vec<Span>,
    /// Has-children flag of each open span, innermost last.
    open: Vec<bool>,
    /// The call index new spans get.
    pub run: usize,
    /// The plan stage new spans get.
    pub stage: Option<usize>,
}

impl Default for Profile {
    fn default() -> Profile {
        Profile::new()
    }
}

impl Profile {
    /// An empty recorder on the wall clock whose origin is now.
    pub fn new() -> Profile {
        Profile {
            origin: Instant::now(),
            clock: Clock::Wall,
            cpu_origin: 0.0,
            spans: Vec::new(),
            open: Vec::new(),
            run: 0,
            stage: None,
        }
    }

    /// An empty recorder timed by `clock` whose origin is now (the CPU clock is an error where
    /// process CPU time cannot be read).
    pub fn with_clock(clock: Clock) -> Result<Profile> {
        let cpu_origin = match clock {
            Clock::Wall => 0.0,
            Clock::Cpu => process_cpu_us()?,
        };
        Ok(Profile {
            clock,
            cpu_origin,
            ..Profile::new()
        })
    }

    /// The clock spans are timed by.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// µs on the profile's clock since its origin (the CPU clock was read once at creation,
    /// so it reads on every later call).
    fn now_us(&self) -> f64 {
        match self.clock {
            Clock::Wall => self.origin.elapsed().as_secs_f64() * 1e6,
            Clock::Cpu => process_cpu_us().map_or(0.0, |t| t - self.cpu_origin),
        }
    }

    /// Open a span now (close it with [`Profile::close`], innermost first).
    pub fn open(&mut self) -> Open {
        if let Some(parent) = self.open.last_mut() {
            *parent = true;
        }
        self.open.push(false);
        Open {
            start: self.now_us(),
        }
    }

    /// Close the innermost open span started at `o`.
    pub fn close(&mut self, o: Open, name: String, kind: SpanKind, label: Option<OpLabel>) {
        let end = self.now_us();
        let has_children = self.open.pop().unwrap_or(false);
        self.spans.push(Span {
            name,
            kind,
            start_us: o.start,
            dur_us: end - o.start,
            depth: self.open.len() as u32,
            run: self.run,
            stage: self.stage,
            leaf: !has_children,
            label,
        });
    }
}
