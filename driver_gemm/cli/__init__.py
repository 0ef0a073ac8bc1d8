"""The ``driver-gemm`` command: thin glue over the library, one module per command.

Exit codes (`exit_codes.EXIT_CODES_HELP`, also in ``driver-gemm --help``): 0 every
case passed; 1 a case failed, errored or was invalid (or an internal error);
2 the command line, a spec or a results file is wrong; 3 no CUDA driver or
GPU, or a missing tool; 130 interrupted; 141 stdout closed early.
"""

from .main import (EXIT_BROKEN_PIPE, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NO_GPU, EXIT_OK, EXIT_USAGE,
                   build_parser, exit_code_for, main)

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_NO_GPU", "EXIT_OK", "EXIT_USAGE",
           "build_parser", "exit_code_for", "main"]
