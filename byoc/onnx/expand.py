"""ONNX ops that byoc has no handler for, but that ONNX defines as a function of other
ops (LinearAttention, CausalConvWithState, ai.onnx.preview's FlexAttention, ...):
imported as that function's nodes.

An op schema may carry a function body, fixed or built for the node at hand (a
*context-dependent* function, which reads the node's attributes and input types).
ONNX's own test suite expands nodes by these bodies into its ``_expanded`` test
models; byoc does the same at import, with the same expansion (onnx's
``function_expand_helper``): the function's inputs and outputs become the node's,
every value it defines gets a name of the node's own, and attribute references take
the node's attributes or the schema's defaults. The expanded nodes are then imported
one by one, at the opset of the function's body, so that each is read by the rules of
the version it was written for. An op byoc has a handler for is never expanded: its
handler knows better (one catalog op instead of a dozen).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .importer import Importer


def function_nodes(imp: Importer, node) -> tuple[list, int] | None:
    """``(nodes, opset)``: the nodes of the function body that ONNX defines ``node``'s
    op by at the model's version of the op's domain (ai.onnx, or another such as
    ai.onnx.preview), renamed for this node, and the body's opset; None when the op
    has no function (or its schema, none at this version)."""
    onnx = imp.onnx
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    version = imp.opset if not domain else imp.domains.get(domain)
    if version is None:
        return None
    try:
        schema = onnx.defs.get_schema(node.op_type, version, domain)
    except Exception:  # noqa: BLE001 - onnx's SchemaError: an op it does not define here
        return None
    if not (schema.has_function or schema.has_context_dependent_function):
        return None
    from onnx.backend.test.case.node import function_expand_helper

    node = _with_defaults(onnx, node, schema)
    versions = [v for v in schema.function_opset_versions if v <= version]
    if versions:
        body = onnx.FunctionProto.FromString(schema.get_function_with_opset_version(max(versions)))
    else:
        versions = [v for v in schema.context_dependent_function_opset_versions if v <= version]
        if not versions:
            return None
        types = [_type_proto(imp, name) for name in node.input]
        if any(t is None for t in types):
            return None  # the body depends on input types that are not known here
        text = schema.get_context_dependent_function_with_opset_version(
            max(versions), node.SerializeToString(), [t.SerializeToString() for t in types]
        )
        body = onnx.FunctionProto.FromString(text)
    prefix = f"{node.op_type}_{imp.index}_{node.output[0]}_expanded_"
    nodes = function_expand_helper(node, body, prefix)
    opset = next((o.version for o in body.opset_import if o.domain in ("", "ai.onnx")), imp.opset)
    return nodes, opset


def _with_defaults(onnx, node, schema):
    """``node`` with the schema's default of every attribute it leaves out, which the
    function body's attribute references read."""
    given = {a.name for a in node.attribute}
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    for name, attribute in schema.attributes.items():
        if name not in given and attribute.default_value.name:
            copy.attribute.append(attribute.default_value)
    return copy


def _type_proto(imp: Importer, name: str):
    """The TypeProto of input ``name`` (an empty name: an omitted optional input)."""
    helper = imp.onnx.helper
    if not name:
        return imp.onnx.TypeProto()
    dtype = imp.dtype(name)
    if dtype is None:
        return None
    try:
        shape = imp.shape(name)
    except Exception:  # noqa: BLE001 - the body may not need the shape
        shape = None
    return helper.make_tensor_type_proto(helper.np_dtype_to_tensor_dtype(dtype), shape)


def expand(imp: Importer, node) -> bool:
    """Import ``node`` as its function's nodes; False when ONNX defines no function for
    its op at the model's opset."""
    found = function_nodes(imp, node)
    if found is None:
        return False
    nodes, opset = found
    imp.used |= {i for n in nodes for i in n.input}
    outer, within = imp.opset, imp.expanding
    imp.opset, imp.expanding = opset, within or (node, outer)
    try:
        for inner in nodes:
            imp.import_node(inner)
    finally:
        imp.opset, imp.expanding = outer, within
    return True
