"""Counterfactual image generation: the conditional latent diffusion generator and its training state
(:mod:`~fairdesk.core.generation.images`, :mod:`~fairdesk.core.generation.train_state`) and the MINE
disentangling map (:mod:`~fairdesk.core.generation.mine`)."""
