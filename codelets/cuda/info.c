/* What CUDA sees, asked once: the device count the engine plans with and the line
 * `nestpipe --version` and the placement print (np_cuda_info, nestpipe.h). Every build has
 * it; without the CUDA flavour it says so. */
#include <pthread.h>

#include "codelets/cuda/cuda.h"
#include "nestpipe/nestpipe.h"

#ifdef NP_HAVE_CUDA
static char cuda_info[512];
static int cuda_devices;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static void cuda_describe(void) {
    cuda_devices = np_cuda_describe(cuda_info, sizeof cuda_info);
}
#endif

int np_cuda_devices(void) {
#ifdef NP_HAVE_CUDA
    pthread_once(&cuda_once, cuda_describe);
    return cuda_devices;
#else
    return 0;
#endif
}

const char *np_cuda_info(void) {
#ifdef NP_HAVE_CUDA
    pthread_once(&cuda_once, cuda_describe);
    return cuda_info;
#else
    return "not built with CUDA (docs/gpu.md: bash .ci/build-cuda)";
#endif
}
