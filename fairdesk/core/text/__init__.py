"""Text resources and text transforms: the masked-LM probe's template lists (``templates``), the counterfactual
substitution engine for identity terms (``counterfactual``) and the madlibs sentence set (``madlibs``). No torch at
import time."""
from fairdesk.core.text.templates import (
    ATTR_SLOT,
    BiasTemplates,
    Category,
    CompletionTemplates,
    expand_braces,
    load_bias_templates,
    load_completion_templates,
)

__all__ = ["ATTR_SLOT", "BiasTemplates", "Category", "CompletionTemplates", "expand_braces", "load_bias_templates",
           "load_completion_templates"]
