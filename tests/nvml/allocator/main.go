// Command nvml-allocator runs NVIDIA's go-gpuallocator, at the versions the device plugin
// v0.19.3 pins, against the NVML library on the loader path, as the plugin's preferred
// allocation does (gpuallocator.NewDevices, then the best-effort policy), and prints the link
// matrix it built and what it allocated as one JSON document for tests/nvml_clients.rs.
// NewDevices fails on any topology or NVLink query error the plugin would fail on.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/NVIDIA/go-gpuallocator/gpuallocator"
)

func main() {
	devices, err := gpuallocator.NewDevices()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gpuallocator.NewDevices: %v\n", err)
		os.Exit(1)
	}
	// links[i][j]: the link types the allocator recorded from GPU i to GPU j.
	links := make([][][]string, len(devices))
	for i, d := range devices {
		links[i] = make([][]string, len(devices))
		for j := range devices {
			links[i][j] = []string{}
			for _, link := range d.Links[j] {
				links[i][j] = append(links[i][j], link.Type.String())
			}
		}
	}
	allocated := map[string][]int{}
	for _, size := range []int{1, 2, len(devices)} {
		picked := []int{}
		for _, d := range gpuallocator.NewBestEffortPolicy().Allocate(devices, nil, size) {
			picked = append(picked, d.Index)
		}
		allocated[fmt.Sprint(size)] = picked
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", " ")
	if err := out.Encode(map[string]any{"count": len(devices), "links": links, "allocated": allocated}); err != nil {
		fmt.Fprintf(os.Stderr, "encode: %v\n", err)
		os.Exit(1)
	}
}
