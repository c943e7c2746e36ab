// Command nvlib-client enumerates GPUs through NVIDIA's go-nvlib (pkg/nvlib/device), the
// device library under NVIDIA's device plugin and DRA driver, and prints one JSON document.
// Built at two go-nvlib versions: go.mod (v0.13.0) and go.v010.mod (v0.10.0, the one the DRA
// driver vendors) via -modfile. Exit 1 with the error on stderr when any call fails.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

type gpu struct {
	Index          int      `json:"index"`
	UUID           string   `json:"uuid"`
	Name           string   `json:"name"`
	PCIBusID       string   `json:"pciBusId"`
	MigCapable     bool     `json:"migCapable"`
	MigEnabled     bool     `json:"migEnabled"`
	MigDevices     int      `json:"migDevices"`
	MigProfiles    int      `json:"migProfiles"`
	MigNames       []string `json:"migProfileNames"`
	FabricAttached bool     `json:"fabricAttached"`
	AddressingMode string   `json:"addressingMode"`
	Coherent       bool     `json:"coherent"`
	Architecture   string   `json:"architecture"`
	Brand          string   `json:"brand"`
	CudaCC         string   `json:"cudaComputeCapability"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// calls runs a device's getters in order until the first one fails, and keeps that error.
type calls struct{ err error }

// set stores what call returns in *dst, unless an earlier call failed.
func set[T any](c *calls, dst *T, call func() (T, error)) {
	if c.err == nil {
		*dst, c.err = call()
	}
}

// setLen stores how many items call returns in *dst, unless an earlier call failed.
func setLen[T any](c *calls, dst *int, call func() ([]T, error)) {
	if c.err == nil {
		var items []T
		items, c.err = call()
		*dst = len(items)
	}
}

// migNames lists the MIG profiles go-nvlib derives from the GPU instance profile table, by name
// ("1g.10gb", "1c.2g.20gb", ...), in go-nvlib's order.
func migNames(d device.Device) ([]string, error) {
	profiles, err := d.GetMigProfiles()
	if err != nil {
		return nil, err
	}
	names := []string{}
	for _, p := range profiles {
		names = append(names, p.String())
	}
	return names, nil
}

func main() {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		fail("nvml.Init: %v", ret)
	}
	defer lib.Shutdown()
	devlib := device.New(lib)
	var gpus []gpu
	err := devlib.VisitDevices(func(i int, d device.Device) error {
		g := gpu{Index: i}
		var ret nvml.Return
		if g.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
			return fmt.Errorf("GetUUID: %v", ret)
		}
		if g.Name, ret = d.GetName(); ret != nvml.SUCCESS {
			return fmt.Errorf("GetName: %v", ret)
		}
		var c calls
		set(&c, &g.PCIBusID, d.GetPCIBusID)
		set(&c, &g.MigCapable, d.IsMigCapable)
		set(&c, &g.MigEnabled, d.IsMigEnabled)
		setLen(&c, &g.MigDevices, d.GetMigDevices)
		set(&c, &g.MigNames, func() ([]string, error) { return migNames(d) })
		g.MigProfiles = len(g.MigNames)
		set(&c, &g.FabricAttached, d.IsFabricAttached)
		set(&c, &g.AddressingMode, d.GetAddressingModeAsString)
		set(&c, &g.Coherent, d.IsCoherent)
		set(&c, &g.Architecture, d.GetArchitectureAsString)
		set(&c, &g.Brand, d.GetBrandAsString)
		set(&c, &g.CudaCC, d.GetCudaComputeCapabilityAsString)
		if c.err != nil {
			return c.err
		}
		gpus = append(gpus, g)
		return nil
	})
	if err != nil {
		fail("VisitDevices: %v", err)
	}
	out, _ := json.Marshal(map[string]any{"gpus": gpus})
	fmt.Println(string(out))
}
