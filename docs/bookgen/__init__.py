"""The book's build machinery, called by docs/hooks.py: listings, generated pages and the checks that keep
the book true to the code (stamped outputs, notebook links, test references, the glossary, vendored files).
"""
