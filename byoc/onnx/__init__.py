"""byoc's ONNX front end: a model file becomes a byoc program of catalog ops.

* :mod:`.model_import` reads and checks a model file (external data, opsets, names,
  types) and runs the import; :func:`~.model_import.import_onnx` is its entry.
* :mod:`.ops` holds the importer's state and the node handlers, which the table
  ``ops.yaml`` assigns to each ONNX op type (``byoc ops --onnx`` prints it); the other
  modules hold the handlers of one family each (attention, control flow, quantisation,
  recurrent nets, resizing, signal ops, ...).
* :mod:`.backend` runs byoc as an ``onnx.backend`` (ONNX's node test suite), and
  :mod:`.locations` names the ONNX node an error after import comes from.

The package imports the ``onnx`` wheel only when a model is imported.
"""
