"""MTC envelope benchmark harness (`mtcenvelope`).

``load(path_or_db, name=None)`` -> the points table of an envelope, from a db run or from a
YAML/CSV export (envelope/README.md, "Export format").
"""


def load(path_or_db, name=None):
    from .export import load as _load
    return _load(path_or_db, name)
