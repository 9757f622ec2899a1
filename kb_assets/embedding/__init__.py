"""The encoder (model.py) and reuse-or-encode of chunk vectors (vectors.py)."""

# The version of the encoding code (what reaches the model, normalization): bump it when a change of
# this package changes the vectors of the same model; vectors of another version are re-encoded.
EMBEDDING_VERSION = "1"
