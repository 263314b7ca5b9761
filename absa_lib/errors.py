"""The one exception type users see: a clear, single-line message instead of a traceback."""


class AbsaError(Exception):
    """A user-facing error. The CLI prints ``absa: error: <message>`` and exits with status 2.

    Messages name the offending file / field / value, what was expected, and how to fix it.
    """
