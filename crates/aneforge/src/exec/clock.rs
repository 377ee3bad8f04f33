//! The clocks profiles and calibration probes read: wall time or the process's CPU time.

use std::time::Instant;

use crate::error::{Error, Result};

/// The clock probes read: wall time, or the process's CPU time (all threads), which a machine
/// shared with other jobs does not inflate (with one executor thread it is the call's time on
/// an idle machine).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    Wall,
    Cpu,
}

impl Clock {
    /// Parse `wall` or `cpu`.
    pub fn parse(s: &str) -> Result<Clock> {
        match s {
            "wall" => Ok(Clock::Wall),
            "cpu" => Ok(Clock::Cpu),
            _ => Err(Error::value(
                "clock",
                format!("unknown clock '{s}' (expected wall or cpu)"),
            )),
        }
    }

    /// `wall` or `cpu`.
    pub fn name(self) -> &'static str {
        match self {
            Clock::Wall => "wall",
            Clock::Cpu => "cpu",
        }
    }

    /// The clock's reading in µs (the wall reading counts from `origin`).
    pub fn now_us(self, origin: Instant) -> Result<f64> {
        match self {
            Clock::Wall => Ok(origin.elapsed().as_secs_f64() * 1e6),
            Clock::Cpu => process_cpu_us(),
        }
    }
}

/// CPU time of this process (every thread) in µs.
#[cfg(unix)]
pub fn process_cpu_us() -> Result<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Err(Error::Runtime {
            op: "clock".into(),
            msg: "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed".into(),
        });
    }
    Ok(ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3)
}

/// CPU time of this process: not available off Unix.
#[cfg(not(unix))]
pub fn process_cpu_us() -> Result<f64> {
    Err(Error::NotImplemented(
        "clock cpu: process CPU time is read on Unix systems only".into(),
    ))
}
