"""Partial outputs: the text an attempt's model call writes, stored in chunks as it is
written, streamed to callers (``JobService.StreamOutput``) and resumed by a later attempt."""
