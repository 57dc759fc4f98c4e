"""kimitui: the operator's cockpit for SGLang on 8-GPU hosts."""

__version__ = "0.1.0"
