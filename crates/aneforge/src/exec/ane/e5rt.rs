//! Espresso's e5rt C API as one table of typed function pointers, resolved at run time by name
//! (plain, then `_`-prefixed), and the one switch for the ABI conventions that are still
//! uncertain (ane-dispatch §10 items 1–2): how a status word is read and how a handle is released.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use libloading::Library;

use crate::error::{Error, Result};

/// An opaque e5rt object.
pub type Raw = *mut c_void;
/// What every entry point returns; zero is success, read per [`StatusWidth`].
pub type Status = i64;
/// Every `*_release`: one pointer-sized argument, the handle's address or the handle ([`ReleaseBy`]).
pub type ReleaseFn = unsafe extern "C" fn(*mut c_void) -> Status;

macro_rules! required {
    ($($name:ident: fn($($arg:ty),*);)*) => {
        /// The entry points the executor cannot run without (ane-dispatch §2.3, §2.4).
        pub struct Api {
            $(pub $name: unsafe extern "C" fn($($arg),*) -> Status,)*
        }

        /// Names of the required symbols, in table order.
        pub const REQUIRED: &[&str] = &[$(stringify!($name)),*];

        impl Api {
            fn resolve(lib: &Library, seen: &mut Vec<Symbol>) -> std::result::Result<Api, String> {
                Ok(Api { $($name: lookup(lib, stringify!($name), seen).ok_or_else(|| stringify!($name).to_string())?,)* })
            }
        }
    };
}

required! {
    e5rt_e5_compiler_config_options_create: fn(*mut Raw);
    e5rt_e5_compiler_config_options_set_cache_bundle_location: fn(Raw, *const c_char);
    e5rt_e5_compiler_config_options_release: fn(*mut c_void);
    e5rt_e5_compiler_create_with_config: fn(*mut Raw, Raw);
    e5rt_e5_compiler_release: fn(*mut c_void);
    e5rt_e5_compiler_options_create: fn(*mut Raw);
    e5rt_e5_compiler_options_set_compute_device_types_mask: fn(Raw, u64);
    e5rt_e5_compiler_options_set_force_recompilation: fn(Raw, c_int);
    e5rt_e5_compiler_options_set_segmenter: fn(Raw, *const c_char);
    e5rt_e5_compiler_options_release: fn(*mut c_void);
    e5rt_e5_compiler_compile: fn(Raw, *const c_char, Raw, *mut Raw);
    e5rt_program_library_retain_program_function: fn(Raw, *const c_char, *mut Raw);
    e5rt_program_library_release: fn(*mut c_void);
    e5rt_program_function_release: fn(*mut c_void);
    e5rt_precompiled_compute_op_create_options_create_with_program_function: fn(*mut Raw, Raw);
    e5rt_precompiled_compute_op_create_options_set_operation_name: fn(Raw, *const c_char);
    e5rt_precompiled_compute_op_create_options_set_allocate_intermediate_buffers: fn(Raw, c_int);
    e5rt_precompiled_compute_op_create_options_release: fn(*mut c_void);
    e5rt_execution_stream_operation_create_precompiled_compute_operation_with_options: fn(*mut Raw, Raw);
    e5rt_execution_stream_operation_retain_input_port: fn(Raw, *const c_char, *mut Raw);
    e5rt_execution_stream_operation_retain_output_port: fn(Raw, *const c_char, *mut Raw);
    e5rt_execution_stream_operation_release: fn(*mut c_void);
    e5rt_io_port_bind_buffer_object: fn(Raw, Raw);
    e5rt_io_port_release: fn(*mut c_void);
    e5rt_buffer_object_alloc: fn(*mut Raw, usize, u32);
    e5rt_buffer_object_get_data_ptr: fn(Raw, *mut *mut c_void);
    e5rt_buffer_object_release: fn(*mut c_void);
    e5rt_execution_stream_create: fn(*mut Raw);
    e5rt_execution_stream_encode_operation: fn(Raw, Raw);
    e5rt_execution_stream_execute_sync: fn(Raw);
    e5rt_execution_stream_release: fn(*mut c_void);
}

/// The two spellings of the async submit (macOS 26 renamed it); probed for the report, never
/// called (it takes an Objective-C block, and `execute_sync` is the dispatch path).
pub const ASYNC_SUBMIT: [&str; 2] = [
    "e5rt_execution_stream_submit_async",
    "e5rt_execution_stream_async_submit",
];

