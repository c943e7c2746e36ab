module cdsim.local/tests/nvml/go

go 1.22

require github.com/NVIDIA/go-nvml v0.13.0-1
