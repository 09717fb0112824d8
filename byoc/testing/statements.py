"""The pieces of a drawn graph: its values, new parameters, proposed and accepted statements."""

from __future__ import annotations

from dataclasses import dataclass, field

from byoc.ir import TensorType


@dataclass(frozen=True)
class Value:
    name: str
    type: TensorType


@dataclass
class Param:
    """A new graph input; its random values lie in ``low..high`` (None: by its dtype)."""

    value: Value
    low: float | None = None
    high: float | None = None


@dataclass
class Proposal:
    """One statement before the catalog checks it: inputs, attributes, new parameters."""

    inputs: list[Value]
    attrs: dict[str, object] = field(default_factory=dict)
    outputs: int = 1


@dataclass(frozen=True)
class Statement:
    """An accepted statement: ``outputs = op(inputs, attrs)``, and the parameters it added."""

    op: str
    outputs: tuple[Value, ...]
    inputs: tuple[Value, ...]
    attrs: tuple[tuple[str, object], ...]
    params: tuple[Param, ...]

    @property
    def call(self) -> str:
        """The right-hand side in DSL: ``conv(p0, p1, strides=[2, 2])``."""
        args = [v.name for v in self.inputs] + [f"{k}={attr_text(v)}" for k, v in self.attrs]
        return f"{self.op}({', '.join(args)})"

    @property
    def text(self) -> str:
        return f"{', '.join(v.name for v in self.outputs)} = {self.call}"

    def signature(self) -> str:
        """The call with its input types, for messages: ``add(float32[2, 3], float32[3])``."""
        args = [str(v.type) for v in self.inputs] + [f"{k}={attr_text(v)}" for k, v in self.attrs]
        return f"{self.op}({', '.join(args)}) -> {', '.join(str(v.type) for v in self.outputs)}"


def attr_text(value: object) -> str:
    """An attribute value as the DSL writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)
