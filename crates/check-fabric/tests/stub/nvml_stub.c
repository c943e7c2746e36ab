/* A minimal NVML for check-fabric's entry-point selection tests: one GPU whose
 * fabric answer tells which entry point answered (clique 1 = v1, 2 = V with
 * the v2 tag, 3 = V with the v3 tag).
 * Build-time switches: -DWITH_V (export nvmlDeviceGetGpuFabricInfoV),
 * -DACCEPT_V3 / -DACCEPT_V2 (tags it accepts), -DWITHOUT_V1. */
#include <string.h>

typedef struct { unsigned char uuid[16]; int status; unsigned clique; unsigned char state; } v1_t;
typedef struct { unsigned version; unsigned char uuid[16]; int status; unsigned clique; unsigned char state; unsigned mask; unsigned char summary; } v3_t;

static int device = 0x1234;
static int initialised = 0;

int nvmlInit_v2(void) { initialised++; return 0; }
int nvmlShutdown(void) { if (!initialised) return 1; initialised--; return 0; }
const char *nvmlErrorString(int code) { return code == 25 ? "Argument version mismatch" : "Stub error"; }
int nvmlSystemGetDriverVersion(char *out, unsigned len) { if (len < 6) return 7; strcpy(out, "1.2.3"); return 0; }
int nvmlDeviceGetCount_v2(unsigned *count) { if (!initialised) return 1; *count = 1; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned idx, void **out) { if (idx != 0 || !out) return 2; *out = &device; return 0; }
int nvmlDeviceGetUUID(void *dev, char *out, unsigned len) { if (dev != &device || len < 10) return 2; strcpy(out, "GPU-stub"); return 0; }

#ifndef WITHOUT_V1
int nvmlDeviceGetGpuFabricInfo(void *dev, v1_t *info) {
    if (dev != &device || !info) return 2;
    memset(info->uuid, 0x11, 16); info->status = 0; info->clique = 1; info->state = 3;
    return 0;
}
#endif

#ifdef WITH_V
int nvmlDeviceGetGpuFabricInfoV(void *dev, v3_t *info) {
    if (dev != &device || !info) return 2;
#ifdef ACCEPT_V3
    if (info->version == 0x03000028u) { memset(info->uuid, 0x33, 16); info->clique = 3; info->state = 3; info->summary = 1; return 0; }
#endif
#ifdef ACCEPT_V2
    if (info->version == 0x02000024u) { memset(info->uuid, 0x22, 16); info->clique = 2; info->state = 2; return 0; }
#endif
    return 25;
}
#endif
