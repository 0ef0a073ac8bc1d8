"""The exit codes of every command, and their table for ``driver-gemm --help``, in a module of their own so that
each command module can import them.

One rule for every command, with or without a GPU: what the cases come to decides 1 (an INVALID case is 1 from
`plan` and `run`; `tune` is 1 when no configuration passed, its INVALID ones skipped); a mistake in what was given
is 2; only a tool or GPU without which the command can do nothing is 3 (an optional extra that cannot be made, such
as ``plan --sass`` without a disassembler, is a note).
"""

EXIT_OK = 0             # every case passed; compare: no regression
EXIT_FAILED = 1         # a case failed, errored or was invalid; compare: SLOWER or BROKEN; an internal error
EXIT_USAGE = 2          # the command line, a spec or a results file is wrong
EXIT_NO_GPU = 3         # no CUDA driver or GPU, or a tool the command needs is missing
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT); the results so far are kept
EXIT_BROKEN_PIPE = 141  # the reader of stdout went away (128 + SIGPIPE), as `yes | head` reports it

EXIT_CODES_HELP = """\
exit codes:
  (one rule for every command, with or without a GPU)
  0    every case passed (compare: no case SLOWER or BROKEN)
  1    a case failed, errored or was INVALID (plan and run), a kernel did not compile, a gate
       failed, or compare found a regression; tune: no configuration passed (a sweep's INVALID
       ones are skipped); a file could not be written (disk full: the file there before is
       kept); also an internal error (one line; --debug for the traceback)
  2    bad input: the command line, a spec, or a results file (named with its line or JSON
       path; results files are checked against driver_gemm/results/schema.json, 64 MiB at most);
       an output that is an input or cannot be written there; a closed stdout (>&-)
  3    no CUDA driver or GPU, or a tool the command needs is missing (NVRTC, compute-sanitizer,
       matplotlib, Dask, cuBLAS, Optuna) or refuses (NVML locking clocks without root), or no
       Dask scheduler answers at run --scheduler's address (info: after its NVRTC line, where
       there is no driver or GPU); a tool only an option's extra needs (plan --sass: cuobjdump)
       is a note, and the exit is the plan's
  130  interrupted (Ctrl-C); a run keeps the results so far
  141  stdout was closed early (driver-gemm plan | head): output stops quietly
"""
