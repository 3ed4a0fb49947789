"""Load generation, apart from transport (GuideLLM's split): profiles and their scheduler, the
workloads they send, the capacity search and the endpoint probe. A backend supplies a
:class:`~runtime.load.transport.Transport` that sends one request; everything here decides
when to send what, and records it."""
