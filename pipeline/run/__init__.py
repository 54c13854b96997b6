"""Running a spec: prepare, plan and blocks, clusters, shipping bars and modules, the
results store and its lock, progress. Imports the spec, never the analyses."""
