"""Text resources for the masked-LM audits: template lists (``templates``). No torch at import time."""
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
