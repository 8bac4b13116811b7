// cuda_launch.cuh: the launch arithmetic's named constants, shared by the
// CUDA kernels and their host emulation (kernels/cuda/emu).
//
// WARP_SIZE is the warp of every NVIDIA GPU this backend builds for: lane =
// threadIdx.x % WARP_SIZE, the shuffles' reach, blocks of whole warps.
// CEIL_DIV(a, b) is (a + b - 1) / b in the operands' own types: blocks to
// cover a items b to a block (b > 0; a + b - 1 must not overflow).
// CUDA_MAX_GRID_YZ is the hardware limit on gridDim.y and gridDim.z.
#ifndef VB_CUDA_LAUNCH_CUH
#define VB_CUDA_LAUNCH_CUH

#define WARP_SIZE 32
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
#define CUDA_MAX_GRID_YZ 65535

#endif
