"""The reproduction of the SLIM paper on top of the library: held-out settings and their
evaluation (Tables II-IV), the advisor study (Tables V-VI, Figs. 12-13), Fig. 11's unseen
models, the measured, analytical and modelled characterisation (Figs. 1-6, Table I), the
simulator's validation, LaTeX/Markdown tables and the CI headline check. `figures/` draws them;
it is the only place matplotlib is imported."""
