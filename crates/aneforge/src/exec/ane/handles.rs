//! Ownership of e5rt objects: a [`Handle`] is released exactly once, through its `*_release`,
//! when dropped (or earlier through [`Handle::release`]).

use std::sync::atomic::{AtomicU64, Ordering};

use super::e5rt::{Ctx, Raw, ReleaseFn};
use crate::error::{Error, Result};

static RELEASE_FAILURES: AtomicU64 = AtomicU64::new(0);

/// Number of `*_release` calls that failed while dropping handles in this process.
pub fn release_failures() -> u64 {
    RELEASE_FAILURES.load(Ordering::Relaxed)
}

/// One e5rt object this process owns.
pub struct Handle {
    raw: Raw,
    ctx: Ctx,
    release_name: &'static str,
    release_fn: ReleaseFn,
}

impl Handle {
    /// Own `raw`, which `created_by` returned; a null object is an error naming that function.
    pub fn new(
        ctx: Ctx,
        raw: Raw,
        created_by: &'static str,
        release_name: &'static str,
        release_fn: ReleaseFn,
    ) -> Result<Handle> {
        if raw.is_null() {
            return Err(Error::E5rt {
                function: created_by,
                status: 0,
                message: "returned success but a null handle".into(),
            });
        }
        Ok(Handle {
            raw,
            ctx,
            release_name,
            release_fn,
        })
    }

    /// The object, for passing to e5rt while `self` is alive.
    pub fn raw(&self) -> Raw {
        self.raw
    }

    /// Release now; `Ok(true)` when the callee also cleared the handle variable it was given.
    pub fn release(mut self) -> Result<bool> {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        self.ctx.release(self.release_name, self.release_fn, raw)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.raw.is_null() {
            return;
        }
        if let Err(e) = self
            .ctx
            .release(self.release_name, self.release_fn, self.raw)
        {
            RELEASE_FAILURES.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "aneforge: warning: {e} (release convention {:?})",
                self.ctx.conv.release
            );
        }
    }
}
