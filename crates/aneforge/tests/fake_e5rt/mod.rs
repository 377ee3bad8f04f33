//! Builds the fake e5rt library (`fake_e5rt.c`) with gcc and drives its test controls. The
//! default build is installed once per test process as `ANEFORGE_E5RT_LIBRARY`.
#![allow(dead_code)] // shared by ane_fake.rs and ane_fake_cli.rs, each using a part

use std::ffi::{c_char, c_int, CStr, CString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Compile the fake with extra `-D` flags into `lib<name>.so`; `None` when gcc is missing.
pub fn build(name: &str, defines: &[&str]) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_e5rt/fake_e5rt.c");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake_e5rt");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(format!("lib{name}.so"));
    let tmp = dir.join(format!(".lib{name}.so.{}", std::process::id()));
    let status = match Command::new("gcc")
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror"])
        .args(defines)
        .arg(&src)
        .arg("-o")
        .arg(&tmp)
        .status()
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            skip_without_gcc();
            return None;
        }
        r => r.unwrap(),
    };
    assert!(status.success(), "gcc failed to build {}", src.display());
    std::fs::rename(&tmp, &out).unwrap();
    Some(out)
}

/// gcc is missing: under CI (where it is installed) that is a failure; elsewhere the test is
/// skipped with a line written straight to stderr, past the harness's output capture.
fn skip_without_gcc() {
    let why = "gcc is not installed, so the fake e5rt library cannot be built";
    if std::env::var_os("CI").is_some() {
        panic!("{why} (CI is set: the fake e5rt tests must run)");
    }
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// The default fake, loaded a second time by the test to reach its controls.
pub struct Fake {
    lib: libloading::Library,
    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
    pub path: PathBuf,
}

impl Fake {
    fn f<T: Copy>(&self, name: &str) -> T {
        // SAFETY: the prototypes below match fake_e5rt.c's test controls.
        unsafe { *self.lib.get::<T>(name).unwrap() }
    }
    /// Forget every object and call; clear failure injection and modes.
    pub fn reset(&self) {
        unsafe { self.f::<unsafe extern "C" fn()>("fake_e5rt_reset")() }
    }
    /// Make the `nth` call of `function` fail with `status`.
    pub fn fail(&self, function: &str, nth: i32, status: i64) {
        let name = CString::new(function).unwrap();
        unsafe {
            self.f::<unsafe extern "C" fn(*const c_char, c_int, i64)>("fake_e5rt_fail")(
                name.as_ptr(),
                nth,
                status,
            )
        }
    }
    /// Garbage in the upper status half (`high`); releases expect the handle by value (`by_value`).
    pub fn mode(&self, high: bool, by_value: bool) {
        unsafe {
            self.f::<unsafe extern "C" fn(c_int, c_int)>("fake_e5rt_mode")(
                high.into(),
                by_value.into(),
            )
        }
    }
    /// Every call since the last reset, one per line.
    pub fn log(&self) -> Vec<String> {
        let p = unsafe { self.f::<unsafe extern "C" fn() -> *const c_char>("fake_e5rt_log")() };
        unsafe { CStr::from_ptr(p) }
            .to_string_lossy()
            .lines()
            .map(String::from)
            .collect()
    }
    /// Objects created and not released.
    pub fn live(&self) -> i32 {
        unsafe { self.f::<unsafe extern "C" fn() -> c_int>("fake_e5rt_live")() }
    }
    /// Wrong releases: unknown handle, wrong kind or convention, or a second release.
    pub fn bad_releases(&self) -> i32 {
        unsafe { self.f::<unsafe extern "C" fn() -> c_int>("fake_e5rt_bad_releases")() }
    }
}

static LOCK: Mutex<()> = Mutex::new(());

/// The default fake, reset, with the lock that serialises the tests using it (they share its
/// state and the environment); `None` (test skipped) when gcc is missing.
pub fn fake() -> Option<(MutexGuard<'static, ()>, &'static Fake)> {
    static FAKE: OnceLock<Option<Fake>> = OnceLock::new();
    let guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let mut built_now = false;
    let built = FAKE.get_or_init(|| {
        built_now = true;
        let path = build("fake_e5rt", &[])?;
        std::env::set_var("ANEFORGE_E5RT_LIBRARY", &path);
        // SAFETY: the fake's initialisers do nothing.
        let lib = unsafe { libloading::Library::new(&path) }.unwrap();
        Some(Fake { lib, path })
    });
    let Some(fake) = built.as_ref() else {
        // `build` reported the first skip; every later test reports its own.
        if !built_now {
            skip_without_gcc();
        }
        return None;
    };
    fake.reset();
    Some((guard, fake))
}

/// A fresh scratch directory.
pub fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("ane-fake")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
