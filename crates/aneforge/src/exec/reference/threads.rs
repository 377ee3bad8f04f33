//! Thread policy of the reference executor. Kernels split work on the rayon pool only above
//! their own size thresholds; a program calls into the pool only when it is not tiny, so a
//! tiny program never wakes a thread. A program that is not tiny runs wholly on one pool
//! worker (one hand-off per call), so its kernels split with rayon's in-worker joins instead
//! of each injecting its work from outside the pool and sleeping until it is done. The pool is
//! rayon's global one (sized by `RAYON_NUM_THREADS`, else one thread per core) until
//! [`set_num_threads`] installs a pool of its own for every reference program run afterwards.

use std::sync::{Arc, RwLock};

use crate::error::{Error, Result};

/// Total elements read and written by a program's steps below which it runs on the calling
/// thread: below it no kernel reaches a parallel threshold (2^15 elements, or 2^20
/// multiply-adds, which needs well over 4096 operand elements).
pub const TINY_WORK: usize = 1 << 12;

static POOL: RwLock<Option<Arc<rayon::ThreadPool>>> = RwLock::new(None);

/// Run the reference executor on `n` threads from now on (a pool of its own; `n = 1` runs
/// every kernel on one thread). Errors (ValueError) for `n = 0` or when the pool cannot start.
pub fn set_num_threads(n: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::value(
            "set_num_threads",
            "n must be >= 1 (got 0); the default is RAYON_NUM_THREADS, else one thread per core",
        ));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("aneforge-{i}"))
        .build()
        .map_err(|e| Error::value("set_num_threads", format!("cannot start {n} threads: {e}")))?;
    *POOL.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(pool));
    Ok(())
}

/// Threads the reference executor runs on: the [`set_num_threads`] value, else rayon's global
/// pool size (`RAYON_NUM_THREADS`, else the core count).
pub fn num_threads() -> usize {
    match current_pool() {
        Some(p) => p.current_num_threads(),
        None => rayon::current_num_threads(),
    }
}

fn current_pool() -> Option<Arc<rayon::ThreadPool>> {
    POOL.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Run `f` (a program of `work` elements, see [`TINY_WORK`]): inline when tiny, else on a
/// worker of the [`set_num_threads`] pool, or of rayon's global pool when none was set (inline
/// when the caller already is one of its workers).
pub fn run<R: Send>(work: usize, f: impl FnOnce() -> R + Send) -> R {
    if work < TINY_WORK {
        return f();
    }
    match current_pool() {
        Some(pool) => pool.install(f),
        None => rayon::scope(|_| f()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_threads_is_a_value_error() {
        let e = set_num_threads(0).unwrap_err();
        assert!(matches!(e, Error::Value { .. }), "{e:?}");
        assert!(e.to_string().contains("got 0"), "{e}");
    }

    #[test]
    fn tiny_work_stays_on_the_calling_thread() {
        let me = std::thread::current().id();
        assert_eq!(run(TINY_WORK - 1, || std::thread::current().id()), me);
    }

    #[test]
    fn other_work_runs_on_a_pool_worker() {
        assert_eq!(rayon::current_thread_index(), None, "the test thread");
        assert!(run(TINY_WORK, || rayon::current_thread_index().is_some()));
    }
}
