// The CUDA flavour's first piece (NP_CUDA, docs/gpu.md): what the CUDA runtime this build
// was linked with can see. Layer kernels go beside it as the CUDA slots of the layer
// definitions are filled.
#include <cuda_runtime_api.h>

#include "codelets/cuda/cuda.h"
#include <stdio.h>

int np_cuda_describe(char *buf, size_t n) {
    int runtime = 0, driver = 0, devices = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess) devices = 0;
    int at = snprintf(buf, n, "CUDA runtime %d.%d, driver %s, %d device%s", runtime / 1000,
                      runtime % 1000 / 10, driver ? "present" : "absent", devices,
                      devices == 1 ? "" : "s");
    for (int d = 0; d < devices && at > 0 && (size_t)at < n; d++) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, d) == cudaSuccess)
            at += snprintf(buf + at, n - (size_t)at, "%s%s (sm_%d%d, %.0f GiB)", d ? ", " : ": ",
                           p.name, p.major, p.minor, (double)p.totalGlobalMem / (1 << 30));
    }
    return devices;
}

void np_cuda_use_device(int device) {
    if (device >= 0) cudaSetDevice(device);
}
