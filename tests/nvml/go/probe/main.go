// Command probe is the go-nvml process `cargo xtask bench-vs-upstream` times against both mock
// libraries: init, then per GPU handle, fabric info, UUID and memory, then shutdown. It exits 1
// on any NVML error, so a timing never hides a failure.
package main

import (
	"fmt"
	"os"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func check(what string, ret nvml.Return) {
	if ret != nvml.SUCCESS {
		fmt.Fprintf(os.Stderr, "%s: %v (%d)\n", what, ret, int(ret))
		os.Exit(1)
	}
}

func main() {
	check("nvml.Init", nvml.Init())
	count, ret := nvml.DeviceGetCount()
	check("nvml.DeviceGetCount", ret)
	for i := 0; i < count; i++ {
		device, ret := nvml.DeviceGetHandleByIndex(i)
		check("nvml.DeviceGetHandleByIndex", ret)
		_, ret = device.GetGpuFabricInfo()
		check("GetGpuFabricInfo", ret)
		_, ret = device.GetUUID()
		check("GetUUID", ret)
		_, ret = device.GetMemoryInfo()
		check("GetMemoryInfo", ret)
	}
	check("nvml.Shutdown", nvml.Shutdown())
}
