"""Jellyfin: the client mirror uses to read items and download originals.

The plain data of Jellyfin's answers lives in `mirror.domain` (`item`, `listing`); the
client (httpx) is `mirror.jellyfin.client`, imported where a client is built, so
commands that never talk to Jellyfin (`mirror show`, `mirror jobs`) start without it.
"""
