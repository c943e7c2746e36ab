//! Mock libnvidia-ml.so.1: the NVML C ABI over a YAML GPU profile and the cluster topology.