/// How a symbol was found: `e5rt_x` (plain) or `_e5rt_x` (underscore); `None` when missing.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Symbol {
    pub name: String,
    pub spelling: Option<String>,
}

/// Look `name` up, then `_name`, recording which spelling answered.
fn lookup<T: Copy>(lib: &Library, name: &str, seen: &mut Vec<Symbol>) -> Option<T> {
    for (spelling, sym) in [
        ("plain", name.to_string()),
        ("underscore", format!("_{name}")),
    ] {
        // SAFETY: `T` is the prototype the table declares for `name`; it is only called through it.
        if let Ok(f) = unsafe { lib.get::<T>(sym.as_str()) } {
            seen.push(Symbol {
                name: name.into(),
                spelling: Some(spelling.into()),
            });
            return Some(*f);
        }
    }
    seen.push(Symbol {
        name: name.into(),
        spelling: None,
    });
    None
}

/// A loaded e5rt library: the required table, the optional entry points, and what resolved.
pub struct E5rt {
    pub api: Api,
    /// `e5rt_get_last_error_message() -> const char*` (thread-local message of the last failure).
    pub get_last_error_message: Option<unsafe extern "C" fn() -> *const c_char>,
    /// `e5rt_e5_compiler_options_set_custom_ane_compiler_options(opts, cstr)` (`TargetArchitecture=`).
    pub set_custom_ane_compiler_options: Option<unsafe extern "C" fn(Raw, *const c_char) -> Status>,
    /// Every symbol looked up, required and optional, with the spelling that answered.
    pub symbols: Vec<Symbol>,
    /// The file that was opened.
    pub path: PathBuf,
    /// Declared last so it is dropped last: every pointer above points into it.
    _lib: Library,
}

impl E5rt {
    /// dlopen `path` and resolve the table; the error is (step, reason) with step
    /// `framework` (dlopen failed) or `symbol` (names the first missing symbol).
    pub fn open(path: &Path) -> std::result::Result<E5rt, (&'static str, String)> {
        // SAFETY: opening a library runs its initialisers; the path is Espresso or a test fake.
        let lib = unsafe { Library::new(path) }
            .map_err(|e| ("framework", format!("dlopen {}: {e}", path.display())))?;
        let mut symbols = Vec::new();
        let api = Api::resolve(&lib, &mut symbols).map_err(|name| {
            (
                "symbol",
                format!(
                    "{name} is not exported by {} (tried {name} and _{name})",
                    path.display()
                ),
            )
        })?;
        let get_last_error_message = lookup(&lib, "e5rt_get_last_error_message", &mut symbols);
        let set_custom_ane_compiler_options = lookup(
            &lib,
            "e5rt_e5_compiler_options_set_custom_ane_compiler_options",
            &mut symbols,
        );
        for name in ASYNC_SUBMIT {
            let _: Option<unsafe extern "C" fn(Raw, *mut c_void) -> Status> =
                lookup(&lib, name, &mut symbols);
        }
        Ok(E5rt {
            api,
            get_last_error_message,
            set_custom_ane_compiler_options,
            symbols,
            path: path.to_path_buf(),
            _lib: lib,
        })
    }

    /// This thread's last e5rt error message, or a note saying why there is none.
    pub fn last_error(&self) -> String {
        let Some(f) = self.get_last_error_message else {
            return "(no message: e5rt_get_last_error_message is not exported)".into();
        };
        // SAFETY: the function takes no arguments and returns NULL or a NUL-terminated string
        // that stays valid until the next e5rt call on this thread; it is copied at once.
        let p = unsafe { f() };
        match (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()) {
            Some(m) if !m.is_empty() => m,
            _ => "(e5rt gave no message)".into(),
        }
    }
}

/// How a status word is read (§10 item 1): its low 32 bits (the `int` reading, the default) or all 64.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StatusWidth {
    #[default]
    Low32,
    Full64,
}

/// How a handle is passed to `*_release` (§10 item 2): its address (AF, TMC; the default) or the handle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReleaseBy {
    #[default]
    Address,
    Value,
}

/// The uncertain ABI conventions in force: the one place they are switched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Conventions {
    pub status: StatusWidth,
    pub release: ReleaseBy,
}

