/*
 * A stand-in libnvidia-ml.so.1 for tests: the functions pynvml calls during gpuenv's
 * detection, answering from the GPUENV_FAKE_NVML environment variable, so the real
 * pynvml code path runs in CI on machines with no GPU.
 *
 * Built by tests/nvml/standin.py:
 *   gcc -shared -fPIC -Wl,-soname,libnvidia-ml.so.1 -o libnvidia-ml.so.1 standin.c
 *
 * GPUENV_FAKE_NVML holds ';'-separated key=value items (re-read by every init):
 *   driver=550.54.15          nvmlSystemGetDriverVersion
 *   cuda=12040                nvmlSystemGetCudaDriverVersion(_v2)
 *   gpu=NAME|UUID|9.0|BYTES   one GPU (repeat for more; none means "no devices")
 *   init=9                    nvmlInit* returns this code (9: driver not loaded)
 *   fail=FUNCTION:CODE        FUNCTION returns CODE (repeatable)
 * Unset, init fails with NVML_ERROR_DRIVER_NOT_LOADED. GPUENV_FAKE_NVML_LOG, when set,
 * names a file that gets one line per call (the function's name).
 *
 * Types and struct layouts follow nvml.h as pynvml declares them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

#define MAX_GPUS 64
#define MAX_FAILS 16
#define TEXT 128

typedef struct {
    char name[TEXT];
    char uuid[TEXT];
    int cc_major, cc_minor;
    unsigned long long memory;
} fake_gpu;

typedef struct nvmlDevice_st *nvmlDevice_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

#define NVML_MEMORY_V2 (unsigned int)(sizeof(nvmlMemory_v2_t) | (2 << 24))
_Static_assert(NVML_MEMORY_V2 == 0x02000028, "nvmlMemory_v2 is 0x02000028 in nvml.h");

static fake_gpu gpus[MAX_GPUS];
static unsigned int gpu_count;
static char driver[TEXT] = "550.54.15";
static int cuda = 12040;
static int init_result;
static struct {
    char function[TEXT];
    int code;
} fails[MAX_FAILS];
static int fail_count;
static int refcount;

static void log_call(const char *function) {
    const char *path = getenv("GPUENV_FAKE_NVML_LOG");
    if (!path || !*path) return;
    FILE *out = fopen(path, "a");
    if (!out) return;
    fprintf(out, "%s\n", function);
    fclose(out);
}

static void copy(char *dst, const char *src) {
    strncpy(dst, src, TEXT - 1);
    dst[TEXT - 1] = '\0';
}

static void parse_gpu(char *value) {
    if (gpu_count >= MAX_GPUS) return;
    fake_gpu *gpu = &gpus[gpu_count++];
    char *save = NULL;
    char *name = strtok_r(value, "|", &save);
    char *uuid = strtok_r(NULL, "|", &save);
    char *cc = strtok_r(NULL, "|", &save);
    char *memory = strtok_r(NULL, "|", &save);
    copy(gpu->name, name ? name : "");
    copy(gpu->uuid, uuid ? uuid : "");
    gpu->cc_major = gpu->cc_minor = 0;
    if (cc) sscanf(cc, "%d.%d", &gpu->cc_major, &gpu->cc_minor);
    gpu->memory = memory ? strtoull(memory, NULL, 10) : 0;
}

static void parse_fail(char *value) {
    char *colon = strchr(value, ':');
    if (!colon || fail_count >= MAX_FAILS) return;
    *colon = '\0';
    copy(fails[fail_count].function, value);
    fails[fail_count++].code = atoi(colon + 1);
}

static void load_spec(void) {
    gpu_count = 0;
    fail_count = 0;
    cuda = 12040;
    copy(driver, "550.54.15");
    const char *env = getenv("GPUENV_FAKE_NVML");
    init_result = env ? NVML_SUCCESS : NVML_ERROR_DRIVER_NOT_LOADED;
    if (!env) return;
    char *spec = strdup(env);
    char *save = NULL;
    for (char *item = strtok_r(spec, ";", &save); item; item = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(item, '=');
        if (!eq) continue;
        *eq = '\0';
        char *value = eq + 1;
        if (!strcmp(item, "driver")) copy(driver, value);
        else if (!strcmp(item, "cuda")) cuda = atoi(value);
        else if (!strcmp(item, "gpu")) parse_gpu(value);
        else if (!strcmp(item, "init")) init_result = atoi(value);
        else if (!strcmp(item, "fail")) parse_fail(value);
    }
    free(spec);
}

/* The code a call returns before doing anything: a configured failure, or
 * "uninitialised" outside nvmlInit/nvmlShutdown. */
