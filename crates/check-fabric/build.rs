//! Links GCC's unwinder into check-fabric statically, so that its start-up loads no
//! `libgcc_s.so.1` (`crates/build-support/static_unwinder.rs`).

include!("../build-support/static_unwinder.rs");

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../build-support/static_unwinder.rs");
    static_unwinder();
}
