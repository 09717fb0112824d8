"""Counting the generations of a build: a warm build that finds its record generates
nothing (byoc/build_records.py)."""

from __future__ import annotations


def count_generations(monkeypatch) -> list[int]:
    """A one-item list that counts the calls of the generator's pipeline from now on."""
    from byoc.generator import pipeline

    calls = [0]
    real = pipeline.generate

    def counting(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "generate", counting)
    return calls
