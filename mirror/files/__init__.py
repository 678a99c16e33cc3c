"""Files on the worker's disk: work directories, files read while written, freed holes."""
