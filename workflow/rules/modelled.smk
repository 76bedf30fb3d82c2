# Modelled characterisation (paper Section V, Figs. 3-6): rules to be written.
