//! Correlation and root-cause ranking as pure functions over time series.
