"""SLIM itself: the closed-form equations (paper Eqs. 5-12), the least-squares fit of its
constants, and the error metric the paper reports (MAPE)."""
