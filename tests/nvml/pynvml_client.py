"""Drive the NVML library through NVIDIA's pynvml (nvidia-ml-py) and print what it reports as
one JSON document (the shape tests/nvml_clients.rs compares against the profile).

pynvml loads "libnvidia-ml.so.1" through the normal loader search (LD_LIBRARY_PATH)."""

import ctypes
import json
import sys

import pynvml as n


def ret_of(call):
    """Run an NVML call; return (NVML return code, result)."""
    try:
        return 0, call()
    except n.NVMLError as err:
        return err.value, None


def value_or_code(call):
    """The call's result, or minus its NVML return code (as the Go client reports)."""
    ret, value = ret_of(call)
    return value if ret == 0 else -ret


def uuid_text(raw):
    hexed = bytes(raw).hex()
    return "-".join([hexed[0:8], hexed[8:12], hexed[12:16], hexed[16:20], hexed[20:32]])


def fabric(handle, struct, versioned):
    info = struct()
    call = n.nvmlDeviceGetGpuFabricInfoV if versioned else n.nvmlDeviceGetGpuFabricInfo
    code, _ = ret_of(lambda: call(handle, ctypes.byref(info)))
    if code != 0:
        return {"ret": code}
    out = {
        "ret": 0,
        "cluster_uuid": uuid_text(info.clusterUuid),
        "clique_id": info.cliqueId,
        "state": info.state,
        "status": info.status,
    }
    if hasattr(info, "healthMask"):
        out["health_mask"] = info.healthMask
    if hasattr(info, "healthSummary"):
        out["health_summary"] = info.healthSummary
    return out


def bad_version(handle):
    info = n.c_nvmlGpuFabricInfo_v3_t()
    info.version = 0x01000028  # v1 with the v3 size: no such struct version
    before = bytes(info)
    code, _ = ret_of(lambda: n.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info)))
    return {"ret": code, "untouched": bytes(info) == before}


def text(value):
    return value.decode() if isinstance(value, bytes) else value


def main():
    n.nvmlInit()
    try:
        count = n.nvmlDeviceGetCount()
        doc = {
            "client": "pynvml",
            "driver_version": text(n.nvmlSystemGetDriverVersion()),
            "nvml_version": text(n.nvmlSystemGetNVMLVersion()),
            "cuda_driver_version": n.nvmlSystemGetCudaDriverVersion(),
            "count": count,
            "devices": [],
        }
        for index in range(count):
            h = n.nvmlDeviceGetHandleByIndex(index)
            uuid = text(n.nvmlDeviceGetUUID(h))
            pci = n.nvmlDeviceGetPciInfo(h)
            mem = n.nvmlDeviceGetMemoryInfo(h)
            mem2 = n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)
            major, minor = n.nvmlDeviceGetCudaComputeCapability(h)
            doc["devices"].append({
                "index": n.nvmlDeviceGetIndex(h),
                "uuid": uuid,
                "name": text(n.nvmlDeviceGetName(h)),
                "serial": text(n.nvmlDeviceGetSerial(h)),
                "minor_number": n.nvmlDeviceGetMinorNumber(h),
                "board_id": n.nvmlDeviceGetBoardId(h),
                "module_id": n.nvmlDeviceGetModuleId(h),
                "architecture": n.nvmlDeviceGetArchitecture(h),
                "brand": n.nvmlDeviceGetBrand(h),
                "compute_capability": [major, minor],
                "by_uuid_index": n.nvmlDeviceGetIndex(n.nvmlDeviceGetHandleByUUID(uuid)),
                "by_pci_index": n.nvmlDeviceGetIndex(n.nvmlDeviceGetHandleByPciBusId(text(pci.busId))),
                "pci": {
                    "bus_id": text(pci.busId),
                    "bus_id_legacy": text(pci.busIdLegacy),
                    "domain": pci.domain,
                    "bus": pci.bus,
                    "device": pci.device,
                    "pci_device_id": pci.pciDeviceId,
                    "pci_subsystem_id": pci.pciSubSystemId,
                },
                "memory": {"total": mem.total, "free": mem.free, "used": mem.used},
                "memory_v2": {"total": mem2.total, "reserved": mem2.reserved, "free": mem2.free, "used": mem2.used},
                "fabric_v1": fabric(h, n.c_nvmlGpuFabricInfo_t, False),
                "fabric_v2": fabric(h, n.c_nvmlGpuFabricInfo_v2_t, True),
                "fabric_v3": fabric(h, n.c_nvmlGpuFabricInfo_v3_t, True),
                "fabric_bad_version": bad_version(h),
                "temperature_c": n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
                "power_usage_mw": n.nvmlDeviceGetPowerUsage(h),
                "max_sm_clock": n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM),
                "nvlink0_active": value_or_code(lambda: n.nvmlDeviceGetNvLinkState(h, 0)),
                "pcie": [n.nvmlDeviceGetCurrPcieLinkGeneration(h), n.nvmlDeviceGetCurrPcieLinkWidth(h)],
            })
        json.dump(doc, sys.stdout, indent=1)
        print()
    finally:
        n.nvmlShutdown()


if __name__ == "__main__":
    main()
