"""Domain tools on the predictors: the procurement what-if, power, placement of a workload among hosts,
design-space exploration and early stopping."""
