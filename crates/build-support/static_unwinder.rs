// Shared by the build scripts of mock-nvml and check-fabric (`include!`d): links GCC's unwinder
// into the artifact statically, so that loading it loads no `libgcc_s.so.1`.
//
// The unwinder (`catch_unwind` and panics need it) comes from std's `-lgcc_s`; a `libgcc_s.a`
// that is GCC's `libgcc_eh.a` (position-independent, what `gcc -shared -static-libgcc` links),
// first on the search path, makes the linker take it instead of the shared object. Only for
// linux-gnu; where `cc` does not name a `libgcc_eh.a`, nothing changes.

/// Puts `libgcc_eh.a`, named `libgcc_s.a`, first on the link search path (linux-gnu only).
fn static_unwinder() {
    use std::{env, path::PathBuf, process::Command};

    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux")
        || env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu")
    {
        return;
    }
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let Ok(output) = Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
    else {
        return;
    };
    let archive = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    // `-print-file-name` echoes the bare name when it finds nothing.
    if !output.status.success() || !archive.is_absolute() || !archive.is_file() {
        return;
    }
    let Some(out_dir) = env::var_os("OUT_DIR") else {
        return;
    };
    let dir = PathBuf::from(out_dir).join("static-unwinder");
    let link = dir.join("libgcc_s.a");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::remove_file(&link);
    if std::fs::copy(&archive, &link).is_ok() {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
}
