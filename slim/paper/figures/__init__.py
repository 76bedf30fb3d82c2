"""The paper's figures, as pure functions from the tables of `slim.paper` to matplotlib
`Figure` objects built without pyplot; `common.save_figure` writes them without timestamps.
The only subpackage of `slim` that imports matplotlib (and seaborn)."""
