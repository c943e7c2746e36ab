//! GPU profiles for the mock NVML library: schema, parsing and validation.
