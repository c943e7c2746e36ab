// Command nvml-events drives NVML's event API through NVIDIA's go-nvml the way NVIDIA's device
// plugin does on its normal path: an event set, the supported types of every GPU, registration
// for Xid critical errors and single- and double-bit ECC errors (the device plugin's mask) and
// MIG config changes, each masked by the supported types, then waits (nvmlEventSetWait_v2) with
// the timeouts given as arguments, in milliseconds.
//
// It prints one JSON object per line, as it goes, so that tests/nvml_events.rs can act while a
// wait blocks: "ready" (GPU 1's uuid, every GPU's supported types), then "waiting" and "waited"
// (the return code, the time the wait took, and the event) for each wait, then "done" with the
// process's CPU time (a wait that spun would show).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func emit(fields map[string]any) {
	line, err := json.Marshal(fields)
	if err != nil {
		fail("json: %v", err)
	}
	os.Stdout.Write(append(line, '\n'))
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func check(what string, ret nvml.Return) {
	if ret != nvml.SUCCESS {
		fail("%s: %v (%d)", what, ret, int(ret))
	}
}

func main() {
	check("nvml.Init", nvml.Init())
	defer nvml.Shutdown()

	count, ret := nvml.DeviceGetCount()
	check("DeviceGetCount", ret)
	set, ret := nvml.EventSetCreate()
	check("EventSetCreate", ret)
	supported := []uint64{}
	devices := []nvml.Device{}
	for i := 0; i < count; i++ {
		device, ret := nvml.DeviceGetHandleByIndex(i)
		check("DeviceGetHandleByIndex", ret)
		types, ret := device.GetSupportedEventTypes()
		check("GetSupportedEventTypes", ret)
		supported = append(supported, types)
		mask := uint64(nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError |
			nvml.EventTypeSingleBitEccError | nvml.EventMigConfigChange)
		check("RegisterEvents", device.RegisterEvents(types&mask, set))
		devices = append(devices, device)
	}
	gpu1, ret := devices[1].GetUUID()
	check("GetUUID", ret)
	emit(map[string]any{"step": "ready", "gpu1_uuid": gpu1, "supported": supported})

	for i, arg := range os.Args[1:] {
		timeout, err := strconv.ParseUint(arg, 10, 32)
		if err != nil {
			fail("timeout %q: %v", arg, err)
		}
		emit(map[string]any{"step": "waiting", "wait": i})
		start := time.Now()
		data, ret := set.Wait(uint32(timeout))
		took := time.Since(start)
		result := map[string]any{
			"step": "waited", "wait": i, "ret": int(ret),
			"ms": float64(took.Microseconds()) / 1000,
		}
		if ret == nvml.SUCCESS {
			uuid, uret := data.Device.GetUUID()
			check("event device GetUUID", uret)
			result["uuid"] = uuid
			result["same_handle_as_gpu1"] = data.Device == devices[1]
			index, iret := data.Device.GetIndex()
			check("event device GetIndex", iret)
			result["index"] = index
			result["event_type"] = data.EventType
			result["event_data"] = data.EventData
			result["gpu_instance_id"] = data.GpuInstanceId
			result["compute_instance_id"] = data.ComputeInstanceId
		}
		emit(result)
	}
	check("EventSetFree", set.Free())
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		fail("getrusage: %v", err)
	}
	cpu := time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
	emit(map[string]any{"step": "done", "cpu_ms": float64(cpu.Microseconds()) / 1000})
}
