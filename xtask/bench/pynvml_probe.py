"""The pynvml process `cargo xtask bench-vs-upstream` times against both mock libraries: init,
then per GPU handle, fabric info, UUID and memory, then shutdown. Any NVML error raises, so the
process fails and a timing never hides a failure."""

import ctypes

import pynvml as n

n.nvmlInit()
for index in range(n.nvmlDeviceGetCount()):
    handle = n.nvmlDeviceGetHandleByIndex(index)
    info = n.c_nvmlGpuFabricInfo_t()
    n.nvmlDeviceGetGpuFabricInfo(handle, ctypes.byref(info))
    n.nvmlDeviceGetUUID(handle)
    n.nvmlDeviceGetMemoryInfo(handle)
n.nvmlShutdown()
