"""C text shared by every C-family codegen kind: literals and comments, the dtypes'
support text, the exported entries, the per-thread workspace and profiling."""
