"""Multi-process execution (`flow.distributed`): launching ranks over MPI."""
