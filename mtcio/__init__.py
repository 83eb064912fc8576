"""mtcio: I/O profiler and performance predictor for many-task workflows on Gfarm."""
__version__ = "0.1.0"
