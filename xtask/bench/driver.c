/* The one driver program `cargo xtask bench-vs-upstream` runs against both mock NVML libraries.
 *
 * It dlopens the library it is given (RTLD_LAZY, as go-nvml and pynvml do), resolves the calls by
 * dlsym and measures one thing per mode, printing `key=value` pairs on one line. The round of
 * queries is the same everywhere: for each of the 4 GPUs, handle by index, fabric info v1,
 * fabric info v3 (versioned), UUID and memory info; every return code is checked.
 *
 *   driver start    LIB T0_NS   process start (the parent's CLOCK_MONOTONIC at spawn) to the
 *                               first fabric answer; dlopen and first nvmlInit_v2 alone; VmHWM
 *                               before dlopen and after init plus one round
 *   driver cycle    LIB N       N x (init, round, shutdown): mean, min and median per cycle
 *   driver queries  LIB N       init held, N rounds: min and median per round
 *   driver threads  LIB T R     init held, T threads x R rounds: rounds per second
 *   driver identity LIB         per GPU: UUID, fabric cluster uuid, clique, state, memory total
 *   driver starts   N LIB       N x `driver start LIB <now>` spawned one after the other
 *   driver bare     T0_NS       the floor of `start`: spawn to this process's main(), no library
 *   driver bares    N           N x `driver bare <now>` spawned one after the other
 *   driver time     N CMD...    N x CMD (stdout to /dev/null): wall time and peak RSS per run
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GPUS 4

typedef struct {
    unsigned char cluster_uuid[16];
    unsigned int status;
    unsigned int clique_id;
    unsigned char state;
} fabric_v1_t;

typedef struct {
    unsigned int version;
    unsigned char cluster_uuid[16];
    unsigned int status;
    unsigned int clique_id;
    unsigned char state;
    unsigned int health_mask;
    unsigned char health_summary;
} fabric_v3_t;

typedef struct {
    unsigned long long total, free, used;
} memory_t;

#define FABRIC_V3_VERSION ((unsigned int)(sizeof(fabric_v3_t) | (3u << 24)))

static unsigned int (*init_v2)(void);
static unsigned int (*shutdown_)(void);
static unsigned int (*by_index)(unsigned int, void **);
static unsigned int (*fabric_v1)(void *, fabric_v1_t *);
static unsigned int (*fabric_v)(void *, fabric_v3_t *);
static unsigned int (*get_uuid)(void *, char *, unsigned int);
static unsigned int (*memory)(void *, memory_t *);

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, unsigned int code) {
    fprintf(stderr, "driver: %s returned %u\n", what, code);
    exit(1);
}

#define CHECK(call, what)                                                                        \
    do {                                                                                         \
        unsigned int code_ = (call);                                                             \
        if (code_ != 0) die(what, code_);                                                        \
    } while (0)

static void *sym(void *lib, const char *name) {
    void *found = dlsym(lib, name);
    if (found == NULL) {
        fprintf(stderr, "driver: %s is not exported: %s\n", name, dlerror());
        exit(1);
    }
    return found;
}

static void *open_library(const char *path) {
    void *lib = dlopen(path, RTLD_LAZY);
    if (lib == NULL) {
        fprintf(stderr, "driver: cannot dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    *(void **)&init_v2 = sym(lib, "nvmlInit_v2");
    *(void **)&shutdown_ = sym(lib, "nvmlShutdown");
    *(void **)&by_index = sym(lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&fabric_v1 = sym(lib, "nvmlDeviceGetGpuFabricInfo");
    *(void **)&fabric_v = sym(lib, "nvmlDeviceGetGpuFabricInfoV");
    *(void **)&get_uuid = sym(lib, "nvmlDeviceGetUUID");
    *(void **)&memory = sym(lib, "nvmlDeviceGetMemoryInfo");
    return lib;
}

static void round_of_queries(void) {
    for (unsigned int i = 0; i < GPUS; i++) {
        void *device = NULL;
        fabric_v1_t v1;
        fabric_v3_t v3;
        char uuid[96];
        memory_t mem;
        CHECK(by_index(i, &device), "nvmlDeviceGetHandleByIndex_v2");
        CHECK(fabric_v1(device, &v1), "nvmlDeviceGetGpuFabricInfo");
        memset(&v3, 0, sizeof v3);
        v3.version = FABRIC_V3_VERSION;
        CHECK(fabric_v(device, &v3), "nvmlDeviceGetGpuFabricInfoV");
        CHECK(get_uuid(device, uuid, sizeof uuid), "nvmlDeviceGetUUID");
        CHECK(memory(device, &mem), "nvmlDeviceGetMemoryInfo");
    }
}

static long vm_hwm_kb(void) {
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (status == NULL) return -1;
    while (fgets(line, sizeof line, status) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0) kb = strtol(line + 6, NULL, 10);
    }
    fclose(status);
    return kb;
}

static int by_value(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Prints min and median (and mean) of n samples in microseconds. */
static void summary(const char *name, uint64_t *samples, size_t n) {
    long double sum = 0;
    for (size_t i = 0; i < n; i++) sum += samples[i];
    qsort(samples, n, sizeof *samples, by_value);
    printf("%s_min_us=%.3f %s_median_us=%.3f %s_mean_us=%.3f", name, samples[0] / 1000.0, name,
           samples[n / 2] / 1000.0, name, (double)(sum / n / 1000.0));
}

