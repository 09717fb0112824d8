"""The shipped example graphs and models, installed as data: ``byoc examples -o DIR``
copies them out (byoc/cli/examples.py)."""
