// Casts to and from bf16 are integer bit arithmetic (no arith.truncf/extf on bf16, which LLVM
// lowers to `__truncsfbf2` calls on CPUs without bf16 and IREE folds away); f64 -> f16 rounds
// to odd into f32 before the f32 -> f16 conversion.
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg | FileCheck %s
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg | FileCheck %s --check-prefix=NOBF16
// NOBF16-NOT: arith.{{(truncf|extf|sitofp|uitofp|fptosi).*}}bf16
// RUN: flow-opt %s --split-input-file -p flow-lower-to-linalg --print-op-generic | iree-opt --split-input-file > /dev/null

// Round to nearest even: bits + 0x7fff + lsb of the kept half; NaN -> 0x7fc0 with its sign.
// CHECK-LABEL: func.func @f32_to_bf16(
// CHECK:         ^bb0(%[[X:[^:]+]]: f32, %{{[^:]+}}: bf16):
// CHECK-NEXT:      %[[BITS:.*]] = arith.bitcast %[[X]] : f32 to i32
// CHECK:           %[[HI:.*]] = arith.shrui %[[BITS]], %{{.*}} : i32
// CHECK:           %[[LSB:.*]] = arith.andi %[[HI]], %{{.*}} : i32
// CHECK:           %[[C7FFF:.*]] = arith.constant 32767 : i32
// CHECK-NEXT:      %[[B1:.*]] = arith.addi %[[BITS]], %[[C7FFF]] : i32
// CHECK-NEXT:      %[[B2:.*]] = arith.addi %[[B1]], %[[LSB]] : i32
// CHECK-NEXT:      %[[ROUNDED:.*]] = arith.shrui %[[B2]], %{{.*}} : i32
// CHECK:           arith.constant 32704 : i32
// CHECK:           %[[ISNAN:.*]] = arith.cmpi ugt, %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:      %[[SEL:.*]] = arith.select %[[ISNAN]], %{{.*}}, %[[ROUNDED]] : i32
// CHECK-NEXT:      %[[LOW:.*]] = arith.trunci %[[SEL]] : i32 to i16
// CHECK-NEXT:      %[[Y:.*]] = arith.bitcast %[[LOW]] : i16 to bf16
// CHECK-NEXT:      linalg.yield %[[Y]] : bf16
func.func @f32_to_bf16(%a: tensor<4xf32>) -> tensor<4xbf16> {
  %0 = flow.cast %a : tensor<4xf32> -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// CHECK-LABEL: func.func @bf16_to_f32(
// CHECK:         ^bb0(%[[X:[^:]+]]: bf16, %{{[^:]+}}: f32):
// CHECK-NEXT:      %[[H:.*]] = arith.bitcast %[[X]] : bf16 to i16
// CHECK-NEXT:      %[[W:.*]] = arith.extui %[[H]] : i16 to i32
// CHECK-NEXT:      %[[C16:.*]] = arith.constant 16 : i32
// CHECK-NEXT:      %[[S:.*]] = arith.shli %[[W]], %[[C16]] : i32
// CHECK-NEXT:      %[[Y:.*]] = arith.bitcast %[[S]] : i32 to f32
// CHECK-NEXT:      linalg.yield %[[Y]] : f32
func.func @bf16_to_f32(%a: tensor<4xbf16>) -> tensor<4xf32> {
  %0 = flow.cast %a : tensor<4xbf16> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// int64 rounds once, from its leading one (ctlz of the 32-bit halves: SPIR-V has no 64-bit
// ctlz): no sitofp through f32 (or f64).
// CHECK-LABEL: func.func @i64_to_bf16(
// CHECK:         math.ctlz %{{.*}} : i32
// CHECK:         math.ctlz %{{.*}} : i32
// CHECK:         arith.trunci %{{.*}} : i64 to i16
// CHECK:         arith.bitcast %{{.*}} : i16 to bf16
func.func @i64_to_bf16(%a: tensor<4xi64>) -> tensor<4xbf16> {
  %0 = flow.cast %a : tensor<4xi64> -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// CHECK-LABEL: func.func @f64_to_f16(
// CHECK:         ^bb0(%[[X:[^:]+]]: f64, %{{[^:]+}}: f16):
// CHECK-NEXT:      %[[T:.*]] = arith.truncf %[[X]] : f64 to f32
// CHECK-NEXT:      %[[BACK:.*]] = arith.extf %[[T]] : f32 to f64
// CHECK-NEXT:      %[[INEXACT:.*]] = arith.cmpf one, %[[BACK]], %[[X]] : f64
// CHECK:           %[[ODD:.*]] = arith.select %[[INEXACT]], %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:      %[[F:.*]] = arith.bitcast %[[ODD]] : i32 to f32
// CHECK-NEXT:      %[[Y:.*]] = arith.truncf %[[F]] : f32 to f16
// CHECK-NEXT:      linalg.yield %[[Y]] : f16
func.func @f64_to_f16(%a: tensor<4xf64>) -> tensor<4xf16> {
  %0 = flow.cast %a : tensor<4xf64> -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

// CHECK-LABEL: func.func @iota_bf16(
// CHECK:         math.ctlz
// CHECK:         arith.bitcast %{{.*}} : i16 to bf16
func.func @iota_bf16() -> tensor<300xbf16> {
  %0 = flow.iota dim = 0 -> tensor<300xbf16>
  return %0 : tensor<300xbf16>
}
