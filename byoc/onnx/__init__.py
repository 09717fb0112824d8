"""byoc's ONNX front end: a model file becomes a byoc program of catalog ops.

* :mod:`.model_import` reads and checks a model file (external data, opsets, names,
  types) and runs the import; :func:`~.model_import.import_onnx` is its entry.
* :mod:`.importer` walks a model's nodes (:class:`~.importer.Importer`) and gives
  each to the handler that its row of the table ``ops.yaml`` names (:mod:`.ops` reads
  the table; ``byoc ops --onnx`` prints it): :mod:`.handlers` has the general ones,
  :mod:`.layers` and :mod:`.tensors` those of layers and tensor ops, and the other
  modules those of one family each (attention, control flow, quantisation, recurrent
  nets, resizing, signal ops, ...). :mod:`.values` turns ONNX values, types and names
  into byoc's.
* :mod:`.backend` runs byoc as an ``onnx.backend`` (ONNX's node test suite), and
  :mod:`.locations` names the ONNX node an error after import comes from.

The package imports the ``onnx`` wheel only when a model is imported.
"""
