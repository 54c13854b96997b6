"""What is read back from a results store: rank, robust statistics, walk-forward choice,
rebuilt backtests, trades, plots and the report."""
