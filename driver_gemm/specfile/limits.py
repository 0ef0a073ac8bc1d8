"""The bounds a spec must stay within, in one place.

A spec is input from a user or from a file someone sent: it must never make
the tool run out of memory, recurse until Python gives up, or loop for hours
before saying anything. Every bound below is checked by counting before
anything is built, and every refusal names the bound and the count.
"""

from __future__ import annotations

MAX_SPEC_BYTES = 1 << 20            # a spec file larger than 1 MiB is refused unread
MAX_YAML_NODES = 100_000            # YAML nodes after expanding every alias (billion-laughs documents)
MAX_YAML_DEPTH = 32                 # nesting of mappings and lists (the shipped specs use 6)
MAX_NUMBER_DIGITS = 40              # characters of one YAML integer (int64 needs 19 digits)

MAX_CASES = 10 ** 6                 # kernels x shapes of one spec; also the shapes alone and one sweep
MAX_DIMENSION = 1 << 40             # M, N or K above this is not a GEMM that fits in any memory
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

MAX_EXPRESSION_CHARS = 1000         # one grid, block, shared-memory or require expression
MAX_EXPRESSION_DEPTH = 100          # nesting of parentheses, and of the parsed tree
MAX_EXPRESSION_NODES = 500          # nodes of the parsed tree

MAX_SOURCE_BYTES = 16 << 20         # a kernel source (the shipped ones are under 40 KiB), refused unread
MAX_BINARY_BYTES = 256 << 20        # a prebuilt CUBIN, fatbin or PTX (the shipped CUBINs are 50 KiB)
MAX_BUILDER_BYTES = 1 << 20         # a builder's Python file, refused unread

MAX_NAME_CHARS = 100                # spec and kernel names (they become file names)
MAX_FUNCTION_CHARS = 8192           # a kernel's function or template-id (a CUTLASS kernel's mangled name: ~1,500)

# A kernel source must be one of these, so that a spec cannot have a compile
# error quote a file that is not a kernel (a key, a password file).
SOURCE_SUFFIXES = (".cu", ".cuh", ".cpp", ".h", ".hpp")
BUILDER_SUFFIXES = (".py",)          # a struct parameter's host builder

# A relative source must stay inside the project of the spec: the nearest folder
# above the spec holding one of these, else the spec's own folder.
PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")

MAX_ARRAY_ELEMENTS = 1024           # elements of one fixed array in a struct argument (``int stride[3]``)
MAX_BUFFER_VALUES = 4096            # values listed in one device buffer's ``fill:``
MAX_BUFFER_BYTES = 1 << 30          # one device buffer of a kernel's own (a workspace), per case
