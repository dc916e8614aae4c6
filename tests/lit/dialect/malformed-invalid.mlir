// Malformed IR that xDSL alone accepts, mishandles or takes minutes on: each is a located
// diagnostic, found before any pass runs. --verify-diagnostics prints them and exits 0.
// RUN: flow-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | FileCheck %s
// Without those flags the first error is reported MLIR-style and flow-opt exits 1.
// RUN: not flow-opt %s 2>&1 | FileCheck %s --check-prefix=ERR
// ERR: malformed-invalid.mlir:[[# @LINE + 7]]:32: error: End of file reached before closing string literal.
// ERR-NOT: Traceback

// An unterminated string: xDSL's string regex backtracked exponentially (minutes at 30 chars).
// CHECK: malformed-invalid.mlir:[[# @LINE + 3]]:32
// CHECK-NEXT: func.func @f() attributes {a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
// CHECK: End of file reached before closing string literal.
func.func @f() attributes {a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa

// -----

// A splat of 1e8 elements: xDSL expanded it to 1e8 Python floats (8 GB, 35 s).
// CHECK: malformed-invalid.mlir:[[# @LINE + 2]]:35: error: dense literal of 100000000 elements exceeds the limit of 1048576 elements for a splat in IR text; write a splat constant as `flow.full`
func.func @f() -> tensor<100000000xf32> {
  %0 = flow.constant dense<1.0> : tensor<100000000xf32>
  return %0 : tensor<100000000xf32>
}

// -----

// CHECK: malformed-invalid.mlir:[[# @LINE + 2]]:3: error: 'flow.add' op uses its own result (%b); values must be defined before their uses
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %b = flow.add %a, %b : tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// CHECK: malformed-invalid.mlir:[[# @LINE + 2]]:3: error: 'flow.mul' op uses a value defined after it (%c); values must be defined before their uses
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %b = flow.mul %a, %c : tensor<4xf32>
  %c = flow.add %a, %a : tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// CHECK: malformed-invalid.mlir:[[# @LINE + 1]]:25: error: tensor element type must be an integer, index, float or complex type, got tensor<f32>
func.func @f(%a: tensor<tensor<f32>>) {
  return
}

// -----

// CHECK: malformed-invalid.mlir:[[# @LINE + 1]]:25: error: shape dimension 99999999999999999999 is out of range [0, 2^63)
func.func @f(%a: tensor<99999999999999999999xf32>) {
  return
}

// -----

// CHECK: malformed-invalid.mlir:[[# @LINE + 1]]:25: error: tensor<4294967296x4294967296xf32> has 73786976294838206464 bytes, more than int64 can count
func.func @f(%a: tensor<4294967296x4294967296xf32>) {
  return
}

// -----

// A split axis past the rank crashed flow-partition with an IndexError.
// CHECK: malformed-invalid.mlir:[[# @LINE + 1]]:25: error: split dim 7 is out of range for a tensor of rank 2
func.func @f(%a: tensor<8x4xf32, #flow.dist<#flow.placement<"cpu", [0, 1]>, #flow.sbp<[S(7)]>>>) {
  return
}

// -----

// An op's parser checks its types: the error is at the op, not without a location.
// CHECK: malformed-invalid.mlir:[[# @LINE + 2]]:3: error: i32 should be of base attribute tensor
func.func @f(%a: tensor<4xf32>) {
  %0 = flow.add %a, %a : i32
  return
}

// -----

// CHECK: malformed-invalid.mlir:[[# @LINE + 1]]:1: error: Operation func.func contains empty block in single-block region that expects at least a terminator
func.func @f() {
^bb0:
}

// Nesting 20000 deep: a RecursionError in the parser becomes a located diagnostic.
// RUN: %python -c "print('func.func @f() attributes {a = ' + '[' * 20000 + '} { return }')" \
// RUN:   | not flow-opt 2>&1 | FileCheck %s --check-prefix=DEEP
// DEEP: stdin:1:{{[0-9]+}}: error: nesting too deep
// DEEP-NOT: Traceback

// Bytes that are not UTF-8 are a located error, not a UnicodeDecodeError.
// RUN: %python -c "import sys; sys.stdout.buffer.write(b'func.func @f() {\n  \xff\n}\n')" \
// RUN:   | not flow-opt 2>&1 | FileCheck %s --check-prefix=UTF8
// UTF8: stdin:2:3: error: invalid UTF-8 byte 0xff
// UTF8-NOT: Traceback

// An integer type wider than MLIR's limit was accepted and rejected by IREE's parser.
// RUN: %python -c "print('func.func @f(%%a: tensor<4xi99999999>) {\n  return\n}')" \
// RUN:   | not flow-opt 2>&1 | FileCheck %s --check-prefix=WIDTH
// WIDTH: stdin:1:27: error: integer bitwidth 99999999 exceeds MLIR's limit of 16777215
// WIDTH-NOT: Traceback

// -----

// Found by the IR fuzzer: a reduction on i1048577 made its identity constant, which xDSL
// cannot print (a ValueError in the lowering).
// CHECK: malformed-invalid.mlir:[[# @LINE + 1]]:25: error: tensor element type i1048577 is wider than 64 bits: flow computes on integers of 1 to 64 bits
func.func @f(%x: tensor<2x3xi1048577>) -> tensor<3xi1048577> {
  %0 = flow.reduce max %x, dims = [0] : tensor<2x3xi1048577> -> tensor<3xi1048577>
  return %0 : tensor<3xi1048577>
}

// -----

// A literal out of its type's range was a ValueError reported without a location.
// CHECK: malformed-invalid.mlir:[[# @LINE + 2]]:22: error: Integer value 99999999999999999999 is out of range for type i32
func.func @f() -> tensor<1xi32> {
  %0 = flow.constant dense<[99999999999999999999]> : tensor<1xi32>
  return %0 : tensor<1xi32>
}
