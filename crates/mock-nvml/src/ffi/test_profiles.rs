//! Test-only profile edits shared by the activity tests (`activity_tests.rs` beside this file
//! and `crate::activity`'s).

/// Two processes: pid 41 computing (1 GiB, SM 90 %), pid 42 drawing (4 KiB, decoder 5 %).
pub(crate) const TWO_PROCESSES: &str = "
- {pid: 41, name: trainer, kind: compute, used_memory: 1073741824, sm_util: 90}
- {pid: 42, name: Xorg, kind: graphics, used_memory: 4096, decoder_util: 5}
";

/// `text` with `processes` (a YAML list) on device `position`, whatever the style of its entry.
pub(crate) fn with_processes(text: &str, position: usize, processes: &str) -> String {
    let mut doc: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
    doc["devices"][position]["processes"] = serde_yaml::from_str(processes).unwrap();
    serde_yaml::to_string(&doc).unwrap()
}
