//! Gives the cdylib the real library's SONAME, so that it installs as `libnvidia-ml.so.1`, and
//! links GCC's unwinder into it statically, so that `dlopen` loads no `libgcc_s.so.1`
//! (`crates/build-support/static_unwinder.rs`).

include!("../build-support/static_unwinder.rs");

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnvidia-ml.so.1");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../build-support/static_unwinder.rs");
    static_unwinder();
}