static nvmlReturn_t enter(const char *function) {
    log_call(function);
    for (int i = 0; i < fail_count; i++)
        if (!strcmp(fails[i].function, function)) return fails[i].code;
    return refcount > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

static fake_gpu *gpu_of(nvmlDevice_t device) {
    fake_gpu *gpu = (fake_gpu *)device;
    if (gpu < gpus || gpu >= gpus + gpu_count) return NULL;
    return gpu;
}

static nvmlReturn_t put_text(char *buffer, unsigned int length, const char *text) {
    if (!buffer) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(text) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(buffer, text);
    return NVML_SUCCESS;
}

/* ---- initialisation ---- */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    log_call("nvmlInitWithFlags");
    load_spec();
    if (init_result != NVML_SUCCESS) return init_result;
    refcount++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    log_call("nvmlShutdown");
    if (refcount == 0) return NVML_ERROR_UNINITIALIZED;
    refcount--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

/* ---- system ---- */

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    nvmlReturn_t ret = enter("nvmlSystemGetDriverVersion");
    return ret ? ret : put_text(version, length, driver);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    nvmlReturn_t ret = enter("nvmlSystemGetNVMLVersion");
    return ret ? ret : put_text(version, length, "12.550.54.15");
}

static nvmlReturn_t cuda_version(const char *function, int *out) {
    nvmlReturn_t ret = enter(function);
    if (ret) return ret;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    *out = cuda;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
    return cuda_version("nvmlSystemGetCudaDriverVersion", version);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    return cuda_version("nvmlSystemGetCudaDriverVersion_v2", version);
}

/* ---- devices ---- */

static nvmlReturn_t device_count(const char *function, unsigned int *count) {
    nvmlReturn_t ret = enter(function);
    if (ret) return ret;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = gpu_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) {
    return device_count("nvmlDeviceGetCount", count);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    return device_count("nvmlDeviceGetCount_v2", count);
}

static nvmlReturn_t handle_by_index(const char *function, unsigned int index, nvmlDevice_t *device) {
    nvmlReturn_t ret = enter(function);
    if (ret) return ret;
    if (!device || index >= gpu_count) return NVML_ERROR_INVALID_ARGUMENT;
    *device = (nvmlDevice_t)&gpus[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return handle_by_index("nvmlDeviceGetHandleByIndex", index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    return handle_by_index("nvmlDeviceGetHandleByIndex_v2", index, device);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    nvmlReturn_t ret = enter("nvmlDeviceGetName");
    fake_gpu *gpu = gpu_of(device);
    if (ret) return ret;
    return gpu ? put_text(name, length, gpu->name) : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    nvmlReturn_t ret = enter("nvmlDeviceGetUUID");
    fake_gpu *gpu = gpu_of(device);
    if (ret) return ret;
    return gpu ? put_text(uuid, length, gpu->uuid) : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    nvmlReturn_t ret = enter("nvmlDeviceGetCudaComputeCapability");
    fake_gpu *gpu = gpu_of(device);
    if (ret) return ret;
    if (!gpu || !major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    *major = gpu->cc_major;
    *minor = gpu->cc_minor;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    nvmlReturn_t ret = enter("nvmlDeviceGetMemoryInfo");
    fake_gpu *gpu = gpu_of(device);
    if (ret) return ret;
    if (!gpu || !memory) return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = gpu->memory;
    memory->used = gpu->memory / 100;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    nvmlReturn_t ret = enter("nvmlDeviceGetMemoryInfo_v2");
    fake_gpu *gpu = gpu_of(device);
    if (ret) return ret;
    if (!gpu || !memory) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != NVML_MEMORY_V2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = gpu->memory;
    memory->reserved = gpu->memory / 200;
    memory->used = gpu->memory / 100;
    memory->free = memory->total - memory->reserved - memory->used;
    return NVML_SUCCESS;
}
