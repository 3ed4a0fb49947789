"""Benchmarks on remote hosts over SSH.

* ``snapshot``: the exact project source that runs here, packed with a digest;
* ``ssh``: Fabric connections with verified host keys and failure classification;
* ``agent``: what runs on the host (install, check, run the matrix; stdlib-only at import);
* ``failed``: failed run artifacts for configurations a host could not measure;
* ``controller``: one host end to end, and several hosts in parallel.

Nothing here is imported by ``runtime.remote.agent`` except this docstring: the agent
must start on a host where only the standard library is there yet.
"""
