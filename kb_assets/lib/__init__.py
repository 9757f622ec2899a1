"""Small leaf helpers that import nothing else of the project: names, text, segmentation, BM25 terms,
process tokens and scratch folders, the chat endpoint client."""
