"""flow: a OneFlow-style deep learning framework on MLIR (xDSL) and IREE."""
