"""The embedded simulated host: a simulated SGLang server and a fake NVML.

Only the SGLang process and NVML need a GPU, so only they are simulated:
- ``kimitui sim serve`` (:mod:`kimitui.sim.server`) serves SGLang's HTTP API and
  prints SGLang's log lines, timed by a seeded performance model
  (:mod:`kimitui.sim.perf_model`) run by one scheduler loop (:mod:`kimitui.sim.scheduler`);
- it writes the eight GPUs' state (:mod:`kimitui.sim.gpus`) to the file that
  the fake NVML (:mod:`kimitui.sim.nvml`) reads (:mod:`kimitui.sim.gpustate`).
"""
