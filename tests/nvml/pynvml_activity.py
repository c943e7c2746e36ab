"""pynvml over the issue-22 "misc" exports of the mock: prints one JSON report.

GPU 3 of the profile in MOCK_NVML_CONFIG: NUMA node and affinity, P2P with GPU 0, processes and
their utilization and names, codecs, PCIe counters, NVLink counters, field values, GPM, C2C, the
MIG parent lookup. A call that raises is reported as {"error": <NVML return code>}.
"""

import json

import pynvml as n


def call(function, *args):
    try:
        return function(*args)
    except n.NVMLError as error:
        return {"error": error.value}


def main():
    n.nvmlInit()
    gpu0 = n.nvmlDeviceGetHandleByIndex(0)
    h = n.nvmlDeviceGetHandleByIndex(3)
    procs = lambda f: [[p.pid, p.usedGpuMemory] for p in f(h)]
    samples = call(n.nvmlDeviceGetProcessUtilization, h, 0)
    if isinstance(samples, list):
        samples = [[s.pid, s.smUtil, s.memUtil, s.encUtil, s.decUtil] for s in samples]
    fields = n.nvmlDeviceGetFieldValues(h, [[165, 2], 91, 94, 186, 83])
    a, b = n.nvmlGpmSampleAlloc(), n.nvmlGpmSampleAlloc()
    n.nvmlGpmSampleGet(h, a)
    n.nvmlGpmSampleGet(h, b)
    request = n.c_nvmlGpmMetricsGet_t()
    request.version = n.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = 3
    request.sample1, request.sample2 = a, b
    for i, metric in enumerate([n.NVML_GPM_METRIC_SM_UTIL, n.NVML_GPM_METRIC_DRAM_BW_UTIL, n.NVML_GPM_METRIC_FP16_UTIL]):
        request.metrics[i].metricId = metric
    n.nvmlGpmMetricsGet(request)
    n.nvmlGpmSampleFree(a)
    n.nvmlGpmSampleFree(b)
    report = {
        "numa_node": n.nvmlDeviceGetNumaNodeId(h),
        "cpu_affinity": list(n.nvmlDeviceGetCpuAffinity(h, 3)),
        "memory_affinity": list(n.nvmlDeviceGetMemoryAffinity(h, 1, n.NVML_AFFINITY_SCOPE_NODE)),
        "p2p_nvlink": n.nvmlDeviceGetP2PStatus(gpu0, h, n.NVML_P2P_CAPS_INDEX_NVLINK),
        "compute": procs(n.nvmlDeviceGetComputeRunningProcesses),
        "graphics": procs(n.nvmlDeviceGetGraphicsRunningProcesses),
        "samples": samples,
        "names": [call(n.nvmlSystemGetProcessName, pid) for pid in (4242, 77, 5)],
        "encoder": list(n.nvmlDeviceGetEncoderUtilization(h)),
        "decoder": list(n.nvmlDeviceGetDecoderUtilization(h)),
        "encoder_capacity": n.nvmlDeviceGetEncoderCapacity(h, n.NVML_ENCODER_QUERY_H264),
        "encoder_stats": list(n.nvmlDeviceGetEncoderStats(h)),
        "encoder_sessions": len(n.nvmlDeviceGetEncoderSessions(h)),
        "pcie": [n.nvmlDeviceGetPcieThroughput(h, n.NVML_PCIE_UTIL_TX_BYTES), n.nvmlDeviceGetPcieReplayCounter(h), n.nvmlDeviceGetGpuMaxPcieLinkGeneration(h)],
        "nvlink_traffic": list(n.nvmlDeviceGetNvLinkUtilizationCounter(h, 2, 0)),
        "nvlink_errors": n.nvmlDeviceGetNvLinkErrorCounter(h, 2, n.NVML_NVLINK_ERROR_DL_REPLAY),
        "fields": [[f.fieldId, f.nvmlReturn, f.value.uiVal if f.nvmlReturn == 0 else None] for f in fields],
        "gpm_supported": n.nvmlGpmQueryDeviceSupport(h).isSupportedDevice,
        "gpm": [[request.metrics[i].nvmlReturn, request.metrics[i].value] for i in range(3)],
        "c2c": call(lambda: n.nvmlDeviceGetC2cModeInfoV(h).isC2cEnabled),
        "mig_parent": call(n.nvmlDeviceGetDeviceHandleFromMigDeviceHandle, h),
    }
    n.nvmlShutdown()
    print(json.dumps(report))


main()
