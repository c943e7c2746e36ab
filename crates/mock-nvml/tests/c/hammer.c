/* A C consumer of the mock libnvidia-ml.so.1, for valgrind: 16 threads hammer queries while
 * init/shutdown race. Each querying thread holds its own init reference while it queries, so
 * every query must succeed and report the expected fabric identity; racer threads only
 * init/shutdown, so the 0 -> 1 load and the 1 -> 0 teardown happen under load.
 *
 * usage: hammer <iterations per thread> <expected gpu count> <expected clique id> <uuid last byte>
 * Prints "calls <n>" and exits 0, or prints the first failure and exits 1.
 * It declares the few NVML types it needs itself (no nvml.h here). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned int ret_t;
typedef void *dev_t_;
typedef struct { unsigned char uuid[16]; ret_t status; unsigned clique; unsigned char state; } fabric_v1_t;
typedef struct { unsigned version; unsigned char uuid[16]; ret_t status; unsigned clique; unsigned char state;
                 unsigned health_mask; unsigned char health_summary; } fabric_v3_t;
typedef struct { char legacy[16]; unsigned domain, bus, device, pci_device_id, subsystem; char bus_id[32]; } pci_t;
typedef struct { unsigned long long total, free, used; } mem_t;

#define THREADS 16
#define RACERS 4

static ret_t (*init_v2)(void), (*shutdown_)(void), (*count_v2)(unsigned *);
static ret_t (*by_index)(unsigned, dev_t_ *), (*get_uuid)(dev_t_, char *, unsigned), (*get_name)(dev_t_, char *, unsigned);
static ret_t (*fabric_v1)(dev_t_, fabric_v1_t *), (*fabric_v)(dev_t_, fabric_v3_t *);
static ret_t (*pci_v3)(dev_t_, pci_t *), (*memory)(dev_t_, mem_t *), (*by_uuid)(const char *, dev_t_ *);
static const char *(*error_string)(ret_t);

static int iterations;
static unsigned want_count, want_clique, want_last;
static atomic_ulong calls;
static atomic_int failed;

#define CHECK(expr, what) do { ret_t r_ = (expr); atomic_fetch_add(&calls, 1); \
    if (r_ != 0) { fprintf(stderr, "%s returned %u (%s)\n", what, r_, error_string(r_)); atomic_store(&failed, 1); return NULL; } } while (0)
#define EXPECT(cond, what) do { if (!(cond)) { fprintf(stderr, "unexpected: %s\n", what); atomic_store(&failed, 1); return NULL; } } while (0)

static void *query(void *arg) {
    (void)arg;
    for (int i = 0; i < iterations && !atomic_load(&failed); i++) {
        CHECK(init_v2(), "nvmlInit_v2");
        unsigned count = 0;
        CHECK(count_v2(&count), "nvmlDeviceGetCount_v2");
        EXPECT(count == want_count, "device count");
        for (unsigned d = 0; d < count; d++) {
            dev_t_ dev = NULL, again = NULL;
            char uuid[96], name[96];
            fabric_v1_t v1;
            fabric_v3_t v3;
            pci_t pci;
            mem_t mem;
            CHECK(by_index(d, &dev), "nvmlDeviceGetHandleByIndex_v2");
            EXPECT((unsigned long)dev >= 4096, "handle >= 4096");
            CHECK(get_uuid(dev, uuid, sizeof uuid), "nvmlDeviceGetUUID");
            CHECK(by_uuid(uuid, &again), "nvmlDeviceGetHandleByUUID");
            EXPECT(again == dev, "uuid lookup gives the same handle");
            CHECK(get_name(dev, name, sizeof name), "nvmlDeviceGetName");
            memset(&v1, 0xff, sizeof v1);
            CHECK(fabric_v1(dev, &v1), "nvmlDeviceGetGpuFabricInfo");
            EXPECT(v1.clique == want_clique && v1.uuid[15] == want_last && v1.state == 3, "v1 fabric identity");
            memset(&v3, 0, sizeof v3);
            v3.version = 0x03000028;
            CHECK(fabric_v(dev, &v3), "nvmlDeviceGetGpuFabricInfoV");
            EXPECT(v3.clique == want_clique && v3.uuid[15] == want_last && v3.state == 3, "v3 fabric identity");
            CHECK(pci_v3(dev, &pci), "nvmlDeviceGetPciInfo_v3");
            EXPECT(strlen(pci.bus_id) == 16, "bus id form");
            CHECK(memory(dev, &mem), "nvmlDeviceGetMemoryInfo");
            EXPECT(mem.total == mem.free + mem.used, "memory adds up");
        }
        CHECK(shutdown_(), "nvmlShutdown");
    }
    return NULL;
}

static void *racer(void *arg) {
    (void)arg;
    for (int i = 0; i < iterations * 4 && !atomic_load(&failed); i++) {
        CHECK(init_v2(), "nvmlInit_v2 (racer)");
        CHECK(shutdown_(), "nvmlShutdown (racer)");
    }
    return NULL;
}

#define LOAD(var, name) do { *(void **)&var = dlsym(lib, name); if (!var) { fprintf(stderr, "missing %s\n", name); return 1; } } while (0)

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: hammer <iterations> <gpus> <clique> <uuid last byte>\n");
        return 2;
    }
    iterations = atoi(argv[1]);
    want_count = (unsigned)atoi(argv[2]);
    want_clique = (unsigned)atoi(argv[3]);
    want_last = (unsigned)atoi(argv[4]);
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_GLOBAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    LOAD(init_v2, "nvmlInit_v2"); LOAD(shutdown_, "nvmlShutdown"); LOAD(count_v2, "nvmlDeviceGetCount_v2");
    LOAD(by_index, "nvmlDeviceGetHandleByIndex_v2"); LOAD(get_uuid, "nvmlDeviceGetUUID");
    LOAD(get_name, "nvmlDeviceGetName"); LOAD(fabric_v1, "nvmlDeviceGetGpuFabricInfo");
    LOAD(fabric_v, "nvmlDeviceGetGpuFabricInfoV"); LOAD(pci_v3, "nvmlDeviceGetPciInfo_v3");
    LOAD(memory, "nvmlDeviceGetMemoryInfo"); LOAD(by_uuid, "nvmlDeviceGetHandleByUUID");
    LOAD(error_string, "nvmlErrorString");

    /* Stale handles after the last shutdown: detected, never dereferenced. */
    dev_t_ stale = NULL;
    if (init_v2() != 0 || by_index(0, &stale) != 0 || shutdown_() != 0) {
        fprintf(stderr, "setup init failed\n");
        return 1;
    }
    char uuid[96];
    if (get_uuid(stale, uuid, sizeof uuid) != 1) {
        fprintf(stderr, "a stale handle after shutdown must give UNINITIALIZED\n");
        return 1;
    }

    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&threads[t], NULL, t < RACERS ? racer : query, NULL);
    for (int t = 0; t < THREADS; t++)
        pthread_join(threads[t], NULL);
    if (shutdown_() != 1) {
        fprintf(stderr, "every init was matched by a shutdown, so one more must give UNINITIALIZED\n");
        return 1;
    }
    printf("calls %lu\n", atomic_load(&calls));
    return atomic_load(&failed);
}
