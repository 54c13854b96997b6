"""What a run is asked to do: the YAML spec's models and files, grid axes, constraints
and filters, walk-forward windows and cluster settings (``config`` rather than ``spec``:
tools take a ``spec/`` folder for tests). Imports nothing else of the pipeline."""
