//! Stages the mock driver tree on a node and keeps the topology live.

fn main() {}
