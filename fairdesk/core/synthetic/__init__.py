"""Synthetic data with known ground truth, for the validity simulations, the benchmarks and the demo: the 004
structural causal model with exact counterfactuals and its counterfactual-invariance benchmark (``scm``,
``cit_benchmark``), synthetic scans (``morpho``), the age cohorts (``age_cohort``), and one generator per audit
family's simulation (``group_sim``, ``slice_sim``, ``mlm_sim``, ``ctf_sim``, ``cv_compare_sim``) plus the group
audit's design space (``design_space``)."""
