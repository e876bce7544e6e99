"""CNTK 2.7 on the CPU, run in a Python 3.6 process of its own (interpreter, runtime, backend on
the fwkernels side; server36 and models36 in the CNTK process)."""