impl Conventions {
    /// The defaults, overridden by `ANEFORGE_E5RT_STATUS` (32 | 64) and `ANEFORGE_E5RT_RELEASE` (address | value).
    pub fn from_env() -> Result<Conventions> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let mut c = Conventions::default();
        match var("ANEFORGE_E5RT_STATUS").as_deref() {
            None => {}
            Some("32") => c.status = StatusWidth::Low32,
            Some("64") => c.status = StatusWidth::Full64,
            Some(v) => {
                return Err(Error::value(
                    "ANEFORGE_E5RT_STATUS",
                    format!("'{v}' is not a status width (expected 32 or 64)"),
                ))
            }
        }
        match var("ANEFORGE_E5RT_RELEASE").as_deref() {
            None => {}
            Some("address") => c.release = ReleaseBy::Address,
            Some("value") => c.release = ReleaseBy::Value,
            Some(v) => {
                return Err(Error::value(
                    "ANEFORGE_E5RT_RELEASE",
                    format!("'{v}' is not a release convention (expected address or value)"),
                ))
            }
        }
        Ok(c)
    }

    /// The status as this convention reads it (0 = success).
    pub fn read(self, raw: Status) -> i64 {
        match self.status {
            StatusWidth::Low32 => raw as i32 as i64,
            StatusWidth::Full64 => raw,
        }
    }
}

static CALLS: AtomicU64 = AtomicU64::new(0);
static UPPER_SET: AtomicU64 = AtomicU64::new(0);

/// (status words checked, of which the low 32 bits said success while the upper 32 were not
/// zero) in this process: evidence for §10 item 1 that the selfcheck reports.
pub fn status_stats() -> (u64, u64) {
    (
        CALLS.load(Ordering::Relaxed),
        UPPER_SET.load(Ordering::Relaxed),
    )
}

/// A loaded library plus the conventions in force: everything needed to call e5rt.
#[derive(Clone, Copy)]
pub struct Ctx {
    pub e5: &'static E5rt,
    pub conv: Conventions,
}

impl Ctx {
    /// Ok when `raw` reads as success; else [`Error::E5rt`] naming `function`, with e5rt's message.
    pub fn check(self, function: &'static str, raw: Status) -> Result<()> {
        CALLS.fetch_add(1, Ordering::Relaxed);
        if raw as i32 == 0 && raw >> 32 != 0 {
            UPPER_SET.fetch_add(1, Ordering::Relaxed);
        }
        match self.conv.read(raw) {
            0 => Ok(()),
            status => Err(Error::E5rt {
                function,
                status,
                message: self.e5.last_error(),
            }),
        }
    }

    /// Release `raw` through `release` per the convention; `Ok(true)` when the callee also
    /// cleared the handle variable it was given (only possible by address).
    pub fn release(self, function: &'static str, release: ReleaseFn, raw: Raw) -> Result<bool> {
        let mut slot = raw;
        let arg = match self.conv.release {
            ReleaseBy::Address => (&mut slot as *mut Raw).cast::<c_void>(),
            ReleaseBy::Value => raw,
        };
        // SAFETY: `raw` is a live object owned by the caller and released exactly once, here.
        self.check(function, unsafe { release(arg) })?;
        Ok(slot.is_null())
    }
}

/// `call!(ctx, e5rt_fn(args))`: call a required entry point and check its status. Every handle
/// argument must come from a live [`Handle`](super::handles::Handle), every string from a live `CString`.
macro_rules! call {
    ($ctx:expr, $f:ident($($arg:expr),* $(,)?)) => {{
        let ctx: $crate::exec::ane::e5rt::Ctx = $ctx;
        // SAFETY: the arguments follow the table's prototype and are live for the call.
        let raw = unsafe { (ctx.e5.api.$f)($($arg),*) };
        ctx.check(stringify!($f), raw)
    }};
}

/// `create!(ctx, out, e5rt_fn(args naming out) => e5rt_release_fn)`: a creating call whose
/// out-pointer is `out`, checked, and its object wrapped in a [`Handle`](super::handles::Handle).
macro_rules! create {
    ($ctx:expr, $out:ident, $f:ident($($arg:expr),* $(,)?) => $rel:ident) => {{
        let ctx: $crate::exec::ane::e5rt::Ctx = $ctx;
        let mut raw: $crate::exec::ane::e5rt::Raw = std::ptr::null_mut();
        let $out: *mut $crate::exec::ane::e5rt::Raw = &mut raw;
        // SAFETY: the arguments follow the table's prototype; `out` points at a live local.
        let status = unsafe { (ctx.e5.api.$f)($($arg),*) };
        ctx.check(stringify!($f), status)
            .and_then(|()| $crate::exec::ane::handles::Handle::new(ctx, raw, stringify!($f), stringify!($rel), ctx.e5.api.$rel))
    }};
}

pub(crate) use {call, create};
