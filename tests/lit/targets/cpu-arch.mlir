// The cpu target cross-compiles: --cpu-arch arm64 (aarch64) and x86-64 set IREE's target triple
// and a target CPU every machine of the architecture has, instead of this machine's (`host`,
// the default). The module's executables are ELF for that architecture: IREE names their
// format `embedded-elf-arm_64` / `embedded-elf-x86_64`, the ELF header says AArch64, and
// the module names the triple.

// RUN: flow-compile %s --target cpu --cpu-arch arm64 -o %t.arm64.vmfb
// RUN: iree-dump-module %t.arm64.vmfb | FileCheck %s --check-prefixes=MODULE,ARM64
// RUN: %python -c "import sys; d = open(sys.argv[1], 'rb').read(); e = d.find(bytes([127]) + b'ELF'); print('ELF machine', int.from_bytes(d[e + 18:e + 20], 'little')); t = d.find(b'target_triple'); print(d[t:t + 40].decode())" %t.arm64.vmfb | FileCheck %s --check-prefix=ELF
// RUN: flow-compile %s --cpu-arch aarch64 -o %t.aarch64.vmfb
// RUN: cmp %t.arm64.vmfb %t.aarch64.vmfb
// RUN: flow-compile %s --cpu-arch x86-64 -o %t.x86.vmfb
// RUN: iree-dump-module %t.x86.vmfb | FileCheck %s --check-prefixes=MODULE,X86
// RUN: flow-compile %s -o %t.host.vmfb
// RUN: iree-dump-module %t.host.vmfb | FileCheck %s --check-prefixes=MODULE,HOST
// RUN: not flow-compile %s --cpu-arch sparc -o %t.bad.vmfb 2>&1 | FileCheck %s --check-prefix=BADARCH
// RUN: not flow-compile %s --target cuda --cpu-arch arm64 -o %t.bad.vmfb 2>&1 | FileCheck %s --check-prefix=NOTCPU

// MODULE:      Exported Functions:
// MODULE:        iree.abi.declaration: sync func @scale_sum(%input0: tensor<4x8xf32>) -> (%output0: tensor<4xf32>)
// MODULE:      `hal.executable.format`
// ARM64-NEXT:  `embedded-elf-arm_64`
// X86-NEXT:    `embedded-elf-x86_64`
// HOST-NEXT:   `embedded-elf-{{.*}}`

// EM_AARCH64 is 183 (EM_X86_64 would be 62).
// ELF: ELF machine 183
// ELF-NEXT: target_triple = "aarch64-

// BADARCH: invalid choice: 'sparc'
// NOTCPU: flow-compile: error: a CPU architecture ('arm64') applies to the cpu target, not 'cuda'

func.func @scale_sum(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %c = flow.full 2.0 : f32 -> tensor<4x8xf32>
  %0 = flow.mul %x, %c : tensor<4x8xf32>
  %1 = flow.reduce sum %0, dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
