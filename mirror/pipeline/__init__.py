"""One job's steps: download -> transcode -> upload -> mark_done, and what overlaps them.

The adapters sit behind the Protocols in `mirror.pipeline.steps`.
"""
