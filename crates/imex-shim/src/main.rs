//! nvidia-imex front that execs the real daemon with --nogpu.

fn main() {}
