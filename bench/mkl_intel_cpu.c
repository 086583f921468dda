/* LD_PRELOAD shim for PyTorch's MKL on a non-Intel CPU: MKL picks its kernels by the CPU's
 * vendor first, and on AMD takes a path of its own whatever the CPU's instruction set (MKL
 * 2020.1 and later ignore MKL_DEBUG_CPU_TYPE, and MKL_ENABLE_INSTRUCTIONS only lowers the
 * ceiling of a path). Answering "Intel" to its two vendor checks makes it dispatch by the
 * instruction set as on an Intel CPU (MKL_VERBOSE=1 then names AVX-512 on an AVX-512 CPU).
 * Both are needed: with only mkl_serv_intel_cpu, MKL 2024.2 falls back to SSE2.
 *
 * Built by bench/run.sh (gcc -shared -fPIC) for the "ISA forced" PyTorch rows, and used only
 * when MKL_VERBOSE shows that it changes MKL's path (bench/README.md "PyTorch's ISA knobs").
 * It works because PyPI's libtorch_cpu.so exports MKL's symbols; a build that hides them
 * ignores it, and run.sh then leaves the rows out.
 */
int mkl_serv_intel_cpu(void);
int mkl_serv_intel_cpu_true(void);

int mkl_serv_intel_cpu(void) { return 1; }
int mkl_serv_intel_cpu_true(void) { return 1; }
