/* The test controls of runtime/testing/fake_libcuda.c, a stand-in for libcuda.so.1 over host
 * memory. A test loads the same file the runtime does (KILN_CUDA_LIBRARY) with dlopen, which
 * gives it the same instance, and finds these functions with dlsym. */
#ifndef KILN_RUNTIME_TESTING_FAKE_LIBCUDA_H_
#define KILN_RUNTIME_TESTING_FAKE_LIBCUDA_H_

#include <stdint.h>

#define FAKE_CUDA_MAX_PARAMS 16

/* One cuLaunchKernel call, its parameters read with the sizes the PTX declares for them. */
typedef struct FakeCudaLaunch {
  char kernel[256];
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  int num_params;
  uint64_t params[FAKE_CUDA_MAX_PARAMS];
} FakeCudaLaunch;

/* Forgets launches, failures and kernels set before; keeps loaded modules and memory. */
typedef void (*FakeCudaResetFn)(void);
/* The launches since the last reset; *count is how many. */
typedef const FakeCudaLaunch* (*FakeCudaLaunchesFn)(int* count);
/* Device memory not yet freed, in allocations (modules' globals not counted). */
typedef int (*FakeCudaLiveAllocationsFn)(void);
/* How many devices cuDeviceGetCount reports (1 after a reset). */
typedef void (*FakeCudaSetDeviceCountFn)(int count);
/* The next `count` launches fail with CUDA_ERROR_LAUNCH_FAILED. */
typedef void (*FakeCudaFailLaunchesFn)(int count);
/* cuMemAlloc of more than `bytes` bytes fails with CUDA_ERROR_OUT_OF_MEMORY (-1: never). */
typedef void (*FakeCudaFailAllocAboveFn)(int64_t bytes);
/* The next launch writes `record` to its module's kiln_gpu_index_error, as a kernel that read
 * an index out of range would. */
typedef void (*FakeCudaClaimIndexErrorFn)(const int64_t record[6]);
/* Launches of kernel `name` run `fn` for every block (device pointers are host pointers here),
 * so that results can be checked; one call per kernel, up to 256. */
typedef void (*FakeCudaSetKernelFn)(const char* name, void (*fn)(void** args, int64_t block));

#endif /* KILN_RUNTIME_TESTING_FAKE_LIBCUDA_H_ */
