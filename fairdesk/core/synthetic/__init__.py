"""Synthetic data with known ground truth: the 004 structural causal model with exact counterfactuals
(:mod:`fairdesk.core.synthetic.scm`) and the counterfactual-invariance benchmark built on it
(:mod:`fairdesk.core.synthetic.cit_benchmark`)."""
