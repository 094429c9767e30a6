"""The ``aijob`` command line and the local development stack (``make run`` / ``make demo``)."""
