"""Running a spec: prepare, plan and blocks, clusters, shipping bars and modules, the
results store and its lock, progress, and the orchestrator that takes a run through
them in order (:mod:`.orchestrate`). Imports the spec, never the analyses."""
