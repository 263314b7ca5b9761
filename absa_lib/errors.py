"""The one exception type users see: a clear, single-line message instead of a traceback."""


class AbsaError(Exception):
    """A user-facing error. The CLI prints ``absa: error: <message>`` and exits with status 2.

    Messages name the offending file / field / value, what was expected, and how to fix it.
    """


class RunBusy(AbsaError):
    """The run is being trained by another process. Not a bad input: the CLI exits with status 75
    (``EX_TEMPFAIL``, try again later), which ``absa grid`` reports as "busy", not as a failure."""

    exit_code = 75


class RunStopped(AbsaError):
    """The run was asked to stop (SIGTERM to ``absa train``: ``kill``, a grid stopping its runs, a
    scheduler) and saved its resume state at the batch it had reached. Not a failure of the run: the
    CLI exits with status 143 (128 + SIGTERM), and the same command resumes it at that batch."""

    exit_code = 143


def one_line(err: BaseException, limit: int = 300) -> str:
    """An exception's message on one line (library messages can span several), at most ``limit``
    characters, for the end of an :class:`AbsaError` message."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
