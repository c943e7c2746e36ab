// Command nvml-client drives the NVML library through NVIDIA's go-nvml (the binding the DRA
// driver uses) and prints what it reports as one JSON document, the shape
// tests/nvml_clients.rs compares against the profile.
//
// go-nvml dlopens "libnvidia-ml.so.1" (RTLD_LAZY|RTLD_GLOBAL) through the loader search; init
// goes through nvmlInitWithFlags(NO_GPUS) like the DRA plugin (pynvml's client covers
// nvmlInitWithFlags(0), nvml-wrapper's nvmlInit_v2).
// The bad-version case calls nvmlDeviceGetGpuFabricInfoV through dlsym, because go-nvml's
// public helpers always set a valid version tag.
package main

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned int (*fabric_v_fn)(void *, void *);
typedef unsigned int (*by_index_fn)(unsigned int, void **);

// Calls nvmlDeviceGetGpuFabricInfoV on GPU `index` with a version tag no NVML struct has;
// reports the return code and whether the 40-byte buffer was left untouched.
static unsigned int bad_version(unsigned int index, unsigned int version, int *untouched) {
	fabric_v_fn fn = (fabric_v_fn)dlsym(RTLD_DEFAULT, "nvmlDeviceGetGpuFabricInfoV");
	by_index_fn by_index = (by_index_fn)dlsym(RTLD_DEFAULT, "nvmlDeviceGetHandleByIndex_v2");
	if (fn == NULL || by_index == NULL) return 13;
	void *device = NULL;
	unsigned int got = by_index(index, &device);
	if (got != 0) return got;
	unsigned char buffer[40], before[40];
	memset(buffer, 0x5a, sizeof buffer);
	memcpy(buffer, &version, sizeof version);
	memcpy(before, buffer, sizeof buffer);
	unsigned int ret = fn(device, buffer);
	*untouched = memcmp(buffer, before, sizeof buffer) == 0;
	return ret;
}
*/
import "C"

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

type fabric struct {
	Ret           int     `json:"ret"`
	ClusterUUID   *string `json:"cluster_uuid,omitempty"`
	CliqueID      *uint32 `json:"clique_id,omitempty"`
	State         *uint8  `json:"state,omitempty"`
	Status        *uint32 `json:"status,omitempty"`
	HealthMask    *uint32 `json:"health_mask,omitempty"`
	HealthSummary *uint8  `json:"health_summary,omitempty"`
}

func uuidText(raw [16]uint8) string {
	h := hex.EncodeToString(raw[:])
	return strings.Join([]string{h[0:8], h[8:12], h[12:16], h[16:20], h[20:32]}, "-")
}

