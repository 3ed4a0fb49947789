"""Agent loops under injected tool faults (the ``agent_loop`` test kind of the HTTP backend)."""
