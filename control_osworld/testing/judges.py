"""A scripted judge: an inspect model that answers a fixed list of replies in order, for
testing what goes through the judging engine (monitors, classifiers, the discriminator)
without a network or a provider."""

from __future__ import annotations

__all__ = ["scripted_judge"]


def scripted_judge(replies: list[str], model: str = "mockllm/model"):
    """inspect's mockllm with `replies` as its outputs, one per call (token usage set, so no
    tokenizer is downloaded to count them)."""
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    outputs = []
    for text in replies:
        out = ModelOutput.from_content(model, text)
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        outputs.append(out)
    return get_model(model, custom_outputs=outputs, memoize=False)
