module cdsim.local/tests/nvml/allocator

go 1.22

require github.com/NVIDIA/go-gpuallocator v0.6.0

require (
	github.com/NVIDIA/go-nvlib v0.10.0 // indirect
	github.com/NVIDIA/go-nvml v0.13.0-1.0.20260212130905-92cf8c963449 // indirect
	github.com/google/uuid v1.6.0 // indirect
)
