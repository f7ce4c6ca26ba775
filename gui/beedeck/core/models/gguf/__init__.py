"""GGUF files: what a model file says about itself, read from its header alone.

``header`` scans the header (metadata and tensor table) within hard limits, since a header is untrusted
input; ``reader`` turns it into a :class:`~beedeck.core.models.gguf.reader.ModelInfo` (architecture,
layers, quantisation, split sets, the tokenizer); ``type_tables`` holds ggml's tensor types and
llama.cpp's file types; ``as_json`` stores a ``ModelInfo`` as JSON and back (the Hub sizing cache and the
shipped header set). Outside code imports the module it needs (``gguf.reader`` above all); nothing is
re-exported here.

Owns the file format only: it imports the plumbing (``paths``) and nothing else of ``models``.
"""