static long count_arg(const char *text) {
    long value = strtol(text, NULL, 10);
    if (value <= 0) {
        fprintf(stderr, "driver: %s is not a positive count\n", text);
        exit(2);
    }
    return value;
}

extern char **environ;

/* Spawns argv (PATH search when `search`), optionally with stdout on /dev/null, and waits;
 * returns the child's peak RSS in kB. A child that fails ends the driver. */
static long run_child(char **child_argv, int search, int quiet) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (quiet) posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int err = search ? posix_spawnp(&pid, child_argv[0], &actions, NULL, child_argv, environ)
                     : posix_spawn(&pid, child_argv[0], &actions, NULL, child_argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) {
        fprintf(stderr, "driver: cannot spawn %s: %s\n", child_argv[0], strerror(err));
        exit(1);
    }
    int status;
    struct rusage usage;
    if (wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "driver: %s failed (status %d)\n", child_argv[0], status);
        exit(1);
    }
    return usage.ru_maxrss;
}

/* Spawns this driver n times as `<self> mode [arg] <spawn time in ns>`, one after another. */
static void spawn_self_timed(long n, char *mode, char *arg) {
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) die("readlink /proc/self/exe", 0);
    self[len] = 0;
    for (long i = 0; i < n; i++) {
        char t0[32];
        fflush(stdout);
        snprintf(t0, sizeof t0, "%llu", (unsigned long long)now_ns());
        char *with_arg[] = {self, mode, arg, t0, NULL};
        char *without[] = {self, mode, t0, NULL};
        run_child(arg ? with_arg : without, 0, 0);
    }
}

static long rounds_per_thread;

static void *thread_body(void *unused) {
    (void)unused;
    for (long i = 0; i < rounds_per_thread; i++) round_of_queries();
    return NULL;
}

/* Times COUNT rounds of the queries against LIB and prints their summary:
 * with `cycle`, every round is init, the queries and shutdown ("cycle");
 * without, one init and then only the queries ("round"). */
