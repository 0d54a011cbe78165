"""Knowledge bases' storage and embeddings: the index file (``index``) and the embedding
providers (``embeddings``). The rules (names, rights, audit) are in
``services/knowledge_bases.py``."""
