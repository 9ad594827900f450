"""`make bench`: run every benchmark module (each writes its report under bench/out/)."""

from bench import extraction, knowledge_search

if __name__ == "__main__":
    knowledge_search.main([])
    extraction.main([])
