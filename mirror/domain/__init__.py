"""The words every layer speaks: jobs, items, errors, progress, keys, durations, log lines.

Plain data and pure functions, no I/O driver: the adapters, the core and the edges all
import from here, and nothing here imports them.
"""
