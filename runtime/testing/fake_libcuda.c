/* A fake CUDA driver for the runtime's tests: the driver API calls the runtime makes, over host
 * memory, so that tests drive the CUDA device end to end on a machine without a GPU. Device
 * pointers are host pointers. A module "accepts" PTX that has an `.entry` for each function
 * asked for; launches are recorded, and can be told to fail (fake_libcuda.h). */
#include "runtime/testing/fake_libcuda.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_LAUNCH_FAILED = 719,
};

#define MAX_LAUNCHES 64
#define MAX_ALLOCATIONS 1024
#define RECORD_NAME "kiln_gpu_index_error"

typedef struct Function {
  struct Module* module;
  struct Function* next; /* of the module's functions */
  char name[256];
  int num_params;
  int param_bytes[FAKE_CUDA_MAX_PARAMS];
} Function;

typedef struct Module {
  char* ptx;
  Function* functions; /* freed with the module, as the driver's handles are */
  int64_t index_error[6];
} Module;

static int context_token;
static __thread void* current_context;
static int device_count = 1;
static int fail_launches;
static int64_t fail_alloc_above = -1;
static int claim_pending;
static int64_t claim_record[6];
static FakeCudaLaunch launches[MAX_LAUNCHES];
static int num_launches;
static void* allocations[MAX_ALLOCATIONS];
#define MAX_KERNELS 256
static struct {
  char name[256];
  void (*fn)(void** args, int64_t block);
} kernels[MAX_KERNELS];
static int num_kernels;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- Test controls (fake_libcuda.h). */

void fake_cuda_reset(void) {
  device_count = 1;
  fail_launches = 0;
  fail_alloc_above = -1;
  claim_pending = 0;
  num_launches = 0;
  num_kernels = 0;
}

const FakeCudaLaunch* fake_cuda_launches(int* count) {
  *count = num_launches;
  return launches;
}

int fake_cuda_live_allocations(void) {
  int live = 0;
  for (int i = 0; i < MAX_ALLOCATIONS; ++i) live += allocations[i] != NULL;
  return live;
}

void fake_cuda_set_device_count(int count) { device_count = count; }
void fake_cuda_fail_launches(int count) { fail_launches = count; }
void fake_cuda_fail_alloc_above(int64_t bytes) { fail_alloc_above = bytes; }

void fake_cuda_claim_index_error(const int64_t record[6]) {
  memcpy(claim_record, record, sizeof claim_record);
  claim_pending = 1;
}

void fake_cuda_set_kernel(const char* name, void (*fn)(void** args, int64_t block)) {
  if (num_kernels == MAX_KERNELS) abort();
  snprintf(kernels[num_kernels].name, sizeof kernels[num_kernels].name, "%s", name);
  kernels[num_kernels++].fn = fn;
}

/* ---- The driver API. */

/* Every call but cuInit and the device queries needs a current context, as the real driver's
 * do: this is how the tests see that the runtime makes it current on each thread. */
#define REQUIRE_CONTEXT() \
  if (current_context != &context_token) return CUDA_ERROR_INVALID_CONTEXT