func cString(raw []uint8) string {
	s := string(raw)
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

func must[T any](value T, ret nvml.Return) T {
	if ret != nvml.SUCCESS {
		fmt.Fprintf(os.Stderr, "nvml call failed: %v (%d)\n", ret, int(ret))
		os.Exit(1)
	}
	return value
}

func fabricOf(ret nvml.Return, uuid [16]uint8, clique uint32, state uint8, status uint32) fabric {
	if ret != nvml.SUCCESS {
		return fabric{Ret: int(ret)}
	}
	text := uuidText(uuid)
	return fabric{Ret: 0, ClusterUUID: &text, CliqueID: &clique, State: &state, Status: &status}
}

// codeOr is the value on SUCCESS, else minus the return code.
func codeOr(value int, ret nvml.Return) int {
	if ret != nvml.SUCCESS {
		return -int(ret)
	}
	return value
}

// indexesOr is the devices' indexes on SUCCESS, else minus the return code.
func indexesOr(devices []nvml.Device, ret nvml.Return) any {
	if ret != nvml.SUCCESS {
		return -int(ret)
	}
	indexes := []int{}
	for _, d := range devices {
		indexes = append(indexes, must(d.GetIndex()))
	}
	return indexes
}

// topologyOf is what NVIDIA's go-gpuallocator (the device plugin's preferred allocation) reads:
// the common ancestor with every GPU, and the remote PCI bus id of every active NVLink, walked
// as its getAllNvLinkRemotePciInfo walks them (NOT_SUPPORTED and INVALID_ARGUMENT skip a link).
func topologyOf(d nvml.Device, count int) map[string]any {
	levels := []int{}
	for j := 0; j < count; j++ {
		level, ret := d.GetTopologyCommonAncestor(must(nvml.DeviceGetHandleByIndex(j)))
		levels = append(levels, codeOr(int(level), ret))
	}
	remotes := []any{}
	for link := 0; link < nvml.NVLINK_MAX_LINKS; link++ {
		state, ret := d.GetNvLinkState(link)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT || (ret == nvml.SUCCESS && state != nvml.FEATURE_ENABLED) {
			continue
		}
		pci, ret := d.GetNvLinkRemotePciInfo(link)
		if ret != nvml.SUCCESS {
			remotes = append(remotes, -int(ret))
			continue
		}
		remotes = append(remotes, cString(pci.BusId[:]))
	}
	remoteType, ret := d.GetNvLinkRemoteDeviceType(0)
	version, retVersion := d.GetNvLinkVersion(0)
	return map[string]any{
		"levels":         levels,
		"nearest_system": indexesOr(d.GetTopologyNearestGpus(nvml.TOPOLOGY_SYSTEM)),
		"nvlink_remotes": remotes,
		"remote_type0":   codeOr(int(remoteType), ret),
		"version0":       codeOr(int(version), retVersion),
	}
}

// nvlinkState0 is link 0's state, or minus the return code (NOT_SUPPORTED on a GPU without NVLink).
func nvlinkState0(d nvml.Device) int {
	state, ret := d.GetNvLinkState(0)
	return codeOr(int(state), ret)
}

func main() {
	// As the DRA compute-domain kubelet plugin does: nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS).
	if ret := nvml.InitWithFlags(nvml.INIT_FLAG_NO_GPUS); ret != nvml.SUCCESS {
		fmt.Fprintf(os.Stderr, "nvml.InitWithFlags: %v (%d)\n", ret, int(ret))
		os.Exit(1)
	}
	defer nvml.Shutdown()

	count := must(nvml.DeviceGetCount())
	cudaVersion := must(nvml.SystemGetCudaDriverVersion())
	doc := map[string]any{
		"client":              "go-nvml",
		"driver_version":      must(nvml.SystemGetDriverVersion()),
		"nvml_version":        must(nvml.SystemGetNVMLVersion()),
		"cuda_driver_version": cudaVersion,
		"count":               count,
	}
	devices := []map[string]any{}
	for i := 0; i < count; i++ {
		d := must(nvml.DeviceGetHandleByIndex(i))
		uuid := must(d.GetUUID())
		pci := must(d.GetPciInfo())
		mem := must(d.GetMemoryInfo())
		mem2 := must(d.GetMemoryInfo_v2())
		major, minor, ret := d.GetCudaComputeCapability()
		must(0, ret)
		byUUID := must(nvml.DeviceGetHandleByUUID(uuid))
		byPci := must(nvml.DeviceGetHandleByPciBusId(cString(pci.BusId[:])))

		v1, ret1 := d.GetGpuFabricInfo()
		f1 := fabricOf(ret1, v1.ClusterUuid, v1.CliqueId, v1.State, v1.Status)
		v2, ret2 := d.GetGpuFabricInfoV().V2()
		f2 := fabricOf(ret2, v2.ClusterUuid, v2.CliqueId, v2.State, v2.Status)
		if ret2 == nvml.SUCCESS {
			f2.HealthMask = &v2.HealthMask
		}
		v3, ret3 := d.GetGpuFabricInfoV().V3()
		f3 := fabricOf(ret3, v3.ClusterUuid, v3.CliqueId, v3.State, v3.Status)
		if ret3 == nvml.SUCCESS {
			f3.HealthMask = &v3.HealthMask
			f3.HealthSummary = &v3.HealthSummary
		}
		var untouched C.int
		badRet := C.bad_version(C.uint(i), C.uint(0x01000028), &untouched)

		devices = append(devices, map[string]any{
			"index":              must(d.GetIndex()),
			"uuid":               uuid,
			"name":               must(d.GetName()),
			"serial":             must(d.GetSerial()),
			"minor_number":       must(d.GetMinorNumber()),
			"board_id":           must(d.GetBoardId()),
			"module_id":          must(d.GetModuleId()),
			"architecture":       must(d.GetArchitecture()),
			"brand":              must(d.GetBrand()),
			"compute_capability": []int{major, minor},
			"by_uuid_index":      must(byUUID.GetIndex()),
			"by_pci_index":       must(byPci.GetIndex()),
			"pci": map[string]any{
				"bus_id":           cString(pci.BusId[:]),
				"bus_id_legacy":    cString(pci.BusIdLegacy[:]),
				"domain":           pci.Domain,
				"bus":              pci.Bus,
				"device":           pci.Device,
				"pci_device_id":    pci.PciDeviceId,
				"pci_subsystem_id": pci.PciSubSystemId,
			},
			"memory":             map[string]any{"total": mem.Total, "free": mem.Free, "used": mem.Used},
			"memory_v2":          map[string]any{"total": mem2.Total, "reserved": mem2.Reserved, "free": mem2.Free, "used": mem2.Used},
			"fabric_v1":          f1,
			"fabric_v2":          f2,
			"fabric_v3":          f3,
			"fabric_bad_version": map[string]any{"ret": int(badRet), "untouched": untouched != 0},
			"temperature_c":      must(d.GetTemperature(nvml.TEMPERATURE_GPU)),
			"power_usage_mw":     must(d.GetPowerUsage()),
			"max_sm_clock":       must(d.GetMaxClockInfo(nvml.CLOCK_SM)),
			"nvlink0_active":     nvlinkState0(d),
			"pcie":               []int{must(d.GetCurrPcieLinkGeneration()), must(d.GetCurrPcieLinkWidth())},
			"topology":           topologyOf(d, count),
		})
	}
	doc["devices"] = devices
	doc["gpu_set_cpu0"] = indexesOr(nvml.SystemGetTopologyGpuSet(0))
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", " ")
	if err := out.Encode(doc); err != nil {
		fmt.Fprintf(os.Stderr, "encode: %v\n", err)
		os.Exit(1)
	}
}
