"""Small leaf helpers that import nothing else of the project: names, text, segmentation, BM25 terms,
process tokens, the chat endpoint client."""
