module cdsim.local/tests/nvlib

go 1.22

require (
	github.com/NVIDIA/go-nvlib v0.10.0
	github.com/NVIDIA/go-nvml v0.13.0-1
)

require github.com/google/uuid v1.6.0 // indirect
