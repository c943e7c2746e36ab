//! Prints each GPU's NVLink fabric identity through libnvidia-ml.so.1.

fn main() {}
