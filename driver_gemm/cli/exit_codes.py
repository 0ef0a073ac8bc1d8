"""The exit codes of every command, in a module of their own so that each command module can import them."""

EXIT_OK = 0             # every case passed; compare: no regression
EXIT_FAILED = 1         # a case failed, errored or was invalid; compare: SLOWER or BROKEN; an internal error
EXIT_USAGE = 2          # the command line, a spec or a results file is wrong
EXIT_NO_GPU = 3         # no CUDA driver or GPU, or a tool the command needs is missing
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT); the results so far are kept
EXIT_BROKEN_PIPE = 141  # the reader of stdout went away (128 + SIGPIPE), as `yes | head` reports it
