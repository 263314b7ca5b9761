"""One module per ``absa`` sub-command; each defines ``add_parser(subparsers)``.

The CLI discovers the modules in this package, so adding a command is adding a file.
"""
