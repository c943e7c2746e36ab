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
	Index          int    `json:"index"`
	UUID           string `json:"uuid"`
	Name           string `json:"name"`
	PCIBusID       string `json:"pciBusId"`
	MigCapable     bool   `json:"migCapable"`
	MigEnabled     bool   `json:"migEnabled"`
	MigDevices     int    `json:"migDevices"`
	MigProfiles    int    `json:"migProfiles"`
	FabricAttached bool   `json:"fabricAttached"`
	AddressingMode string `json:"addressingMode"`
	Coherent       bool   `json:"coherent"`
	Architecture   string `json:"architecture"`
	Brand          string `json:"brand"`
	CudaCC         string `json:"cudaComputeCapability"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
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
		var err error
		if g.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
			return fmt.Errorf("GetUUID: %v", ret)
		}
		if g.Name, ret = d.GetName(); ret != nvml.SUCCESS {
			return fmt.Errorf("GetName: %v", ret)
		}
		if g.PCIBusID, err = d.GetPCIBusID(); err != nil {
			return err
		}
		if g.MigCapable, err = d.IsMigCapable(); err != nil {
			return err
		}
		if g.MigEnabled, err = d.IsMigEnabled(); err != nil {
			return err
		}
		migs, err := d.GetMigDevices()
		if err != nil {
			return err
		}
		g.MigDevices = len(migs)
		profiles, err := d.GetMigProfiles()
		if err != nil {
			return err
		}
		g.MigProfiles = len(profiles)
		if g.FabricAttached, err = d.IsFabricAttached(); err != nil {
			return err
		}
		if g.AddressingMode, err = d.GetAddressingModeAsString(); err != nil {
			return err
		}
		if g.Coherent, err = d.IsCoherent(); err != nil {
			return err
		}
		if g.Architecture, err = d.GetArchitectureAsString(); err != nil {
			return err
		}
		if g.Brand, err = d.GetBrandAsString(); err != nil {
			return err
		}
		if g.CudaCC, err = d.GetCudaComputeCapabilityAsString(); err != nil {
			return err
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