CUresult cuInit(unsigned flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

CUresult cuDeviceGetCount(int* count) {
  *count = device_count;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(int* device, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(void** context, int device) {
  if (device < 0 || device >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  *context = &context_token;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(int device) {
  return device == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuCtxSetCurrent(void* context) {
  current_context = context;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
  REQUIRE_CONTEXT();
  return CUDA_SUCCESS;
}

/* Where `.entry <name>(` starts in `ptx`, or NULL. */
static const char* find_entry(const char* ptx, const char* name) {
  size_t length = strlen(name);
  for (const char* at = strstr(ptx, ".entry "); at != NULL; at = strstr(at + 1, ".entry ")) {
    const char* start = at + strlen(".entry ");
    if (strncmp(start, name, length) == 0 && (start[length] == '(' || start[length] == ' ')) {
      return start;
    }
  }
  return NULL;
}

static void write_log(unsigned num_options, const int* options, void** values,
                      const char* message) {
  char* buffer = NULL;
  size_t size = 0;
  for (unsigned i = 0; i < num_options; ++i) {
    if (options[i] == 5) buffer = (char*)values[i];
    if (options[i] == 6) size = (size_t)(uintptr_t)values[i];
  }
  if (buffer != NULL && size > 0) snprintf(buffer, size, "%s", message);
}

CUresult cuModuleLoadDataEx(Module** module, const void* image, unsigned num_options, int* options,
                            void** values) {
  REQUIRE_CONTEXT();
  const char* ptx = (const char*)image;
  if (strstr(ptx, ".version") == NULL || strstr(ptx, ".target") == NULL) {
    write_log(num_options, options, values, "ptxas fatal: not PTX: no .version or .target");
    return CUDA_ERROR_INVALID_PTX;
  }
  Module* result = (Module*)calloc(1, sizeof(Module));
  result->ptx = strdup(ptx);
  *module = result;
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(Module* module) {
  REQUIRE_CONTEXT();
  while (module->functions != NULL) {
    Function* next = module->functions->next;
    free(module->functions);
    module->functions = next;
  }
  free(module->ptx);
  free(module);
  return CUDA_SUCCESS;
}

/* Reads the `.param .<type>` list after `(` to know each parameter's size. */
static void read_params(const char* entry, Function* function) {
  const char* end = strchr(entry, ')');
  const char* at = entry;
  while ((at = strstr(at, ".param .")) != NULL && (end == NULL || at < end) &&
         function->num_params < FAKE_CUDA_MAX_PARAMS) {
    at += strlen(".param .");
    int bits = atoi(at + 1); /* .u64, .s32, .f32, .b8 ... */
    function->param_bytes[function->num_params++] = bits >= 8 ? bits / 8 : 8;
  }
}

CUresult cuModuleGetFunction(Function** out, Module* module, const char* name) {
  REQUIRE_CONTEXT();
  const char* entry = find_entry(module->ptx, name);
  if (entry == NULL) return CUDA_ERROR_NOT_FOUND;
  Function* function = (Function*)calloc(1, sizeof(Function));
  function->module = module;
  function->next = module->functions;
  module->functions = function;
  snprintf(function->name, sizeof function->name, "%s", name);
  read_params(entry, function);
  *out = function;
  return CUDA_SUCCESS;
}

CUresult cuModuleGetGlobal_v2(uint64_t* ptr, size_t* bytes, Module* module, const char* name) {
  REQUIRE_CONTEXT();
  if (strcmp(name, RECORD_NAME) != 0 || strstr(module->ptx, RECORD_NAME) == NULL) {
    return CUDA_ERROR_NOT_FOUND;
  }
  if (ptr != NULL) *ptr = (uint64_t)(uintptr_t)module->index_error;
  if (bytes != NULL) *bytes = sizeof module->index_error;
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(uint64_t* ptr, size_t bytes) {
  REQUIRE_CONTEXT();
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (fail_alloc_above >= 0 && (int64_t)bytes > fail_alloc_above) return CUDA_ERROR_OUT_OF_MEMORY;
  void* memory = NULL;
  if (posix_memalign(&memory, 256, bytes) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&mu);
  int slot = 0;
  while (slot < MAX_ALLOCATIONS && allocations[slot] != NULL) ++slot;
  if (slot < MAX_ALLOCATIONS) allocations[slot] = memory;
  pthread_mutex_unlock(&mu);
  if (slot == MAX_ALLOCATIONS) {
    free(memory);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *ptr = (uint64_t)(uintptr_t)memory;
  return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(uint64_t ptr) {
  REQUIRE_CONTEXT();
  pthread_mutex_lock(&mu);
  CUresult result = CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < MAX_ALLOCATIONS; ++i) {
    if (allocations[i] == (void*)(uintptr_t)ptr) {
      allocations[i] = NULL;
      free((void*)(uintptr_t)ptr);
      result = CUDA_SUCCESS;
      break;
    }
  }
  pthread_mutex_unlock(&mu);
  return result;
}

CUresult cuMemcpyHtoD_v2(uint64_t dst, const void* src, size_t bytes) {
  REQUIRE_CONTEXT();
  memcpy((void*)(uintptr_t)dst, src, bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void* dst, uint64_t src, size_t bytes) {
  REQUIRE_CONTEXT();
  memcpy(dst, (const void*)(uintptr_t)src, bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoD_v2(uint64_t dst, uint64_t src, size_t bytes) {
  REQUIRE_CONTEXT();
  memmove((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemsetD8_v2(uint64_t dst, unsigned char value, size_t bytes) {
  REQUIRE_CONTEXT();
  memset((void*)(uintptr_t)dst, value, bytes);
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(Function* function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                        unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                        void* stream, void** params, void** extra) {
  REQUIRE_CONTEXT();
  if (stream != NULL || extra != NULL || params == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (fail_launches > 0) {
    --fail_launches;
    return CUDA_ERROR_LAUNCH_FAILED;
  }
  if (num_launches < MAX_LAUNCHES) {
    FakeCudaLaunch* launch = &launches[num_launches++];
    memset(launch, 0, sizeof *launch);
    snprintf(launch->kernel, sizeof launch->kernel, "%s", function->name);
    unsigned grid[3] = {grid_x, grid_y, grid_z};
    unsigned block[3] = {block_x, block_y, block_z};
    memcpy(launch->grid, grid, sizeof grid);
    memcpy(launch->block, block, sizeof block);
    launch->shared_bytes = shared_bytes;
    launch->num_params = function->num_params;
    for (int i = 0; i < function->num_params; ++i) {
      memcpy(&launch->params[i], params[i], (size_t)function->param_bytes[i]);
    }
  }
  for (int k = 0; k < num_kernels; ++k) {
    if (strcmp(kernels[k].name, function->name) != 0) continue;
    for (unsigned b = 0; b < grid_x; ++b) kernels[k].fn(params, b);
  }
  if (claim_pending) {
    memcpy(function->module->index_error, claim_record, sizeof claim_record);
    claim_pending = 0;
  }
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** name) {
  switch (error) {
#define NAME(code) \
  case code:       \
    *name = #code; \
    return CUDA_SUCCESS;
    NAME(CUDA_SUCCESS)
    NAME(CUDA_ERROR_INVALID_VALUE)
    NAME(CUDA_ERROR_OUT_OF_MEMORY)
    NAME(CUDA_ERROR_NO_DEVICE)
    NAME(CUDA_ERROR_INVALID_DEVICE)
    NAME(CUDA_ERROR_INVALID_CONTEXT)
    NAME(CUDA_ERROR_INVALID_PTX)
    NAME(CUDA_ERROR_NOT_FOUND)
    NAME(CUDA_ERROR_LAUNCH_FAILED)
#undef NAME
  }
  *name = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  switch (error) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      *text = "out of memory";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_PTX:
      *text = "a PTX JIT compilation failed";
      return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_FOUND:
      *text = "named symbol not found";
      return CUDA_SUCCESS;
    case CUDA_ERROR_LAUNCH_FAILED:
      *text = "unspecified launch failure";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_CONTEXT:
      *text = "invalid device context";
      return CUDA_SUCCESS;
  }
  *text = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}
