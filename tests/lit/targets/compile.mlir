// flow-compile builds a real IREE module for every target on a machine with no GPU;
// iree-dump-module reads it back (exported signature, executable format), and the cpu
// module runs under flow-run.

// RUN: flow-compile %s --target cpu -o %t.cpu.vmfb
// RUN: iree-dump-module %t.cpu.vmfb | FileCheck %s --check-prefixes=MODULE,CPU
// RUN: flow-compile %s --target cuda -o %t.cuda.vmfb
// RUN: iree-dump-module %t.cuda.vmfb | FileCheck %s --check-prefixes=MODULE,CUDA
// RUN: flow-compile %s --target rocm -o %t.rocm.vmfb
// RUN: iree-dump-module %t.rocm.vmfb | FileCheck %s --check-prefixes=MODULE,ROCM
// RUN: flow-compile %s --target vulkan -o %t.vulkan.vmfb
// RUN: iree-dump-module %t.vulkan.vmfb | FileCheck %s --check-prefixes=MODULE,VULKAN

// x = [[1, 2, 3], [4, 5, 6]], w = [[1, 0], [0, 1], [1, -1]], b = [0.5, -1]:
// x @ w = [[4, -1], [10, -1]]; + b = [[4.5, -2], [10.5, -2]]; relu = [[4.5, 0], [10.5, 0]];
// sum over dim 1 = [4.5, 10.5].
// RUN: flow-run %t.cpu.vmfb --function mlp_sum --input 2x3xf32=1,2,3,4,5,6 \
// RUN:   --input 3x2xf32=1,0,0,1,1,-1 --input 2xf32=0.5,-1 | FileCheck %s --check-prefix=OUT

// MODULE:      Exported Functions:
// MODULE:        mlp_sum(
// MODULE-NEXT:     iree.abi.declaration: sync func @mlp_sum(%input0: tensor<2x3xf32>, %input1: tensor<3x2xf32>, %input2: tensor<2xf32>) -> (%output0: tensor<2xf32>)
// MODULE:      `hal.executable.format`
// CPU-NEXT:    `embedded-elf-{{.*}}`
// CUDA-NEXT:   `cuda-nvptx-fb`
// ROCM-NEXT:   `rocm-hsaco-fb`
// VULKAN-NEXT: `vulkan-spirv-fb`

// OUT:      result[0]: 2xf32
// OUT-NEXT: [ 4.5 10.5]
// OUT-NOT:  result[1]

func.func @mlp_sum(%x: tensor<2x3xf32>, %w: tensor<3x2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
  %0 = flow.matmul %x, %w : tensor<2x3xf32>, tensor<3x2xf32> -> tensor<2x2xf32>
  %1 = flow.broadcast_in_dim %b, dims = [1] : tensor<2xf32> -> tensor<2x2xf32>
  %2 = flow.add %0, %1 : tensor<2x2xf32>
  %3 = flow.full 0.0 : f32 -> tensor<2x2xf32>
  %4 = flow.maximum %2, %3 : tensor<2x2xf32>
  %5 = flow.reduce sum %4, dims = [1] : tensor<2x2xf32> -> tensor<2xf32>
  return %5 : tensor<2xf32>
}
