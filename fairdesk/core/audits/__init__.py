"""The audits, one module per family: group gaps and the error spread (``groups``, which runs them from
``group_plan`` — the plan and its correction —, ``group_counts``, ``group_tests`` and ``group_records`` — the
document and its findings), slices nobody named (``slices``), the masked-LM bias probe (``mlm_bias``) and encoder
comparison (``encoders``), counterfactual token fairness (``ctf``, ``ctf_compare``), counterfactual invariance of
image classifiers (``cit``, ``cit_images``), the age-independent learners' protocol (``age_independence``) and the
fairness monitor over time (``monitor``); ``rates`` gives every audited group's rates with their intervals. Each
returns a document the project stores."""
