//! containerd NRI plugin that injects the staged mock NVML tree into containers.

fn main() {}
