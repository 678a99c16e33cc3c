"""Running jobs: the claim loop, one attempt, its heartbeat, riding out an outage.

The queue and the pipeline come in through Protocols, built by `mirror.wiring`.
"""
