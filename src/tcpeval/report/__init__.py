"""Figures, LaTeX tables, the macro file, the reproduction claims and the paper build.

Reads only the tidy tables (tcpeval.analysis) and the design; never a trace.
"""