static int timed_rounds(const char *path, const char *count, int cycle) {
    long n = count_arg(count);
    uint64_t *samples = calloc((size_t)n, sizeof *samples);
    open_library(path);
    if (!cycle) CHECK(init_v2(), "nvmlInit_v2");
    for (long i = 0; i < n; i++) {
        uint64_t start = now_ns();
        if (cycle) CHECK(init_v2(), "nvmlInit_v2");
        round_of_queries();
        if (cycle) CHECK(shutdown_(), "nvmlShutdown");
        samples[i] = now_ns() - start;
    }
    summary(cycle ? "cycle" : "round", samples, (size_t)n);
    printf("\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: driver start|cycle|queries|threads|identity LIB [ARGS] | starts N LIB | bares N | time N ARGV...\n");
        return 2;
    }
    const char *mode = argv[1], *path = argv[2];
    if (strcmp(mode, "start") == 0 && argc == 4) {
        uint64_t t0 = strtoull(argv[3], NULL, 10);
        long base_kb = vm_hwm_kb();
        uint64_t t1 = now_ns();
        open_library(path);
        uint64_t t2 = now_ns();
        CHECK(init_v2(), "nvmlInit_v2");
        uint64_t t3 = now_ns();
        void *device = NULL;
        fabric_v1_t v1;
        CHECK(by_index(0, &device), "nvmlDeviceGetHandleByIndex_v2");
        CHECK(fabric_v1(device, &v1), "nvmlDeviceGetGpuFabricInfo");
        uint64_t t4 = now_ns();
        round_of_queries();
        long hwm_kb = vm_hwm_kb();
        printf("start_to_fabric_us=%.3f dlopen_us=%.3f init_us=%.3f base_hwm_kb=%ld hwm_kb=%ld\n",
               (t4 - t0) / 1000.0, (t2 - t1) / 1000.0, (t3 - t2) / 1000.0, base_kb, hwm_kb);
        return 0;
    }
    if (strcmp(mode, "cycle") == 0 && argc == 4) return timed_rounds(path, argv[3], 1);
    if (strcmp(mode, "queries") == 0 && argc == 4) return timed_rounds(path, argv[3], 0);
    if (strcmp(mode, "threads") == 0 && argc == 5) {
        long threads = count_arg(argv[3]);
        rounds_per_thread = count_arg(argv[4]);
        pthread_t *ids = calloc((size_t)threads, sizeof *ids);
        open_library(path);
        CHECK(init_v2(), "nvmlInit_v2");
        uint64_t start = now_ns();
        for (long i = 0; i < threads; i++) pthread_create(&ids[i], NULL, thread_body, NULL);
        for (long i = 0; i < threads; i++) pthread_join(ids[i], NULL);
        uint64_t took = now_ns() - start;
        printf("rounds_per_s=%.1f\n", (double)threads * rounds_per_thread / (took / 1e9));
        return 0;
    }
    if (strcmp(mode, "identity") == 0 && argc == 3) {
        open_library(path);
        CHECK(init_v2(), "nvmlInit_v2");
        for (unsigned int i = 0; i < GPUS; i++) {
            void *device = NULL;
            fabric_v1_t v1;
            char uuid[96];
            memory_t mem;
            CHECK(by_index(i, &device), "nvmlDeviceGetHandleByIndex_v2");
            CHECK(fabric_v1(device, &v1), "nvmlDeviceGetGpuFabricInfo");
            CHECK(get_uuid(device, uuid, sizeof uuid), "nvmlDeviceGetUUID");
            CHECK(memory(device, &mem), "nvmlDeviceGetMemoryInfo");
            printf("gpu=%u uuid=%s cluster=", i, uuid);
            for (int b = 0; b < 16; b++) printf("%02x", v1.cluster_uuid[b]);
            printf(" clique=%u state=%u status=%u memory_total=%llu\n", v1.clique_id, v1.state,
                   v1.status, mem.total);
        }
        CHECK(shutdown_(), "nvmlShutdown");
        return 0;
    }
    if (strcmp(mode, "starts") == 0 && argc == 4) {
        spawn_self_timed(count_arg(argv[2]), "start", argv[3]);
        return 0;
    }
    /* The floor of `start`: the same spawn of the driver itself, timed to its main(), no library. */
    if (strcmp(mode, "bare") == 0 && argc == 3) {
        uint64_t t0 = strtoull(argv[2], NULL, 10);
        uint64_t t1 = now_ns();
        printf("start_us=%.3f\n", (t1 - t0) / 1000.0);
        return 0;
    }
    if (strcmp(mode, "bares") == 0 && argc == 3) {
        spawn_self_timed(count_arg(argv[2]), "bare", NULL);
        return 0;
    }
    if (strcmp(mode, "time") == 0 && argc >= 4) {
        long n = count_arg(argv[2]);
        uint64_t *walls = calloc((size_t)n, sizeof *walls);
        uint64_t *rss = calloc((size_t)n, sizeof *rss);
        for (long i = 0; i < n; i++) {
            uint64_t start = now_ns();
            rss[i] = (uint64_t)run_child(&argv[3], 1, 1);
            walls[i] = now_ns() - start;
        }
        summary("wall", walls, (size_t)n);
        qsort(rss, (size_t)n, sizeof *rss, by_value);
        printf(" maxrss_min_kb=%llu maxrss_median_kb=%llu\n", (unsigned long long)rss[0],
               (unsigned long long)rss[n / 2]);
        return 0;
    }
    fprintf(stderr, "driver: unknown mode or wrong arguments: %s\n", mode);
    return 2;
}
